package manifests_test

// Tests of the Helm chart charts/metactl: it lints, renders with its
// defaults the very objects of `kubectl kustomize manifests`, renders with
// every option on, and the API server accepts both renderings.
//
// helm is the binary hack/helm.sh builds from the Go module proxy (cached
// outside the repository; built on first use, never skipped). It runs with
// its config, cache and data folders in the test's temporary folder and
// never talks to a cluster: `helm template` renders offline, and the
// renderings go to the API server through kubectl.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/jsondiff"
	"github.com/metactl/metactl/internal/testenv"
)

// helmStandardLabels are the labels the chart adds to every object's
// metadata and the kustomize install does not: Helm's recommended labels
// (https://helm.sh/docs/chart_best_practices/labels/). They are the only
// difference, with the Namespace object (Helm installs into the release
// namespace, --create-namespace), between the chart's default rendering and
// the kustomize install; the comparison removes them (and checks that the
// chart sets them).
var helmStandardLabels = []string{
	"helm.sh/chart",
	"app.kubernetes.io/instance",
	"app.kubernetes.io/managed-by",
	"app.kubernetes.io/version",
}

var (
	chartHelmOnce sync.Once
	chartHelmPath string
	chartHelmErr  error
)

// chartHelm returns the path of the helm binary, building it on first use.
func chartHelm(t *testing.T) string {
	t.Helper()
	chartHelmOnce.Do(func() {
		cmd := exec.Command(repo(t, "hack", "helm.sh"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			chartHelmErr = fmt.Errorf("hack/helm.sh: %w\n%s", err, stderr.String())
			return
		}
		chartHelmPath = strings.TrimSpace(stdout.String())
	})
	if chartHelmErr != nil {
		t.Fatal(chartHelmErr)
	}
	return chartHelmPath
}

// runHelm runs helm with args and returns its standard output and error.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, chartHelm(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		// No cluster: nothing helm does here may reach one.
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// helmTemplate renders the chart (CRDs included) for a release in a
// namespace with the given values files and further arguments.
func helmTemplate(t *testing.T, release, ns string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := runHelm(t, append([]string{"template", release, repo(t, "charts", "metactl"),
		"--namespace", ns, "--include-crds"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, []byte(out))
	if len(objs) == 0 {
		t.Fatal("helm template rendered nothing")
	}
	return objs
}

// writeValues writes values as a YAML file for helm's -f.
func writeValues(t *testing.T, values map[string]any) string {
	t.Helper()
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// objectKey names a rendered object: kind namespace/name.
func objectKey(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// byKey indexes rendered objects by objectKey, failing on duplicates.
func byKey(t *testing.T, what string, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		k := objectKey(o)
		if _, dup := out[k]; dup {
			t.Errorf("%s renders %s twice", what, k)
		}
		out[k] = o
	}
	return out
}

// diffObjects fails the test for each field that differs between want and
// got.
func diffObjects(t *testing.T, what string, want, got any) {
	t.Helper()
	if changes := jsondiff.Diff(want, got); len(changes) > 0 {
		var b strings.Builder
		_ = jsondiff.Write(&b, "  ", changes)
		t.Errorf("%s differs (- kustomize, + helm):\n%s", what, b.String())
	}
}

// TestHelmLint runs `helm lint` and `helm lint --strict` (warnings fail) on
// the chart, with its defaults and with every option on.
func TestHelmLint(t *testing.T) {
	chart := repo(t, "charts", "metactl")
	all := repo(t, "test", "manifests", "testdata", "helm-values-all.yaml")
	for _, args := range [][]string{
		{"lint", chart},
		{"lint", "--strict", chart},
		{"lint", "--strict", chart, "-f", all},
	} {
		out, err := runHelm(t, args...)
		if err != nil {
			t.Error(err)
			continue
		}
		if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
			t.Errorf("helm %s:\n%s", strings.Join(args, " "), out)
		}
	}
}

// TestHelmDefaultsEqualKustomize checks that `helm template metactl
// charts/metactl -n metactl-system --include-crds` renders, object by
// object and field by field, what `kubectl kustomize manifests` renders,
// but for the Namespace object and Helm's standard labels.
func TestHelmDefaultsEqualKustomize(t *testing.T) {
	checkHelmEqualsKustomize(t, render(t), helmTemplate(t, "metactl", namespace))
}

// checkHelmEqualsKustomize checks that charted has, object by object and
// field by field, what kustomized has, but for the Namespace object and
// Helm's standard labels.
func checkHelmEqualsKustomize(t *testing.T, kustomized, charted []*unstructured.Unstructured) {
	t.Helper()
	want := map[string]*unstructured.Unstructured{}
	namespaces := 0
	for k, o := range byKey(t, "kubectl kustomize manifests", kustomized) {
		if o.GetKind() == "Namespace" {
			namespaces++
			continue
		}
		want[k] = o
	}
	if namespaces != 1 {
		t.Errorf("kubectl kustomize manifests renders %d Namespaces, want 1", namespaces)
	}

	got := byKey(t, "helm template", charted)
	for k, o := range got {
		labels := o.GetLabels()
		if o.GetKind() == "CustomResourceDefinition" {
			// crds/ is installed as is: no templating, no labels added.
			continue
		}
		for _, l := range helmStandardLabels {
			if _, ok := labels[l]; !ok {
				t.Errorf("helm template: %s has no label %s", k, l)
			}
			delete(labels, l)
		}
		if len(labels) == 0 {
			unstructured.RemoveNestedField(o.Object, "metadata", "labels")
		} else {
			o.SetLabels(labels)
		}
	}

	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		if !ok {
			t.Errorf("helm template renders no %s", k)
			continue
		}
		diffObjects(t, k, want[k].Object, g.Object)
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("helm template renders %s, which kubectl kustomize manifests does not", k)
		}
	}
}

// TestHelmMonitoringEqualsKustomize checks that the chart's ServiceMonitor,
// PrometheusRule and dashboard ConfigMap, when turned on, are those of
// `kubectl kustomize manifests/monitoring`: same names and namespace, the
// same spec (data for the ConfigMap), and the kustomize labels among the
// chart's.
func TestHelmMonitoringEqualsKustomize(t *testing.T) {
	kustomized := decodeAll(t, []byte(kubectl(t, "kustomize", repo(t, "manifests", "monitoring"))))
	charted := byKey(t, "helm template", helmTemplate(t, "metactl", namespace,
		"--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true,dashboard.enabled=true"))
	kinds := map[string]string{"ServiceMonitor": "spec", "PrometheusRule": "spec", "ConfigMap": "data"}
	seen := map[string]bool{}
	for _, want := range kustomized {
		k := objectKey(want)
		field, ok := kinds[want.GetKind()]
		if !ok {
			t.Errorf("kubectl kustomize manifests/monitoring renders %s, which this test does not compare with the chart", k)
			continue
		}
		seen[want.GetKind()] = true
		got, ok := charted[k]
		if !ok {
			t.Errorf("helm template with monitoring on renders no %s", k)
			continue
		}
		diffObjects(t, k+" "+field, want.Object[field], got.Object[field])
		for l, v := range want.GetLabels() {
			if got.GetLabels()[l] != v {
				t.Errorf("%s: the chart's label %s is %q, kustomize's %q", k, l, got.GetLabels()[l], v)
			}
		}
	}
	for kind := range kinds {
		if !seen[kind] {
			t.Errorf("kubectl kustomize manifests/monitoring renders no %s", kind)
		}
	}
	// Off by default.
	for _, o := range helmTemplate(t, "metactl", namespace) {
		if _, ok := kinds[o.GetKind()]; ok {
			t.Errorf("helm template with the defaults renders %s", objectKey(o))
		}
	}
}

// installPrometheusOperatorCRDsForChart installs the ServiceMonitor and
// PrometheusRule CRDs that hack/prometheus-operator-crds.sh fetches, and
// waits until they are served.
func installPrometheusOperatorCRDsForChart(t *testing.T) {
	t.Helper()
	cmd := exec.Command(repo(t, "hack", "prometheus-operator-crds.sh"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/prometheus-operator-crds.sh: %v\n%s", err, stderr.String())
	}
	dir := strings.TrimSpace(stdout.String())
	kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", dir)
	kubectl(t, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")
}

// dryRunApply writes objs to a file and runs `kubectl apply
// --dry-run=server` on it; it checks that every object was applied.
func dryRunApply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var b bytes.Buffer
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	path := filepath.Join(t.TempDir(), "rendered.yaml")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := kubectl(t, "apply", "--dry-run=server", "-f", path)
	for _, o := range objs {
		if !strings.Contains(out, "/"+o.GetName()+" ") {
			t.Errorf("kubectl apply --dry-run=server says nothing of %s:\n%s", objectKey(o), out)
		}
	}
	if n := strings.Count(out, "(server dry run)"); n != len(objs) {
		t.Errorf("%d objects applied in a server dry run, want %d:\n%s", n, len(objs), out)
	}
}

// TestHelmDryRunServer checks both renderings against the API server: the
// defaults into metactl-system, and every option on into a fresh namespace
// enforcing the restricted Pod Security Standard (as the chart's README
// tells to label it), where a Pod of the Deployment is admitted too.
func TestHelmDryRunServer(t *testing.T) {
	installPrometheusOperatorCRDsForChart(t)

	t.Run("defaults", func(t *testing.T) {
		// A dry run creates no namespace: the namespaced objects need it.
		kubectl(t, "apply", "-f", repo(t, "manifests", "deploy", "namespace.yaml"))
		dryRunApply(t, helmTemplate(t, "metactl", namespace))
	})

	t.Run("every option", func(t *testing.T) {
		ns := env.CreateNamespace(t)
		dashboards := env.CreateNamespace(t)
		kubectl(t, "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted",
			"pod-security.kubernetes.io/enforce-version=latest")
		objs := helmTemplate(t, "platform", ns, "-f", repo(t, "test", "manifests", "testdata", "helm-values-all.yaml"),
			"--set", "dashboard.namespace="+dashboards)
		dryRunApply(t, objs)

		d := &appsv1.Deployment{}
		convert(t, find(t, objs, "Deployment", ns, "platform-metactl"), d)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "metactl-", Namespace: ns, Labels: d.Spec.Template.Labels},
			Spec:       *d.Spec.Template.Spec.DeepCopy(),
		}
		// The ServiceAccount exists only in the dry run.
		pod.Spec.ServiceAccountName = ""
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("creating a pod of the Deployment (dry run): %v", err)
		}
		if _, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "platform-metactl", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after a dry run, getting the Deployment: %v, want NotFound", err)
		}
	})
}

