//go:build integration

package composite_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/composite"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
)

// TestTakeOverFromMetacontrollerWritesNothing: parents and children that
// metacontroller converged, exactly as it writes them, are taken over by
// metactl without a single write when the hook still answers the same.
//
// The objects are written here the way metacontroller writes them (see
// its internal/engine/common/manage_children.go and composite controller):
// each child created with the last-applied annotation holding the hook's
// child as json.Marshal encodes it, recorded before its controller
// reference (apiVersion, kind, name, uid, controller, blockOwnerDeletion)
// is appended to the hook's owner references; parents carrying the
// finalizer metacontroller.io/compositecontroller-<name> (the controller
// has a finalize hook) and the status the hook answered plus
// observedGeneration.
//
// Writes are counted three independent ways, which must all be zero:
// every non-GET request metactl's clients send (a counting transport),
// metactl's metactl_object_writes_total metric, and the resourceVersion
// of every object.
//
// Rolling child resources (RollingInPlace) and the ControllerRevisions
// metacontroller keeps for them are not covered here: add a rolling child
// resource to childResources below, write the revisions as metacontroller
// does in writeAsMetacontroller's caller, and list controllerrevisions in
// resourceVersions.
func TestTakeOverFromMetacontrollerWritesNothing(t *testing.T) {
	shared(t)
	ns := env.CreateNamespace(t)

	// An object the hook names as a (non-controller) owner of one child:
	// metacontroller writes that child's owner references in another order
	// than metactl's desired state.
	anchor, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(ctx(t), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "anchor"},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The hook: the same answer for metacontroller (below) and metactl.
	answer := func(parent *unstructured.Unstructured) (status map[string]any, children []map[string]any) {
		name := parent.GetName()
		value, _, _ := unstructured.NestedString(parent.Object, "spec", "value")
		cm := configMapChild(parent, name+"-cm", map[string]any{"value": value, "html": "<b>" + value + "</b> & more"})
		children = []map[string]any{cm}
		switch name {
		case "anchored":
			cm["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "name": anchor.GetName(), "uid": string(anchor.GetUID()),
			}}
		case "secret-data":
			children = append(children, map[string]any{
				"apiVersion": "v1", "kind": "Secret",
				"metadata": map[string]any{"name": name + "-secret", "labels": map[string]any{"parent": name}},
				"data":     map[string]any{"token": base64.StdEncoding.EncodeToString([]byte("s3cret-" + value))},
			})
		case "secret-stringdata":
			children = append(children, map[string]any{
				"apiVersion": "v1", "kind": "Secret",
				"metadata":   map[string]any{"name": name + "-secret", "labels": map[string]any{"parent": name}},
				"stringData": map[string]any{"token": "s3cret-" + value},
			})
		}
		return map[string]any{"value": value, "replicas": int64(2), "ratio": 0.5}, children
	}
	hook := newTestHook(t, func(req *syncRequest) any {
		status, children := answer(req.Parent)
		return map[string]any{"status": status, "children": children}
	})
	cc := compositeController(t, hook, thingsGVR, func(spec map[string]any) {
		spec["childResources"] = []any{
			map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "InPlace"}},
			map[string]any{"apiVersion": "v1", "resource": "secrets", "updateStrategy": map[string]any{"method": "InPlace"}},
		}
		spec["hooks"].(map[string]any)["finalize"] = map[string]any{"webhook": map[string]any{"url": hook.server.URL + "/finalize"}}
		// Only this run's parents: with -count, the parents of an earlier
		// run, in a namespace still being deleted, are not this one's.
		spec["parentResource"].(map[string]any)["labelSelector"] = map[string]any{"matchLabels": map[string]any{"test": ns}}
	})
	finalizerName := "metacontroller.io/compositecontroller-" + cc.GetName()

	// What metacontroller left behind. "old-metacontroller" stands for a
	// metacontroller that did not default the children's namespace
	// before recording them.
	parents := []string{"plain", "anchored", "old-metacontroller", "secret-data", "secret-stringdata"}
	for _, name := range parents {
		parent := writeParentAsMetacontroller(t, ns, name, finalizerName, answer)
		_, children := answer(parent)
		for _, child := range children {
			writeAsMetacontroller(t, parent, child, name != "old-metacontroller")
		}
	}
	t.Cleanup(func() {
		for _, name := range parents {
			_, _ = env.Dynamic.Resource(thingsGVR).Namespace(ns).Patch(context.Background(), name, types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
	})
	before := resourceVersions(t, ns)
	writesBefore := objectWrites(t, cc.GetName())

	// metactl, its clients counting what they send.
	counter := &requestCounter{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(counter.wrap)
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := objectclient.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := startController(t, cc, func(o *composite.Options) { o.Client, o.Objects = client, objs })

	// Every parent's sync has started once the hook was asked about it;
	// Stop waits for the syncs in flight, so afterwards every parent has
	// been synced to the end.
	testenv.Eventually(t, 30*time.Second, "the hook asked about every parent", func(context.Context) (bool, error) {
		asked := map[string]bool{}
		for _, req := range hook.requestsSnapshot() {
			asked[req.Parent.GetName()] = true
		}
		return len(asked) == len(parents), nil
	})
	c.Stop()

	// The hook saw metacontroller's children as metactl's.
	for _, req := range hook.requestsSnapshot() {
		_, want := answer(req.Parent)
		got := len(req.Children["ConfigMap.v1"]) + len(req.Children["Secret.v1"])
		if got != len(want) {
			t.Errorf("hook request for %s lists %d children, want %d", req.Parent.GetName(), got, len(want))
		}
	}

	if sent := counter.writes(); len(sent) > 0 {
		t.Errorf("metactl sent %d writes taking over, want none:\n%s", len(sent), strings.Join(sent, "\n"))
	}
	if n := objectWrites(t, cc.GetName()) - writesBefore; n != 0 {
		t.Errorf("metactl_object_writes_total{controller=%q} grew by %v, want 0", cc.GetName(), n)
	}
	after := resourceVersions(t, ns)
	for obj, rv := range before {
		if after[obj] != rv {
			t.Errorf("%s: resourceVersion %s, was %s before the take-over", obj, after[obj], rv)
		}
	}
	if len(after) != len(before) {
		t.Errorf("objects after the take-over: %v, before: %v", keys(after), keys(before))
	}
}

// writeParentAsMetacontroller creates parent name with metacontroller's
// finalizer and the status it writes: the hook's plus observedGeneration.
func writeParentAsMetacontroller(t *testing.T, ns, name, finalizerName string, answer func(*unstructured.Unstructured) (map[string]any, []map[string]any)) *unstructured.Unstructured {
	t.Helper()
	client := env.Dynamic.Resource(thingsGVR).Namespace(ns)
	parent, err := client.Create(ctx(t), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": thingsGVR.GroupVersion().String(),
		"kind":       "Thing",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"test": ns},
			"finalizers": []any{finalizerName}},
		"spec": map[string]any{"value": "v-" + name, "selector": map[string]any{"matchLabels": map[string]any{"parent": name}}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating parent %s: %v", name, err)
	}
	status, _ := answer(parent)
	status["observedGeneration"] = parent.GetGeneration()
	parent.Object["status"] = status
	if parent, err = client.UpdateStatus(ctx(t), parent, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing the status of parent %s: %v", name, err)
	}
	return parent
}

// writeAsMetacontroller creates the hook's child as metacontroller does:
// namespace defaulted to the parent's (when defaultNamespace), recorded in
// the last-applied annotation as json.Marshal encodes it, then its
// controller reference appended to the hook's owner references.
func writeAsMetacontroller(t *testing.T, parent *unstructured.Unstructured, hookChild map[string]any, defaultNamespace bool) {
	t.Helper()
	obj := (&unstructured.Unstructured{Object: hookChild}).DeepCopy()
	if defaultNamespace && obj.GetNamespace() == "" {
		obj.SetNamespace(parent.GetNamespace())
	}
	recorded, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations["metacontroller.k8s.io/last-applied-configuration"] = string(recorded)
	obj.SetAnnotations(annotations)
	controller, block := true, true
	obj.SetOwnerReferences(append(obj.GetOwnerReferences(), metav1.OwnerReference{
		APIVersion: parent.GetAPIVersion(), Kind: parent.GetKind(), Name: parent.GetName(), UID: parent.GetUID(),
		Controller: &controller, BlockOwnerDeletion: &block,
	}))
	gvr := configMapsGVR
	if obj.GetKind() == "Secret" {
		gvr = secretsGVR
	}
	if _, err := env.Dynamic.Resource(gvr).Namespace(parent.GetNamespace()).Create(ctx(t), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}

// resourceVersions returns the resourceVersion of every parent, ConfigMap and
// Secret in ns, by resource/name.
func resourceVersions(t *testing.T, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, gvr := range []schema.GroupVersionResource{thingsGVR, configMapsGVR, secretsGVR} {
		list, err := env.Dynamic.Resource(gvr).Namespace(ns).List(ctx(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range list.Items {
			if gvr == configMapsGVR && obj.GetName() == "kube-root-ca.crt" {
				continue // the root CA publisher's
			}
			out[gvr.Resource+"/"+obj.GetName()] = obj.GetResourceVersion()
		}
	}
	return out
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// objectWrites sums metactl_object_writes_total for controller, whatever
// the verb and target.
func objectWrites(t *testing.T, controller string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.ObjectWrites)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// requestCounter records the requests other than GET that pass through
// the transports it wraps.
type requestCounter struct {
	mu   sync.Mutex
	sent []string
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet {
			c.mu.Lock()
			c.sent = append(c.sent, fmt.Sprintf("%s %s", r.Method, r.URL.Path))
			c.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (c *requestCounter) writes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.sent...)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
