//go:build integration

package v1alpha1

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"

	"github.com/metactl/metactl/internal/testenv"
)

// The tests of this package that need an API server share one, with
// metactl's CRDs installed.
var env *testenv.Environment

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}, &env) }

func apiContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var resourceOfKind = map[string]schema.GroupVersionResource{
	"CompositeController": CompositeControllerResource,
	"DecoratorController": DecoratorControllerResource,
	"ControllerRevision":  ControllerRevisionResource,
}

// validate decodes obj strictly into its type, and returns the problems
// metactl's validation finds in it, then in its defaulted copy.
func validate(t *testing.T, obj map[string]any) (field.ErrorList, field.ErrorList) {
	t.Helper()
	js, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	decode := func(into any) {
		strictErrs, err := sigsjson.UnmarshalStrict(js, into)
		if err != nil {
			t.Fatalf("decoding %s: %v", obj["kind"], err)
		}
		if len(strictErrs) > 0 {
			t.Fatalf("fields the Go types do not know: %v", strictErrs)
		}
	}
	switch obj["kind"] {
	case "CompositeController":
		cc := &CompositeController{}
		decode(cc)
		errs := ValidateCompositeController(cc)
		SetDefaults_CompositeController(cc)
		return errs, ValidateCompositeController(cc)
	case "DecoratorController":
		dc := &DecoratorController{}
		decode(dc)
		errs := ValidateDecoratorController(dc)
		SetDefaults_DecoratorController(dc)
		return errs, ValidateDecoratorController(dc)
	default:
		decode(&ControllerRevision{})
		return nil, nil
	}
}