// TestHelmRefusesReplicasWithoutLeaderElection checks that the chart does
// not render several replicas that would each run every controller.
func TestHelmRefusesReplicasWithoutLeaderElection(t *testing.T) {
	_, err := runHelm(t, "template", "metactl", repo(t, "charts", "metactl"), "--set", "leaderElection.enabled=false")
	if err == nil || !strings.Contains(err.Error(), "replicaCount above 1 needs leaderElection.enabled") {
		t.Errorf("helm template with leaderElection.enabled=false and 2 replicas: %v, want the chart's refusal", err)
	}
}

// chartRender is one rendering of the chart, for the checks of
// TestHelmValuesChangeObjects.
type chartRender []*unstructured.Unstructured

// get returns the object of that kind and name, or nil.
func (r chartRender) get(kind, name string) *unstructured.Unstructured {
	for _, o := range r {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// field returns a field of the object of that kind and name.
func (r chartRender) field(kind, name string, path ...string) (any, error) {
	o := r.get(kind, name)
	if o == nil {
		return nil, fmt.Errorf("no %s %s rendered", kind, name)
	}
	v, ok := lookup(o.Object, path...)
	if !ok {
		return nil, fmt.Errorf("%s %s has no .%s", kind, name, strings.Join(path, "."))
	}
	return v, nil
}

// lookup returns the field at path in v: map keys, and list indices
// written as numbers.
func lookup(v any, path ...string) (any, bool) {
	for _, p := range path {
		switch node := v.(type) {
		case map[string]any:
			next, ok := node[p]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(node) {
				return nil, false
			}
			v = node[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// container returns the field of the Deployment's container.
func (r chartRender) container(deployment string, path ...string) (any, error) {
	list, err := r.field("Deployment", deployment, "spec", "template", "spec", "containers")
	if err != nil {
		return nil, err
	}
	containers, _ := list.([]any)
	if len(containers) != 1 {
		return nil, fmt.Errorf("Deployment %s has %d containers, want 1", deployment, len(containers))
	}
	v, ok := lookup(containers[0], path...)
	if !ok {
		return nil, fmt.Errorf("Deployment %s's container has no .%s", deployment, strings.Join(path, "."))
	}
	return v, nil
}

// args returns the arguments of the Deployment metactl's container.
func (r chartRender) args() []string {
	args, _ := r.argsOf("metactl")
	return args
}

// argsOf returns the arguments of the container of the Deployment named
// deployment.
func (r chartRender) argsOf(deployment string) ([]string, error) {
	v, err := r.container(deployment, "args")
	if err != nil {
		return nil, err
	}
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, a := range list {
		out = append(out, fmt.Sprint(a))
	}
	return out, nil
}

// equal returns an error unless got equals want as JSON.
func equal(what string, got, want any) error {
	if changes := jsondiff.Diff(want, got); len(changes) > 0 {
		var b strings.Builder
		_ = jsondiff.Write(&b, "  ", changes)
		return fmt.Errorf("%s (- want, + got):\n%s", what, b.String())
	}
	return nil
}

// hasArg checks that the container's arguments include arg.
func hasArg(arg string) func(r chartRender) error {
	return func(r chartRender) error {
		if !slices.Contains(r.args(), arg) {
			return fmt.Errorf("args %q lack %q", r.args(), arg)
		}
		return nil
	}
}

// fieldIs checks a field of an object.
func fieldIs(kind, name string, want any, path ...string) func(r chartRender) error {
	return func(r chartRender) error {
		got, err := r.field(kind, name, path...)
		if err != nil {
			return err
		}
		return equal(kind+" "+name+" ."+strings.Join(path, "."), got, want)
	}
}

// podField checks a field of the Deployment metactl's Pod spec.
func podField(want any, field string) func(r chartRender) error {
	return fieldIs("Deployment", "metactl", want, "spec", "template", "spec", field)
}

// containerIs checks a field of the Deployment metactl's container.
func containerIs(want any, path ...string) func(r chartRender) error {
	return func(r chartRender) error {
		got, err := r.container("metactl", path...)
		if err != nil {
			return err
		}
		return equal("the container's ."+strings.Join(path, "."), got, want)
	}
}

// absent checks that no object of that kind and name is rendered.
func absent(kind, name string) func(r chartRender) error {
	return func(r chartRender) error {
		if r.get(kind, name) != nil {
			return fmt.Errorf("%s %s rendered", kind, name)
		}
		return nil
	}
}

// all checks each of checks.
func all(checks ...func(r chartRender) error) func(r chartRender) error {
	return func(r chartRender) error {
		var errs []string
		for _, c := range checks {
			if err := c(r); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("%s", strings.Join(errs, "\n"))
		}
		return nil
	}
}

// nestedValues builds a values tree from dotted paths and their values.
func nestedValues(pairs ...any) map[string]any {
	out := map[string]any{}
	for i := 0; i < len(pairs); i += 2 {
		parts := strings.Split(pairs[i].(string), ".")
		m := out
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[parts[len(parts)-1]] = pairs[i+1]
	}
	return out
}

// opaqueValues are the values passed through whole (maps of Kubernetes
// fields, labels, annotations): TestHelmValuesChangeObjects covers each as
// one value rather than each of its keys.
var opaqueValues = []string{
	"commonLabels", "resources", "podSecurityContext", "securityContext", "nodeSelector", "affinity",
	"podAnnotations", "podLabels", "serviceAccount.annotations", "serviceMonitor.labels",
	"prometheusRule.labels", "dashboard.labels", "dashboard.annotations",
}

// valueLeaves returns the dotted paths of values.yaml's values.
func valueLeaves(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !slices.Contains(opaqueValues, path) {
			out = append(out, valueLeaves(path, sub)...)
			continue
		}
		out = append(out, path)
	}
	sort.Strings(out)
	return out
}

// chartValueLeaves returns the dotted paths of charts/metactl/values.yaml's
// values (valueLeaves).
func chartValueLeaves(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(repo(t, "charts", "metactl", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var defaults map[string]any
	if err := yaml.Unmarshal(data, &defaults); err != nil {
		t.Fatal(err)
	}
	return valueLeaves("", defaults)
}

// TestHelmValuesChangeObjects sets each value of values.yaml to something
// other than its default and checks that the rendered objects change as
// the value's comment says (and that the same check fails on the default
// rendering, so that it tests the value). Every value of values.yaml must
// have a case.
func TestHelmValuesChangeObjects(t *testing.T) {
	pullSecrets := []any{map[string]any{"name": "registry-pull"}}
	// Maps merge with the defaults, as Helm merges values: a key set to
	// null is removed.
	resources := map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]any{"cpu": nil, "memory": "512Mi"}}
	wantResources := map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]any{"memory": "512Mi"}}
	podSC := map[string]any{"runAsUser": 65000, "runAsGroup": 65000, "fsGroup": 65000}
	wantPodSC := map[string]any{"runAsNonRoot": true, "runAsUser": 65000, "runAsGroup": 65000, "fsGroup": 65000,
		"seccompProfile": map[string]any{"type": "RuntimeDefault"}}
	containerSC := map[string]any{"runAsUser": 65000, "runAsGroup": 65000, "privileged": nil}
	wantContainerSC := map[string]any{"runAsNonRoot": true, "runAsUser": 65000, "runAsGroup": 65000, "readOnlyRootFilesystem": true,
		"allowPrivilegeEscalation": false, "capabilities": map[string]any{"drop": []any{"ALL"}},
		"seccompProfile": map[string]any{"type": "RuntimeDefault"}}
	nodeSelector := map[string]any{"kubernetes.io/os": "linux"}
	tolerations := []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoSchedule"}}
	// The default anti-affinity replaced by a node affinity.
	affinity := map[string]any{"podAntiAffinity": nil, "nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
		"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "platform", "operator": "Exists"}}}}}}}
	wantAffinity := map[string]any{"nodeAffinity": affinity["nodeAffinity"]}
	spread := []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "metactl"}}}}
	extraEnv := []any{map[string]any{"name": "OTEL_SERVICE_NAME", "value": "metactl-platform"}}
	gomemlimit := []any{map[string]any{"name": "GOMEMLIMIT",
		"valueFrom": map[string]any{"resourceFieldRef": map[string]any{"resource": "limits.memory"}}}}
	extraGroups := []any{map[string]any{"name": "extra", "rules": []any{map[string]any{"alert": "X", "expr": "vector(1)"}}}}
	monitoring := []any{"serviceMonitor.enabled", true, "prometheusRule.enabled", true, "dashboard.enabled", true}

	cases := []struct {
		name   string
		values map[string]any // nil: set the value named by name
		value  any
		covers []string // further paths of values.yaml this case covers
		check  func(r chartRender) error
	}{
		{name: "fullnameOverride", value: "platform", check: all(
			fieldIs("Deployment", "platform", "platform", "metadata", "name"),
			fieldIs("ClusterRoleBinding", "platform-controllers", "metactl-controllers", "roleRef", "name"),
			fieldIs("ValidatingAdmissionPolicyBinding", "platform-controller-account", "platform-controller-account", "spec", "policyName"),
			absent("ClusterRole", "metactl"))},
		{name: "commonLabels", value: map[string]any{"team": "a"}, check: func(r chartRender) error {
			for _, o := range r {
				if o.GetKind() != "CustomResourceDefinition" && o.GetLabels()["team"] != "a" {
					return fmt.Errorf("%s lacks the label team=a", objectKey(o))
				}
			}
			return nil
		}},
		{name: "replicaCount", value: 3, check: fieldIs("Deployment", "metactl", int64(3), "spec", "replicas")},
		{name: "sharding.buckets", value: 32, check: hasArg("--shard-buckets=32")},
		{name: "revisionHistoryLimit", value: 2, check: fieldIs("Deployment", "metactl", int64(2), "spec", "revisionHistoryLimit")},
		{name: "image.repository", value: "registry.example.com/metactl", check: containerIs("registry.example.com/metactl:v0.1.0", "image")},
		{name: "image.tag", value: "v1.2.3", check: containerIs("ghcr.io/metactl/metactl:v1.2.3", "image")},
		{name: "image.digest", values: nestedValues("image.tag", "v1", "image.digest", testDigest),
			check: containerIs("ghcr.io/metactl/metactl@"+testDigest, "image")},
		{name: "image.pullPolicy", value: "IfNotPresent", check: containerIs("IfNotPresent", "imagePullPolicy")},
		{name: "imagePullSecrets", value: pullSecrets, check: podField(pullSecrets, "imagePullSecrets")},
		{name: "resources", value: resources, check: containerIs(wantResources, "resources")},
		{name: "terminationGracePeriodSeconds", value: 45, check: podField(45, "terminationGracePeriodSeconds")},
		{name: "podSecurityContext", value: podSC, check: podField(wantPodSC, "securityContext")},
		{name: "securityContext", value: containerSC, check: containerIs(wantContainerSC, "securityContext")},
		{name: "leaderElection.enabled", values: nestedValues("leaderElection.enabled", false, "replicaCount", 1), check: all(
			fieldIs("Deployment", "metactl", int64(1), "spec", "replicas"),
			func(r chartRender) error {
				for _, a := range r.args() {
					if strings.HasPrefix(a, "--leader-elect") {
						return fmt.Errorf("args %q have %s", r.args(), a)
					}
				}
				return nil
			},
			absent("Role", "metactl-leader-election"),
			absent("RoleBinding", "metactl-leader-election"))},
		{name: "leaderElection.leaseName", value: "other", check: hasArg("--leader-elect-lease-name=other")},
		{name: "leaderElection.leaseDuration", value: "30s", check: hasArg("--leader-elect-lease-duration=30s")},
		{name: "leaderElection.renewDeadline", value: "20s", check: hasArg("--leader-elect-renew-deadline=20s")},
		{name: "leaderElection.retryPeriod", value: "4s", check: hasArg("--leader-elect-retry-period=4s")},
		{name: "metrics.port", value: 9090, check: all(hasArg("--metrics-addr=:9090"),
			containerIs(int64(9090), "ports", "0", "containerPort"),
			fieldIs("Service", "metactl-metrics", []any{map[string]any{"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}}, "spec", "ports"))},
		{name: "health.port", value: 9091, check: all(hasArg("--health-addr=:9091"), containerIs([]any{
			map[string]any{"name": "metrics", "containerPort": 9999, "protocol": "TCP"},
			map[string]any{"name": "health", "containerPort": 9091, "protocol": "TCP"}}, "ports"))},
		{name: "run.logFormat", value: "json", check: hasArg("--log-format=json")},
		{name: "run.logLevel", value: 4, check: hasArg("--v=4")},
		{name: "run.workers", value: 64, check: hasArg("--workers=64")},
		{name: "run.clientQPS", value: 50.5, check: hasArg("--client-qps=50.5")},
		{name: "run.clientBurst", value: 100, check: hasArg("--client-burst=100")},
		{name: "run.applyStrategy", value: "server-side", check: hasArg("--apply-strategy=server-side")},
		{name: "run.refuseApplyConflicts", value: true, check: hasArg("--refuse-apply-conflicts=true")},
		// Deprecated, the opposite of refuseApplyConflicts.
		{name: "run.applyForceConflicts", value: false, check: hasArg("--refuse-apply-conflicts=true")},
		{name: "run.credentialNamespaces", value: []any{"hooks", "team-a"}, check: hasArg("--credential-namespaces=hooks,team-a")},
		{name: "run.requireServiceAccount", value: true, check: hasArg("--require-service-account=true")},
		{name: "run.syncedCondition", value: true, check: hasArg("--synced-condition=true")},
		{name: "run.cacheResync", value: "1h", check: hasArg("--cache-resync=1h")},
		{name: "run.discoveryInterval", value: "1m", check: hasArg("--discovery-interval=1m")},
		{name: "run.maxRetryDelay", value: "5m", check: hasArg("--max-retry-delay=5m")},
		{name: "run.stopGracePeriod", value: "20s", check: hasArg("--stop-grace-period=20s")},
		{name: "run.eventsQPS", value: 0.5, check: hasArg("--events-qps=0.5")},
		{name: "run.eventsBurst", value: 10, check: hasArg("--events-burst=10")},
		{name: "run.eventSourceComponent", value: "metacontroller", check: hasArg("--event-source-component=metacontroller")},
		{name: "run.explain", value: false, check: hasArg("--explain=false")},
		{name: "run.historyMaxBytes", value: 0, check: hasArg("--history-max-bytes=0")},
		{name: "run.record", value: false, check: hasArg("--record=false")},
		// Large numbers print whole, not as 1.6777216e+07.
		{name: "run.recordMaxBytes", value: 16777216, check: hasArg("--record-max-bytes=16777216")},
		{name: "run.recordMaxCalls", value: 50, check: hasArg("--record-max-calls=50")},
		{name: "run.maxHookResponseBytes", value: 8388608, check: hasArg("--max-hook-response-bytes=8388608")},
		{name: "run.hookResponseBudgetBytes", value: 67108864, check: hasArg("--hook-response-budget-bytes=67108864")},
		{name: "run.hookDecodedBudgetBytes", value: 134217728, check: hasArg("--hook-decoded-budget-bytes=134217728")},
		{name: "run.etagCacheMaxBytes", value: 16777216, check: hasArg("--etag-cache-max-bytes=16777216")},
		{name: "run.maxRelatedObjects", value: 5000, check: hasArg("--max-related-objects=5000")},
		{name: "run.pprofAddr", value: "localhost:6060", check: hasArg("--pprof-addr=localhost:6060")},
		{name: "extraArgs", value: []any{"--allow-insecure-credentials"}, check: func(r chartRender) error {
			if args := r.args(); args[len(args)-1] != "--allow-insecure-credentials" {
				return fmt.Errorf("args %q do not end with --allow-insecure-credentials", args)
			}
			return nil
		}},
		{name: "extraEnv", value: extraEnv, check: containerIs(append(slices.Clone(gomemlimit), extraEnv...), "env")},
		{name: "tracing.otlpEndpoint", value: "http://collector.observability:4318", check: containerIs(append(slices.Clone(gomemlimit),
			map[string]any{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://collector.observability:4318"}), "env")},
		{name: "tracing.sampler", value: "parentbased_traceidratio", check: containerIs(append(slices.Clone(gomemlimit),
			map[string]any{"name": "OTEL_TRACES_SAMPLER", "value": "parentbased_traceidratio"}), "env")},
		// A number is passed as its text.
		{name: "tracing.samplerArg", value: 0.25, check: containerIs(append(slices.Clone(gomemlimit),
			map[string]any{"name": "OTEL_TRACES_SAMPLER_ARG", "value": "0.25"}), "env")},
		{name: "nodeSelector", value: nodeSelector, check: podField(nodeSelector, "nodeSelector")},
		{name: "tolerations", value: tolerations, check: podField(tolerations, "tolerations")},
		{name: "affinity", value: affinity, check: podField(wantAffinity, "affinity")},
		// null, not {} (which merges with the default), removes it.
		{name: "affinity", value: nil, check: func(r chartRender) error {
			if v, err := r.field("Deployment", "metactl", "spec", "template", "spec", "affinity"); err == nil {
				return fmt.Errorf("the Pod has an affinity: %v", v)
			}
			return nil
		}},
		{name: "topologySpreadConstraints", value: spread, check: podField(spread, "topologySpreadConstraints")},
		{name: "priorityClassName", value: "system-cluster-critical", check: podField("system-cluster-critical", "priorityClassName")},
		{name: "podAnnotations", value: map[string]any{"a": "b"}, check: fieldIs("Deployment", "metactl", map[string]any{"a": "b"},
			"spec", "template", "metadata", "annotations")},
		{name: "podLabels", value: map[string]any{"team": "a", "app.kubernetes.io/name": "other"}, check: fieldIs("Deployment", "metactl",
			map[string]any{"team": "a", "app.kubernetes.io/name": "metactl", "app.kubernetes.io/component": "controller"},
			"spec", "template", "metadata", "labels")},
		{name: "podDisruptionBudget.enabled", value: false, check: absent("PodDisruptionBudget", "metactl")},
		// Rendered only with more replicas than minAvailable.
		{name: "podDisruptionBudget.minAvailable", values: nestedValues("replicaCount", 3, "podDisruptionBudget.minAvailable", 2),
			check: fieldIs("PodDisruptionBudget", "metactl", 2, "spec", "minAvailable")},
		{name: "rbac.create", value: false, check: func(r chartRender) error {
			for _, o := range r {
				if strings.HasPrefix(o.GetAPIVersion(), "rbac.authorization.k8s.io/") {
					return fmt.Errorf("%s rendered", objectKey(o))
				}
			}
			return nil
		}},
		{name: "serviceAccount.create", value: false, check: all(absent("ServiceAccount", "metactl"),
			podField("default", "serviceAccountName"))},
		{name: "serviceAccount.name", value: "runner", check: all(
			fieldIs("ServiceAccount", "runner", "runner", "metadata", "name"),
			podField("runner", "serviceAccountName"),
			fieldIs("ClusterRoleBinding", "metactl-controllers", "runner", "subjects", "0", "name"),
			func(r chartRender) error {
				v, err := r.field("ValidatingAdmissionPolicy", "metactl-controller-account", "spec", "variables")
				if err != nil {
					return err
				}
				if !strings.Contains(fmt.Sprint(v), "orValue('"+namespace+"/runner')") {
					return fmt.Errorf("the admission policy's default account is not %s/runner: %v", namespace, v)
				}
				return nil
			})},
		{name: "serviceAccount.annotations", value: map[string]any{"a": "b"}, check: fieldIs("ServiceAccount", "metactl",
			map[string]any{"a": "b"}, "metadata", "annotations")},
		{name: "admissionPolicy.enabled", value: false, check: all(absent("ValidatingAdmissionPolicy", "metactl-controller-account"),
			absent("ValidatingAdmissionPolicyBinding", "metactl-controller-account"))},
		{name: "serviceMonitor.enabled", value: true, check: fieldIs("ServiceMonitor", "metactl", "metrics", "spec", "endpoints", "0", "port")},
		{name: "serviceMonitor.interval", values: nestedValues(append(monitoring, "serviceMonitor.interval", "15s")...),
			check: fieldIs("ServiceMonitor", "metactl", "15s", "spec", "endpoints", "0", "interval")},
		{name: "serviceMonitor.scrapeTimeout", values: nestedValues(append(monitoring, "serviceMonitor.scrapeTimeout", "10s")...),
			check: fieldIs("ServiceMonitor", "metactl", "10s", "spec", "endpoints", "0", "scrapeTimeout")},
		{name: "serviceMonitor.labels", values: nestedValues(append(monitoring, "serviceMonitor.labels", map[string]any{"release": "x"})...),
			check: fieldIs("ServiceMonitor", "metactl", "x", "metadata", "labels", "release")},
		{name: "prometheusRule.enabled", value: true, check: fieldIs("PrometheusRule", "metactl", "metactl", "metadata", "name")},
		{name: "prometheusRule.labels", values: nestedValues(append(monitoring, "prometheusRule.labels", map[string]any{"release": "x"})...),
			check: fieldIs("PrometheusRule", "metactl", "x", "metadata", "labels", "release")},
		{name: "prometheusRule.additionalGroups", values: nestedValues(append(monitoring, "prometheusRule.additionalGroups", extraGroups)...),
			check: func(r chartRender) error {
				v, err := r.field("PrometheusRule", "metactl", "spec", "groups")
				if err != nil {
					return err
				}
				groups, _ := v.([]any)
				if len(groups) < 2 {
					return fmt.Errorf("PrometheusRule groups %v: want metactl's and the extra one", groups)
				}
				return equal("the last group", groups[len(groups)-1], extraGroups[0])
			}},
		{name: "dashboard.enabled", value: true, check: fieldIs("ConfigMap", "metactl-dashboard", "1", "metadata", "labels", "grafana_dashboard")},
		{name: "dashboard.labels", values: nestedValues(append(monitoring, "dashboard.labels", map[string]any{"dash": "yes"})...),
			check: fieldIs("ConfigMap", "metactl-dashboard", "yes", "metadata", "labels", "dash")},
		{name: "dashboard.annotations", values: nestedValues(append(monitoring, "dashboard.annotations", map[string]any{"grafana_folder": "P"})...),
			check: fieldIs("ConfigMap", "metactl-dashboard", map[string]any{"grafana_folder": "P"}, "metadata", "annotations")},
		{name: "dashboard.namespace", values: nestedValues(append(monitoring, "dashboard.namespace", "monitoring")...),
			check: fieldIs("ConfigMap", "metactl-dashboard", "monitoring", "metadata", "namespace")},
	}

	// Every value of values.yaml has a case.
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.name] = true
		for _, p := range c.covers {
			covered[p] = true
		}
	}
	leaves := chartValueLeaves(t)
	for _, leaf := range leaves {
		if !covered[leaf] {
			t.Errorf("values.yaml's %s has no case in TestHelmValuesChangeObjects", leaf)
		}
	}
	for p := range covered {
		if !slices.Contains(leaves, p) {
			t.Errorf("TestHelmValuesChangeObjects covers %s, which values.yaml does not have", p)
		}
	}

	defaultRender := chartRender(helmTemplate(t, "metactl", namespace))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			values := c.values
			if values == nil {
				values = nestedValues(c.name, c.value)
			}
			r := chartRender(helmTemplate(t, "metactl", namespace, "-f", writeValues(t, values)))
			if err := c.check(r); err != nil {
				t.Errorf("with %v: %v", values, err)
			}
			if c.check(defaultRender) == nil {
				t.Errorf("the check of %s passes on the default rendering too: it tests nothing", c.name)
			}
		})
	}
}

// TestHelmFlagsExist checks that every flag the chart can set (every
// option on) is a flag of `metactl run`, as its --help lists them.
func TestHelmFlagsExist(t *testing.T) {
	help, err := exec.Command(testenv.BuildMetactl(t), "run", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("metactl run --help: %v\n%s", err, help)
	}
	r := chartRender(helmTemplate(t, "platform", namespace, "-f", repo(t, "test", "manifests", "testdata", "helm-values-all.yaml")))
	d := r.get("Deployment", "platform-metactl")
	if d == nil {
		t.Fatal("no Deployment platform-metactl rendered")
	}
	args, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	list := args[0].(map[string]any)["args"].([]any)
	if len(list) < 20 || list[0] != "run" {
		t.Fatalf("args %v: want run and every flag", list)
	}
	for _, a := range list[1:] {
		name, _, _ := strings.Cut(fmt.Sprint(a), "=")
		if name == "--v" {
			name = "-v, --v"
		}
		if !strings.Contains(string(help), " "+name+" ") {
			t.Errorf("the chart sets %s, which metactl run --help does not list", a)
		}
	}
}

// TestHelmReadmeListsValues checks that the chart's README has a row for
// each value of values.yaml, and none for a value it does not have.
func TestHelmReadmeListsValues(t *testing.T) {
	leaves := chartValueLeaves(t)
	readme, err := os.ReadFile(repo(t, "charts", "metactl", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for line := range strings.SplitSeq(string(readme), "\n") {
		if rest, ok := strings.CutPrefix(line, "| `"); ok {
			key, _, _ := strings.Cut(rest, "`")
			rows[key] = true
		}
	}
	for _, leaf := range leaves {
		if !rows[leaf] {
			t.Errorf("charts/metactl/README.md has no row for the value %s", leaf)
		}
	}
	for key := range rows {
		if !slices.Contains(leaves, key) {
			t.Errorf("charts/metactl/README.md has a row for %s, which values.yaml does not have", key)
		}
	}
}

// crdControllerRevisions is the metactl CRD TestHelmInstallUpgradeUninstall
// deletes so that Helm installs it: no other test of the package runs
// metactl or uses ControllerRevisions meanwhile (they run one at a time).
const crdControllerRevisions = "controllerrevisions.metacontroller.k8s.io"

// aggregatedRole is the aggregated ClusterRole, metactl-controllers
// whatever the install.
const aggregatedRole = "metactl-controllers"

// freeAggregatedRole deletes metactl-controllers when another test left the
// kustomize install's (which a Helm release cannot adopt), and applies
// manifests/deploy/rbac.yaml again after the test.
func freeAggregatedRole(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := env.Kube.RbacV1().ClusterRoles().Delete(ctx, aggregatedRole, metav1.DeleteOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return
	case err != nil:
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, aggregatedRole+" deleted", func(ctx context.Context) (bool, error) {
		_, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, aggregatedRole, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	t.Cleanup(func() {
		kubectl(t, "apply", "-f", repo(t, "manifests", "deploy", "namespace.yaml"))
		kubectl(t, "apply", "-f", repo(t, "manifests", "deploy", "rbac.yaml"))
	})
}

// deleteCRD deletes a CRD and waits until it is gone; after the test, it
// applies it again from manifests/crds if it is missing. It returns the
// deleted CRD's UID.
func deleteCRD(t *testing.T, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	crd, err := env.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := env.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return
		}
		plural, _, _ := strings.Cut(name, ".")
		kubectl(t, "apply", "--server-side", "-f", repo(t, "manifests", "crds", "metacontroller.k8s.io_"+plural+".yaml"))
		kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/"+name)
	})
	if err := env.Dynamic.Resource(crdResource).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "CRD "+name+" deleted", func(ctx context.Context) (bool, error) {
		_, err := env.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	return string(crd.GetUID())
}

// crdUID returns the UID of a CRD, or "" when there is none.
func crdUID(t *testing.T, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	crd, err := env.Dynamic.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(crd.GetUID())
}

// TestHelmInstallUpgradeUninstall installs the chart for real with helm
// into a fresh namespace (release metactl-helmtest), upgrades it with a
// changed value, and uninstalls it: the objects come and go; Helm installs
// a missing CRD (one is deleted first) and leaves it on uninstall; a second
// release, in another namespace, fails to install; the upgrade changes the
// Deployment and no state of metactl-controllers between install and
// upgrade lacks the rules aggregated into it.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	const release = "metactl-helmtest"
	ns := env.CreateNamespace(t)
	chart := repo(t, "charts", "metactl")
	helmKube := func(args ...string) string {
		t.Helper()
		out, err := runHelm(t, append(args, "--kubeconfig", env.KubeconfigPath, "--namespace", ns)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	freeAggregatedRole(t)
	oldCRD := deleteCRD(t, crdControllerRevisions)
	helmKube("install", release, chart)
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			if _, err := runHelm(t, "uninstall", release, "--kubeconfig", env.KubeconfigPath, "--namespace", ns); err != nil {
				t.Error(err)
			}
		}
	})
	// crds/ was installed: Helm created the missing CRD.
	newCRD := crdUID(t, crdControllerRevisions)
	if newCRD == "" || newCRD == oldCRD {
		t.Errorf("after helm install, CRD %s has UID %q (deleted one: %q): Helm did not create it", crdControllerRevisions, newCRD, oldCRD)
	}
	// The README's CRD upgrade: Helm's fields are field manager helm's, so
	// kubectl's server-side apply of a changed CRD conflicts unless it
	// forces.
	t.Run("CRD upgrade needs --force-conflicts", func(t *testing.T) {
		original := repo(t, "manifests", "crds", "metacontroller.k8s.io_controllerrevisions.yaml")
		data, err := os.ReadFile(original)
		if err != nil {
			t.Fatal(err)
		}
		const field = "description: Children are the children that belong to this revision."
		if !strings.Contains(string(data), field) {
			t.Fatalf("%s has no %q", original, field)
		}
		changed := filepath.Join(t.TempDir(), "crd.yaml")
		if err := os.WriteFile(changed, []byte(strings.Replace(string(data), field, field+" (newer)", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := env.Kubectl(ctx, "apply", "--server-side", "-f", changed)
		if err == nil || !strings.Contains(err.Error()+out, `conflict with "helm"`) {
			t.Errorf("kubectl apply --server-side of a changed CRD Helm installed: %v, want a conflict with helm:\n%s", err, out)
		}
		kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", changed)
		kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", original)
	})

	d, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, release, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after helm install: %v", err)
	}
	if got, want := d.Spec.Template.Spec.Containers[0].Args, []string{"run", "--leader-elect=true",
		"--leader-elect-namespace=" + ns, "--metrics-addr=:9999", "--health-addr=:9998"}; !slices.Equal(got, want) {
		t.Errorf("after helm install, the Deployment's args are %q, want %q", got, want)
	}
	if _, err := env.Kube.RbacV1().Roles(ns).Get(ctx, release+"-leader-election", metav1.GetOptions{}); err != nil {
		t.Errorf("after helm install, the leader-election Role in the release's namespace: %v", err)
	}

	// One release per cluster: a second one, under another name in another
	// namespace, fails on metactl-controllers and creates nothing.
	t.Run("second release fails", func(t *testing.T) {
		other := env.CreateNamespace(t)
		out, err := runHelm(t, "install", "second", chart, "--kubeconfig", env.KubeconfigPath, "--namespace", other)
		if err == nil {
			_, _ = runHelm(t, "uninstall", "second", "--kubeconfig", env.KubeconfigPath, "--namespace", other)
			t.Fatalf("a second release installed:\n%s", out)
		}
		if !strings.Contains(err.Error(), aggregatedRole) {
			t.Errorf("the second release failed, but not on %s: %v", aggregatedRole, err)
		}
		if _, err := env.Kube.AppsV1().Deployments(other).Get(ctx, "second-metactl", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after the second release failed, getting its Deployment: %v, want NotFound", err)
		}
		if _, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, "second-metactl", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after the second release failed, getting its ClusterRole: %v, want NotFound", err)
		}
		cr, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, aggregatedRole, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if owner := cr.Annotations["meta.helm.sh/release-name"]; owner != release {
			t.Errorf("%s belongs to release %q, want %q", aggregatedRole, owner, release)
		}
	})

	// A controller's ClusterRole, aggregated into metactl-controllers.
	aggregated := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "helmtest-", Labels: map[string]string{aggregationLabel: "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"example.metactl.io"}, Resources: []string{"helmtests"}, Verbs: []string{"get"}}},
	}
	aggregated, err = env.Kube.RbacV1().ClusterRoles().Create(ctx, aggregated, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Kube.RbacV1().ClusterRoles().Delete(context.Background(), aggregated.Name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	})
	hasAggregatedRule := func(cr *rbacv1.ClusterRole) bool {
		return slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "helmtests") })
	}
	var before *rbacv1.ClusterRole
	testenv.Eventually(t, 30*time.Second, "the labelled ClusterRole aggregated into "+aggregatedRole, func(ctx context.Context) (bool, error) {
		cr, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, aggregatedRole, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		before = cr
		return hasAggregatedRule(cr), nil
	})

	// Every state of metactl-controllers from then on, through the upgrade,
	// up to a marker written after it: none may lack the aggregated rule
	// (an upgrade that wrote its empty rules would show one, even if the
	// aggregation controller filled them again at once).
	watch, err := env.Kube.RbacV1().ClusterRoles().Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + aggregatedRole, ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	helmKube("upgrade", release, chart, "--set", "run.workers=8")
	marker := fmt.Sprintf("after-upgrade-%d", time.Now().UnixNano())
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"metactl.io/test-marker":%q}}}`, marker)
	if _, err := env.Kube.RbacV1().ClusterRoles().Patch(ctx, aggregatedRole, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	states := 0
	deadline := time.After(30 * time.Second)
watching:
	for {
		select {
		case ev, ok := <-watch.ResultChan():
			if !ok {
				t.Fatal("the watch of " + aggregatedRole + " ended before the marker")
			}
			cr, isRole := ev.Object.(*rbacv1.ClusterRole)
			if !isRole {
				t.Fatalf("watch event %s: %v", ev.Type, ev.Object)
			}
			states++
			if ev.Type == "DELETED" || !hasAggregatedRule(cr) {
				t.Errorf("during helm upgrade, %s was %s without the aggregated rules (resourceVersion %s): %+v",
					aggregatedRole, ev.Type, cr.ResourceVersion, cr.Rules)
			}
			if cr.Annotations["metactl.io/test-marker"] == marker {
				break watching
			}
		case <-deadline:
			t.Fatalf("no watch event of %s with the marker within 30s (%d states seen)", aggregatedRole, states)
		}
	}
	d, err = env.Kube.AppsV1().Deployments(ns).Get(ctx, release, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--workers=8") {
		t.Errorf("after helm upgrade --set run.workers=8, the Deployment's args are %q", args)
	}

	helmKube("uninstall", release)
	uninstalled = true
	for what, get := range map[string]func() error{
		"Deployment": func() error {
			_, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, release, metav1.GetOptions{})
			return err
		},
		"ClusterRole": func() error {
			_, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, release, metav1.GetOptions{})
			return err
		},
		"aggregated ClusterRole": func() error {
			_, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, aggregatedRole, metav1.GetOptions{})
			return err
		},
		"ValidatingAdmissionPolicy": func() error {
			_, err := env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, release+"-controller-account", metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); !apierrors.IsNotFound(err) {
			t.Errorf("after helm uninstall, getting the %s: %v, want NotFound", what, err)
		}
	}
	// The CRD Helm created is still there: uninstall leaves crds/ alone.
	if got := crdUID(t, crdControllerRevisions); got != newCRD {
		t.Errorf("after helm uninstall, CRD %s has UID %q, want %q, the one helm install created", crdControllerRevisions, got, newCRD)
	}
}

// crdResource is the CustomResourceDefinition resource.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// chartSchema returns charts/metactl/values.schema.json, decoded.
func chartSchema(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(repo(t, "charts", "metactl", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	return schema
}

// schemaNode follows node's $ref, "#/definitions/<name>" (the only kind
// the chart's schema uses), in root.
func schemaNode(t *testing.T, root, node map[string]any) map[string]any {
	t.Helper()
	ref, ok := node["$ref"].(string)
	if !ok {
		return node
	}
	name, ok := strings.CutPrefix(ref, "#/definitions/")
	defs, _ := root["definitions"].(map[string]any)
	def, found := defs[name].(map[string]any)
	if !ok || !found {
		t.Fatalf("values.schema.json: $ref %q leads nowhere", ref)
	}
	return def
}

// schemaGlobal is the one property the schema describes that values.yaml
// has not: the global values an umbrella chart passes its subcharts.
const schemaGlobal = "global"

// TestHelmSchemaDescribesEveryValue walks values.yaml and
// values.schema.json together: every value of values.yaml has a property
// with a type in the schema (so a new value without one fails here), the
// schema describes no value values.yaml lacks, and every object of the
// chart's own in the schema refuses keys it does not describe
// (additionalProperties: false).
func TestHelmSchemaDescribesEveryValue(t *testing.T) {
	root := chartSchema(t)
	if got := root["$schema"]; got != "http://json-schema.org/draft-07/schema#" {
		t.Errorf("values.schema.json's $schema is %v, want draft-07", got)
	}
	leaves := chartValueLeaves(t)
	for _, leaf := range leaves {
		node := root
		for _, key := range strings.Split(leaf, ".") {
			props, _ := schemaNode(t, root, node)["properties"].(map[string]any)
			next, ok := props[key].(map[string]any)
			if !ok {
				t.Errorf("values.schema.json does not describe %s (no property %q)", leaf, key)
				node = nil
				break
			}
			node = next
		}
		if node != nil && schemaNode(t, root, node)["type"] == nil {
			t.Errorf("values.schema.json gives %s no type", leaf)
		}
	}

	var walk func(path string, node map[string]any)
	walk = func(path string, node map[string]any) {
		node = schemaNode(t, root, node)
		props, ok := node["properties"].(map[string]any)
		if !ok {
			if path != schemaGlobal && !slices.Contains(leaves, path) {
				t.Errorf("values.schema.json describes %s, which values.yaml does not have", path)
			}
			return
		}
		if node["additionalProperties"] != false {
			t.Errorf("values.schema.json: %q has additionalProperties %v, want false", path, node["additionalProperties"])
		}
		if slices.Contains(opaqueValues, path) {
			// A Kubernetes type's schema (resources, securityContext):
			// its keys are the API's, not values.yaml's.
			if !slices.Contains(leaves, path) {
				t.Errorf("values.schema.json describes %s, which values.yaml does not have", path)
			}
			return
		}
		for key, sub := range props {
			p := key
			if path != "" {
				p = path + "." + key
			}
			subNode, ok := sub.(map[string]any)
			if !ok {
				t.Errorf("values.schema.json: %s is not a schema", p)
				continue
			}
			walk(p, subNode)
		}
	}
	walk("", root)
}

// renderedRunArgs returns the container's arguments of the one Deployment
// rendered, whatever its name.
func renderedRunArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var names []string
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			names = append(names, o.GetName())
		}
	}
	if len(names) != 1 {
		t.Fatalf("Deployments rendered: %q, want one", names)
	}
	args, err := chartRender(objs).argsOf(names[0])
	if err != nil || len(args) == 0 || args[0] != "run" {
		t.Fatalf("Deployment %s: arguments %q (%v), want metactl run", names[0], args, err)
	}
	return args
}

// metactlAcceptsArgs runs the metactl binary with the container's
// arguments of a rendering and a kubeconfig that does not exist: metactl
// checks its flags first, so it gets as far as loading the kubeconfig
// only when it accepts them. It returns metactl's output and whether it
// got that far.
func metactlAcceptsArgs(t *testing.T, args []string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.BuildMetactl(t), append(slices.Clone(args),
		"--kubeconfig", filepath.Join(t.TempDir(), "no-kubeconfig"))...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("metactl %q ran without a kubeconfig:\n%s", args, out)
	}
	return string(out), strings.Contains(string(out), "loading the kubeconfig")
}

// TestHelmSchemaAcceptsWhatMetactlAccepts renders the chart with values
// the schema must accept: the defaults, every option on
// (testdata/helm-values-all.yaml), each spelling metactl takes for an
// enumerated flag, and the edges of each flag's range metactl accepts;
// metactl itself accepts the arguments of each rendering (so each case is
// something metactl takes, and the schema refuses none of it).
func TestHelmSchemaAcceptsWhatMetactlAccepts(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{name: "defaults"},
		{name: "every option", args: []string{"-f", repo(t, "test", "manifests", "testdata", "helm-values-all.yaml")}},
		{name: "logFormat text", args: []string{"--set", "run.logFormat=text"}},
		{name: "logLevel above the cap", args: []string{"--set", "run.logLevel=9"}},
		// metactl takes 0 as its default.
		{name: "workers 0", args: []string{"--set", "run.workers=0"}},
		// 0: no fixed limit (the server's 429s set the pace).
		{name: "clientQPS and clientBurst 0", args: []string{"--set", "run.clientQPS=0,run.clientBurst=0"}},
		{name: "applyStrategy client-side", args: []string{"--set", "run.applyStrategy=client-side"}},
		{name: "applyStrategy dynamic-apply", args: []string{"--set", "run.applyStrategy=dynamic-apply"}},
		{name: "applyStrategy three-way-merge", args: []string{"--set", "run.applyStrategy=three-way-merge"}},
		{name: "applyStrategy server-side", args: []string{"--set", "run.applyStrategy=server-side"}},
		{name: "applyStrategy server-side-apply", args: []string{"--set", "run.applyStrategy=server-side-apply"}},
		{name: "credentialNamespaces every namespace", args: []string{"--set", "run.credentialNamespaces={*}"}},
		{name: "durations", args: []string{"--set", "run.cacheResync=0s,run.discoveryInterval=1m30s,run.maxRetryDelay=0.5s," +
			"run.stopGracePeriod=1500ms,leaderElection.leaseDuration=1m,leaderElection.renewDeadline=45s,leaderElection.retryPeriod=5s"}},
		{name: "cacheResync 0", args: []string{"--set-string", "run.cacheResync=0"}},
		{name: "zeroes", args: []string{"--set", "run.historyMaxBytes=0,run.eventsQPS=0,run.eventsBurst=0"}},
		{name: "smallest budgets", args: []string{"--set", "run.recordMaxBytes=1,run.recordMaxCalls=1,run.maxHookResponseBytes=1," +
			"run.hookResponseBudgetBytes=1,run.hookDecodedBudgetBytes=1,run.etagCacheMaxBytes=1,run.maxRelatedObjects=1"}},
		{name: "ports at the edges", args: []string{"--set", "metrics.port=1,health.port=65535"}},
		{name: "samplerArg a number", args: []string{"--set", "tracing.sampler=traceidratio,tracing.samplerArg=1"}},
		// null removes a default (the values' comments say so).
		{name: "nulls", args: []string{"--set", "affinity=null,resources.limits.cpu=null,dashboard.labels.grafana_dashboard=null"}},
		{name: "an umbrella chart's global values", args: []string{"--set", "global.domain=example.com"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := renderedRunArgs(t, helmTemplate(t, "metactl", namespace, c.args...))
			if out, ok := metactlAcceptsArgs(t, args); !ok {
				t.Errorf("metactl refuses the arguments %q of a rendering the schema accepts:\n%s", args, out)
			}
		})
	}
}

// TestHelmSchemaRefusesWrongValues checks that Helm refuses, before
// rendering, values the schema does not describe or that have the wrong
// type, range or spelling, with a message naming the value; and, for the
// values of flags, that metactl refuses them too when the schema is
// skipped (the schema refuses nothing metactl takes).
func TestHelmSchemaRefusesWrongValues(t *testing.T) {
	cases := []struct {
		set  []string // helm template arguments
		want []string // in the message
		// metactl refuses the flag the value renders (checked with
		// --skip-schema-validation).
		metactlRefuses bool
	}{
		{set: []string{"--set", "run.wrkers=8"}, want: []string{"'/run'", "'wrkers'", "not allowed"}},
		{set: []string{"--set", "replicaCont=3"}, want: []string{"'replicaCont'", "not allowed"}},
		{set: []string{"--set", "image.tags=v1"}, want: []string{"'/image'", "'tags'"}},
		{set: []string{"--set", "replicaCount=two"}, want: []string{"'/replicaCount'", "got string, want integer"}},
		{set: []string{"--set", "replicaCount=-1"}, want: []string{"'/replicaCount'", "minimum"}},
		{set: []string{"--set", "metrics.port=70000"}, want: []string{"'/metrics/port'", "maximum"}},
		{set: []string{"--set", "health.port=0"}, want: []string{"'/health/port'", "minimum"}},
		{set: []string{"--set", "rbac.create=yes"}, want: []string{"'/rbac/create'", "want boolean"}},
		{set: []string{"--set", "run.workers=1.5"}, want: []string{"'/run/workers'", "got string", "integer"}, metactlRefuses: true},
		{set: []string{"--set", "run.logFormat=yaml"}, want: []string{"'/run/logFormat'", "'json'"}, metactlRefuses: true},
		{set: []string{"--set", "run.applyStrategy=serverside"}, want: []string{"'/run/applyStrategy'", "'server-side'"}, metactlRefuses: true},
		{set: []string{"--set", "run.credentialNamespaces={Team_A}"}, want: []string{"'/run/credentialNamespaces/0'"}, metactlRefuses: true},
		{set: []string{"--set", "run.cacheResync=30"}, want: []string{"'/run/cacheResync'", "got number"}, metactlRefuses: true},
		{set: []string{"--set", "run.discoveryInterval=30sec"}, want: []string{"'/run/discoveryInterval'"}, metactlRefuses: true},
		{set: []string{"--set", "leaderElection.leaseDuration=15"}, want: []string{"'/leaderElection/leaseDuration'"}, metactlRefuses: true},
		{set: []string{"--set", "run.maxRetryDelay=0s"}, want: []string{"'/run/maxRetryDelay'"}, metactlRefuses: true},
		{set: []string{"--set", "run.stopGracePeriod=-5s"}, want: []string{"'/run/stopGracePeriod'"}, metactlRefuses: true},
		{set: []string{"--set", "run.etagCacheMaxBytes=0"}, want: []string{"'/run/etagCacheMaxBytes'", "minimum"}, metactlRefuses: true},
		{set: []string{"--set", "run.clientQPS=-1"}, want: []string{"'/run/clientQPS'", "minimum"}, metactlRefuses: true},
		{set: []string{"--set", "run.clientBurst=-1"}, want: []string{"'/run/clientBurst'", "minimum"}, metactlRefuses: true},
		{set: []string{"--set", "image.pullPolicy=always"}, want: []string{"'/image/pullPolicy'", "'IfNotPresent'"}},
		{set: []string{"--set", "tracing.sampler=ratio"}, want: []string{"'/tracing/sampler'", "'parentbased_traceidratio'"}},
		{set: []string{"--set", "tracing.samplerArg=2"}, want: []string{"'/tracing/samplerArg'", "maximum"}},
		{set: []string{"--set", "serviceMonitor.interval=30sec"}, want: []string{"'/serviceMonitor/interval'"}},
		{set: []string{"--set", "podLabels.tier=1"}, want: []string{"'/podLabels/tier'", "got number"}},
		{set: []string{"--set", "imagePullSecrets[0]=registry"}, want: []string{"'/imagePullSecrets/0'", "want object"}},
		// Typos in the Kubernetes types the chart passes through, which
		// the API server would refuse after Helm recorded a revision.
		{set: []string{"--set", "resources.limit.cpu=1"}, want: []string{"'/resources'", "'limit'", "not allowed"}},
		{set: []string{"--set", "podSecurityContext.runAsUsr=1000"}, want: []string{"'/podSecurityContext'", "'runAsUsr'", "not allowed"}},
		{set: []string{"--set", "securityContext.readOnlyRootFileSystem=true"}, want: []string{"'/securityContext'", "'readOnlyRootFileSystem'", "not allowed"}},
		{set: []string{"--set", "podSecurityContext.runAsUser=root"}, want: []string{"'/podSecurityContext/runAsUser'", "got string"}},
	}
	chart := repo(t, "charts", "metactl")
	for _, c := range cases {
		t.Run(strings.Join(c.set, " "), func(t *testing.T) {
			_, err := runHelm(t, append([]string{"template", "metactl", chart, "--namespace", namespace}, c.set...)...)
			if err == nil {
				t.Fatalf("helm template %s rendered", strings.Join(c.set, " "))
			}
			if !strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
				t.Errorf("helm template %s failed, but not on the schema: %v", strings.Join(c.set, " "), err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("helm template %s: the message lacks %s:\n%v", strings.Join(c.set, " "), w, err)
				}
			}
			if !c.metactlRefuses {
				return
			}
			args := renderedRunArgs(t, helmTemplate(t, "metactl", namespace, append([]string{"--skip-schema-validation"}, c.set...)...))
			if out, ok := metactlAcceptsArgs(t, args); ok {
				t.Errorf("the schema refuses %s, but metactl accepts the arguments %q:\n%s", strings.Join(c.set, " "), args, out)
			}
		})
	}
}

// TestHelmSchemaApplyStrategies checks that run.applyStrategy's enum in
// the schema is exactly the spellings metactl's --apply-strategy takes
// (those engine.ParseApplyStrategy lists when it refuses one), and ""
// and null (the flag left out).
func TestHelmSchemaApplyStrategies(t *testing.T) {
	_, err := engine.ParseApplyStrategy("no-such-strategy")
	if err == nil {
		t.Fatal("ParseApplyStrategy accepts no-such-strategy")
	}
	_, list, ok := strings.Cut(err.Error(), "want one of")
	if !ok {
		t.Fatalf("ParseApplyStrategy's error lists no spellings: %v", err)
	}
	want := []any{"", nil}
	for _, m := range regexp.MustCompile(`"([^"]+)"`).FindAllStringSubmatch(list, -1) {
		want = append(want, m[1])
	}
	if len(want) < 4 {
		t.Fatalf("ParseApplyStrategy's error lists %v: want at least client-side and server-side", want[2:])
	}
	root := chartSchema(t)
	run, _ := root["properties"].(map[string]any)["run"].(map[string]any)
	props, _ := run["properties"].(map[string]any)
	node, _ := props["applyStrategy"].(map[string]any)
	got, _ := node["enum"].([]any)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("values.schema.json: run.applyStrategy's enum %v lacks %#v, which metactl takes", got, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("values.schema.json: run.applyStrategy's enum has %#v, which metactl does not take", g)
		}
	}
}
