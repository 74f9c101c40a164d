package manifests_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// digestRef is an image pinned by digest: name[:tag]@sha256:<64 hex>.
var digestRef = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)

// imageProblem returns why ref, an image reference, is not pinned: it has
// no tag and no digest (which pulls latest), or its tag is latest; "" for
// one pinned by digest or by another tag.
func imageProblem(ref string) string {
	if digestRef.MatchString(ref) {
		return ""
	}
	if strings.Contains(ref, "@") {
		return "a digest that is not sha256: and 64 hexadecimal digits"
	}
	name := ref[strings.LastIndex(ref, "/")+1:]
	_, tag, ok := strings.Cut(name, ":")
	switch {
	case !ok || tag == "":
		return "no tag and no digest (Kubernetes pulls latest)"
	case tag == "latest":
		return "the tag latest"
	}
	return ""
}

// imagesIn calls f with every string under a key "image" in v, decoded
// YAML (a container's image, a custom resource's spec.image, ...).
func imagesIn(v any, f func(string)) {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			if s, ok := val.(string); ok && k == "image" {
				f(s)
				continue
			}
			imagesIn(val, f)
		}
	case []any:
		for _, val := range t {
			imagesIn(val, f)
		}
	}
}

// TestImagesArePinned checks every image the repository ships or shows
// to be applied: the kustomize install (and its sharded form), the chart
// rendered with its defaults and with every value set, and the YAML files
// of manifests/ and examples/. None is :latest or untagged; metactl's own
// is the placeholder tag of the chart's appVersion, which a user replaces
// (pinned by digest, manifests/README.md).
func TestImagesArePinned(t *testing.T) {
	check := func(where string, v any) {
		imagesIn(v, func(ref string) {
			if p := imageProblem(ref); p != "" {
				t.Errorf("%s: image %q has %s: pin it by digest (name:tag@sha256:...) or a tag that names one build", where, ref, p)
			}
		})
	}
	for _, o := range render(t) {
		check("kubectl kustomize manifests: "+objectKey(o), o.Object)
	}
	for _, o := range renderSharded(t) {
		check("the sharded install: "+objectKey(o), o.Object)
	}
	for _, args := range [][]string{nil, {"-f", repo(t, "test", "manifests", "testdata", "helm-values-all.yaml")}} {
		for _, o := range helmTemplate(t, "metactl", namespace, args...) {
			check("helm template "+strings.Join(args, " ")+": "+objectKey(o), o.Object)
		}
	}
	files := 0
	for _, dir := range []string{"manifests", "examples"} {
		err := filepath.WalkDir(repo(t, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files++
			for _, o := range decodeAll(t, data) {
				check(path, o.Object)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 10 {
		t.Errorf("only %d YAML files under manifests/ and examples/", files)
	}

	for ref, want := range map[string]bool{
		"ghcr.io/metactl/metactl:latest": false, "ghcr.io/metactl/metactl": false, "localhost:5000/metactl": false,
		"localhost:5000/metactl:v1": true, "nginx:1.27": true, "busybox": false,
		"r.example/metactl:v1@sha256:" + strings.Repeat("ab", 32): true, "r.example/metactl@sha256:0123": false,
	} {
		if got := imageProblem(ref) == ""; got != want {
			t.Errorf("image %q counted pinned %v, want %v", ref, got, want)
		}
	}
}