// jsonValue returns v as encoding/json decodes its encoding, so that
// numbers compare equal whatever their Go type.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEveryMetacontrollerFieldIsKept applies, with kubectl and so with its
// strict field validation, the manifests that together set every field of
// metacontroller's CRDs (TestFullManifestsSetEveryMetacontrollerField),
// reads them back, and checks that the API server kept every field as
// written, and that metactl's validation accepts them, as written and
// defaulted.
func TestEveryMetacontrollerFieldIsKept(t *testing.T) {
	for kind, files := range everyFieldManifests {
		for _, file := range files {
			t.Run(file, func(t *testing.T) {
				if _, err := env.Kubectl(apiContext(t), "apply", "--validate=strict", "-f", filepath.Join("testdata", file)); err != nil {
					t.Fatalf("metactl's CRD refuses what metacontroller's accepts: %v", err)
				}
				for _, want := range manifestDocs(t, file) {
					metadata := want["metadata"].(map[string]any)
					name, _ := metadata["name"].(string)
					namespace, _ := metadata["namespace"].(string)
					client := env.Dynamic.Resource(resourceOfKind[kind]).Namespace(namespace)
					t.Cleanup(func() { _ = client.Delete(context.Background(), name, metav1.DeleteOptions{}) })
					got, err := client.Get(apiContext(t), name, metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					for key, sent := range want {
						if key == "metadata" || key == "status" {
							continue // the server's own, and a subresource
						}
						if diff := cmp.Diff(jsonValue(t, sent), jsonValue(t, got.Object[key])); diff != "" {
							t.Errorf("%s %s: the server changed %s (-applied +stored):\n%s", kind, name, key, diff)
						}
					}
					errs, defaultedErrs := validate(t, got.Object)
					if len(errs) > 0 || len(defaultedErrs) > 0 {
						t.Errorf("%s %s: metactl's validation refuses it: %v; defaulted: %v", kind, name, errs.ToAggregate(), defaultedErrs.ToAggregate())
					}
				}
			})
		}
	}
}

// TestIncompleteManifestsAreAcceptedAndReported creates objects that
// metacontroller's CRDs accept but that cannot run, or run in a way of
// their own: metactl's CRDs accept them too, with strict field validation;
// metactl's validation reports those that cannot run (the controllers turn
// that into Ready=False InvalidSpec) and accepts the others.
func TestIncompleteManifestsAreAcceptedAndReported(t *testing.T) {
	composite := func(spec string) string {
		return `{"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController", "metadata": {"name": "incomplete"}, "spec": ` + spec + `}`
	}
	decorator := func(spec string) string {
		return `{"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController", "metadata": {"name": "incomplete"}, "spec": ` + spec + `}`
	}
	const parent = `"parentResource": {"apiVersion": "ctl.example.com/v1", "resource": "things"}`
	const sync = `"hooks": {"sync": {"webhook": {"url": "http://hook/sync"}}}`
	cases := []struct {
		name      string
		manifest  string
		wantField string // "" when metactl runs it
	}{
		{"no hooks", composite(`{` + parent + `}`), "spec.hooks.sync"},
		{"no sync hook", composite(`{` + parent + `, "hooks": {"finalize": {"webhook": {"url": "http://hook/f"}}}}`), "spec.hooks.sync"},
		{"hook without webhook", composite(`{` + parent + `, "hooks": {"sync": {}}}`), "spec.hooks.sync.webhook"},
		{"webhook without url or service", composite(`{` + parent + `, "hooks": {"sync": {"webhook": {"timeout": "5s"}}}}`), "spec.hooks.sync.webhook"},
		{"empty resource names", composite(`{"parentResource": {"apiVersion": "", "resource": ""}, ` + sync + `}`), "spec.parentResource.apiVersion"},
		{"service without a name", composite(`{` + parent + `, "hooks": {"sync": {"webhook": {"service": {"name": "", "namespace": "ns"}}}}}`), "spec.hooks.sync.webhook.service.name"},
		{"service protocol ftp", composite(`{` + parent + `, "hooks": {"sync": {"webhook": {"service": {"name": "h", "namespace": "ns", "protocol": "ftp"}}}}}`), "spec.hooks.sync.webhook.service.protocol"},
		{"port out of range", composite(`{` + parent + `, "hooks": {"sync": {"webhook": {"service": {"name": "h", "namespace": "ns", "port": 0}}}}}`), "spec.hooks.sync.webhook.service.port"},
		{"authorization and basicAuth", composite(`{` + parent + `, "hooks": {"sync": {"webhook": {"url": "http://hook/sync",
			"authorization": {"secretRef": {"name": "t", "namespace": "ns"}}, "basicAuth": {"secretRef": {"name": "b", "namespace": "ns"}}}}}}`), "spec.hooks.sync.webhook.basicAuth"},
		{"authorization type Basic", composite(`{` + parent + `, "hooks": {"sync": {"webhook": {"url": "http://hook/sync",
			"authorization": {"type": "Basic", "secretRef": {"name": "t", "namespace": "ns"}}}}}}`), "spec.hooks.sync.webhook.authorization.type"},
		{"two CA bundle sources", composite(`{` + parent + `, "hooks": {"sync": {"webhook": {"url": "http://hook/sync",
			"caBundle": {"secretRef": {"name": "a", "namespace": "ns"}, "configMapRef": {"name": "b", "namespace": "ns"}}}}}}`), "spec.hooks.sync.webhook.caBundle"},
		{"no CA bundle source", composite(`{` + parent + `, "hooks": {"sync": {"webhook": {"url": "http://hook/sync", "caBundle": {}}}}}`), "spec.hooks.sync.webhook.caBundle"},
		{"the endpoint config of the hook's host has no CA bundle source", composite(`{` + parent + `, ` + sync + `, "endpointConfigs": [{"host": "hook", "caBundle": {}}]}`), "spec.endpointConfigs[0].caBundle"},
		{"decorator without resources", decorator(`{"resources": [], ` + sync + `}`), "spec.resources"},
		{"decorator without hooks", decorator(`{"resources": [{"apiVersion": "v1", "resource": "pods"}]}`), "spec.hooks.sync"},

		{"url and service: the url wins", composite(`{` + parent + `, "hooks": {"sync": {"webhook": {"url": "http://hook/sync", "service": {"name": "", "namespace": ""}}}}}`), ""},
		{"resync period, timeout and etag durations of zero and less", composite(`{` + parent + `, "resyncPeriodSeconds": 0,
			"hooks": {"sync": {"webhook": {"url": "http://hook/sync", "timeout": "0s", "etag": {"enabled": true, "cacheTimeoutSeconds": 0, "cacheCleanupSeconds": -1}}}}}`), ""},
		{"service protocol in capitals", composite(`{` + parent + `, "hooks": {"sync": {"webhook": {"service": {"name": "h", "namespace": "ns", "protocol": "HTTPS"}, "path": "/sync"}}}}`), ""},
		{"authorization of another scheme, or of none", composite(`{` + parent + `, "hooks": {
			"sync": {"webhook": {"url": "http://hook/sync", "authorization": {"type": "Token", "secretRef": {"name": "t", "namespace": "ns"}}}},
			"finalize": {"webhook": {"url": "http://hook/finalize", "authorization": {"secretRef": {"name": "t", "namespace": "ns", "key": "k"}}}}}}`), ""},
		{"parent resource also a child resource", composite(`{` + parent + `, "childResources": [{"apiVersion": "ctl.example.com/v1", "resource": "things"}], ` + sync + `}`), ""},
		{"ignored hooks, even unusable", composite(`{` + parent + `, "hooks": {"sync": {"webhook": {"url": "http://hook/sync"}}, "preUpdateChild": {}, "postUpdateChild": {"webhook": {}}}}`), ""},
		{"rolling attachments", decorator(`{"resources": [{"apiVersion": "v1", "resource": "pods"}], ` + sync + `,
			"attachments": [{"apiVersion": "v1", "resource": "services", "updateStrategy": {"method": "RollingRecreate"}}, {"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "RollingInPlace"}}]}`), ""},
		{"endpoint config of no hook's host", decorator(`{"resources": [{"apiVersion": "v1", "resource": "pods"}], ` + sync + `, "endpointConfigs": [{"host": "other", "caBundle": {}}]}`), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON([]byte(tc.manifest)); err != nil {
				t.Fatal(err)
			}
			_, err := env.Dynamic.Resource(resourceOfKind[obj.GetKind()]).Create(apiContext(t), obj, metav1.CreateOptions{
				DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
			if err != nil {
				t.Fatalf("metactl's CRD refuses what metacontroller's accepts: %v", err)
			}
			errs, _ := validate(t, obj.Object)
			if tc.wantField == "" {
				if len(errs) > 0 {
					t.Fatalf("metactl's validation refuses it: %v", errs.ToAggregate())
				}
				return
			}
			var fields []string
			for _, err := range errs {
				fields = append(fields, err.Field)
			}
			if !strings.Contains(strings.Join(fields, " "), tc.wantField) {
				t.Fatalf("want an error on %s, got %v", tc.wantField, errs.ToAggregate())
			}
		})
	}
}

// The API server gives a hook without a version the version v1, as
// metacontroller's CRD does: hooks see it in the controller they are sent.
func TestHookVersionDefaultsOnTheServer(t *testing.T) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON([]byte(`{"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController", "metadata": {"name": "versions"},
		"spec": {"parentResource": {"apiVersion": "v1", "resource": "configmaps"}, "hooks": {"sync": {"webhook": {"url": "http://hook/sync"}}, "preUpdateChild": {}}}}`)); err != nil {
		t.Fatal(err)
	}
	created, err := env.Dynamic.Resource(CompositeControllerResource).Create(apiContext(t), obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	for _, hook := range []string{"sync", "preUpdateChild"} {
		if v, _, _ := unstructured.NestedString(created.Object, "spec", "hooks", hook, "version"); v != "v1" {
			t.Errorf("hooks.%s.version = %q, want v1", hook, v)
		}
	}
}
