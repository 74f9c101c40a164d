package shardtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/shard"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestLabel is on every parent and child of a scenario; its value is the
// scenario's name.
const TestLabel = "sharding.test.metactl.io/test"

var (
	// ThingsGVR and ClusterThingsGVR are the parent resources, from
	// pkg/composite/testdata/crds (CRDPath).
	ThingsGVR        = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "things"}
	ClusterThingsGVR = schema.GroupVersionResource{Group: "test.metactl.io", Version: "v1", Resource: "clusterthings"}
	configMapsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// CRDPath is the folder of the parents' CRDs, from a package of
// test/sharding.
const CRDPath = "../../../pkg/composite/testdata/crds"

// Parents are a scenario's parents, all of one controller.
type Parents struct {
	env  *testenv.Environment
	gvr  schema.GroupVersionResource
	test string
	// Keys are namespace/name (or name), Namespaces those of the parents
	// (or, for a cluster-scoped parent, of its children).
	Keys       []string
	Namespaces []string
	// Value is the spec.value every parent has now.
	Value int64
}

// Scale is the scenarios' size: Namespaces x PerNamespace parents.
type Scale struct{ Namespaces, PerNamespace int }

// Small is the default scale: 120 parents in 40 namespaces.
var Small = Scale{Namespaces: 40, PerNamespace: 3}

// ctx is a context bounded by the test's life and 3 minutes.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c
}

// Namespaces creates n namespaces whose names differ at their start (a
// random prefix), deleted when t ends. The names are drawn until they
// fall into at least 60% of min(n, Buckets) buckets, so that a scenario
// spreads its parents over replicas (40 names in 16 buckets nearly always
// do at the first draw).
func Namespaces(t *testing.T, env *testenv.Environment, n int) []string {
	t.Helper()
	var names []string
	for draw := 0; ; draw++ {
		names = names[:0]
		buckets := map[shard.Bucket]bool{}
		for range n {
			ns := randomWord(8) + "-shard"
			names = append(names, ns)
			buckets[shard.Of(ns, Buckets)] = true
		}
		if len(buckets) >= min(n, Buckets)*6/10 {
			break
		}
		if draw == 100 {
			t.Fatalf("100 draws of %d namespace names fell into too few of %d buckets, the last %v", n, Buckets, names)
		}
	}
	for _, ns := range names {
		if _, err := env.Kube.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	}
	return names
}

// randomWord returns n random lowercase letters.
func randomWord(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = 'a' + b[i]%26
	}
	return string(b)
}

// Controller creates the CompositeController test over gvr's parents
// labelled TestLabel=test, with ConfigMap children and hook h; deleted
// when t ends.
func Controller(t *testing.T, env *testenv.Environment, test string, gvr schema.GroupVersionResource, h *Hook) {
	t.Helper()
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": test},
		"spec": map[string]any{
			"parentResource": map[string]any{"apiVersion": gvr.GroupVersion().String(), "resource": gvr.Resource,
				"labelSelector": map[string]any{"matchLabels": map[string]any{TestLabel: test}}},
			"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "InPlace"}}},
			"generateSelector": true,
			"hooks":            map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": h.URL}}},
		},
	}}
	if _, err := env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Create(ctx(t), cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(v1alpha1.CompositeControllerResource).Delete(context.Background(), test, metav1.DeleteOptions{})
	})
}

// NamespacedParents creates perNS Things in each namespace, with varied
// names, labelled for test, with spec.value 1.
func NamespacedParents(t *testing.T, env *testenv.Environment, test string, namespaces []string, perNS int) *Parents {
	t.Helper()
	ps := &Parents{env: env, gvr: ThingsGVR, test: test, Namespaces: namespaces, Value: 1}
	for _, ns := range namespaces {
		for range perNS {
			name := randomWord(6) + "-p"
			ps.create(t, ns, name, nil)
			ps.Keys = append(ps.Keys, key(ns, name))
		}
	}
	return ps
}

// ClusterParent creates one ClusterThing labelled for test, whose
// children are in each of namespaces, with spec.value 1.
func ClusterParent(t *testing.T, env *testenv.Environment, test string, namespaces []string) *Parents {
	t.Helper()
	ps := &Parents{env: env, gvr: ClusterThingsGVR, test: test, Namespaces: namespaces, Value: 1}
	name := test + "-" + randomWord(5)
	ps.create(t, "", name, namespaces)
	ps.Keys = []string{name}
	return ps
}

func (ps *Parents) create(t *testing.T, ns, name string, childNamespaces []string) {
	t.Helper()
	spec := map[string]any{"value": ps.Value}
	if childNamespaces != nil {
		nss := make([]any, len(childNamespaces))
		for i, n := range childNamespaces {
			nss[i] = n
		}
		spec["namespaces"] = nss
	}
	kind := map[string]string{"things": "Thing", "clusterthings": "ClusterThing"}[ps.gvr.Resource]
	meta := map[string]any{"name": name, "labels": map[string]any{TestLabel: ps.test}}
	if ns != "" {
		meta["namespace"] = ns
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": ps.gvr.GroupVersion().String(), "kind": kind, "metadata": meta, "spec": spec}}
	if _, err := ps.env.Dynamic.Resource(ps.gvr).Namespace(ns).Create(ctx(t), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ns == "" {
		t.Cleanup(func() { _ = ps.env.Dynamic.Resource(ps.gvr).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
}

// Bump sets every parent's spec.value to Value+1 (a merge patch each)
// and returns when it started.
func (ps *Parents) Bump(t *testing.T) time.Time {
	t.Helper()
	start := time.Now()
	ps.Value++
	patch := fmt.Appendf(nil, `{"spec":{"value":%d}}`, ps.Value)
	for _, k := range ps.Keys {
		ns, name := split(k)
		if _, err := ps.env.Dynamic.Resource(ps.gvr).Namespace(ns).Patch(ctx(t), name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return start
}

// Converged returns a condition: every parent's status.observedValue is
// Value, and every child it asks for exists with data.value Value. Its
// error names what is not yet so.
func (ps *Parents) Converged(ctx context.Context) (bool, error) {
	sel := metav1.ListOptions{LabelSelector: TestLabel + "=" + ps.test}
	parents, err := ps.env.Dynamic.Resource(ps.gvr).List(ctx, sel)
	if err != nil {
		return false, err
	}
	children, err := ps.env.Dynamic.Resource(configMapsGVR).List(ctx, sel)
	if err != nil {
		return false, err
	}
	childValue := map[string]string{}
	for _, c := range children.Items {
		v, _, _ := unstructured.NestedString(c.Object, "data", "value")
		childValue[c.GetNamespace()+"/"+c.GetName()] = v
	}
	want := strconv.FormatInt(ps.Value, 10)
	var behind []string
	for _, p := range parents.Items {
		observed, _, _ := unstructured.NestedInt64(p.Object, "status", "observedValue")
		ok := observed == ps.Value
		if p.GetNamespace() != "" {
			ok = ok && childValue[p.GetNamespace()+"/"+p.GetName()+"-child"] == want
		} else {
			for _, ns := range ps.Namespaces {
				ok = ok && childValue[ns+"/"+p.GetName()+"-child"] == want
			}
		}
		if !ok {
			behind = append(behind, key(p.GetNamespace(), p.GetName()))
		}
	}
	if len(parents.Items) != len(ps.Keys) {
		return false, fmt.Errorf("%d parents listed, want %d", len(parents.Items), len(ps.Keys))
	}
	if len(behind) > 0 {
		return false, fmt.Errorf("%d of %d parents not converged to value %d, e.g. %v", len(behind), len(ps.Keys), ps.Value, behind[:min(len(behind), 5)])
	}
	return true, nil
}

// WaitConverged waits up to timeout for Converged and returns how long it
// took from since.
func (ps *Parents) WaitConverged(t *testing.T, since time.Time, timeout time.Duration, what string) time.Duration {
	t.Helper()
	testenv.Eventually(t, timeout-time.Since(since), what, ps.Converged)
	took := time.Since(since)
	t.Logf("%s: %v", what, took.Round(100*time.Millisecond))
	return took
}

func split(k string) (ns, name string) {
	for i := range len(k) {
		if k[i] == '/' {
			return k[:i], k[i+1:]
		}
	}
	return "", k
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
