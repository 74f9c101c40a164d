package manifests_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// renderSharded returns what `kubectl kustomize` renders of
// test/manifests/testdata/sharded: the install (manifests/) with the
// component manifests/deploy/sharded, as manifests/README.md tells a user
// to write it.
func renderSharded(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	objs := decodeAll(t, []byte(kubectl(t, "kustomize", repo(t, "test", "manifests", "testdata", "sharded"))))
	if len(objs) == 0 {
		t.Fatal("kubectl kustomize test/manifests/testdata/sharded rendered nothing")
	}
	return objs
}

// TestShardedKustomize checks that the component manifests/deploy/sharded
// changes the install's Deployment and leader-election Role only, and only
// so: 3 replicas, and --shard-buckets=32 after the install's arguments
// (--leader-elect among them, which sharding needs); one rule more on
// every Lease of metactl's namespace (the members' and buckets' Leases,
// whose names are not known ahead).
func TestShardedKustomize(t *testing.T) {
	base := byKey(t, "kubectl kustomize manifests", render(t))
	sharded := byKey(t, "kubectl kustomize test/manifests/testdata/sharded", renderSharded(t))
	for k, want := range base {
		got, ok := sharded[k]
		if !ok {
			t.Errorf("the sharded install renders no %s", k)
			continue
		}
		if want.GetKind() == "Role" && want.GetName() == "metactl-leader-election" {
			rules, _, _ := unstructured.NestedSlice(got.Object, "rules")
			wantRules, _, _ := unstructured.NestedSlice(want.Object, "rules")
			shardRule := map[string]any{"apiGroups": []any{"coordination.k8s.io"}, "resources": []any{"leases"},
				"verbs": []any{"get", "list", "watch", "update", "delete"}}
			diffObjects(t, k+" rules", map[string]any{"rules": append(wantRules, shardRule)}, map[string]any{"rules": rules})
			w, g := want.DeepCopy(), got.DeepCopy()
			unstructured.RemoveNestedField(w.Object, "rules")
			unstructured.RemoveNestedField(g.Object, "rules")
			diffObjects(t, k+" but rules", w.Object, g.Object)
			continue
		}
		if want.GetKind() != "Deployment" {
			diffObjects(t, k, want.Object, got.Object)
			continue
		}
		if replicas, _, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "replicas"); fmt.Sprint(replicas) != "3" {
			t.Errorf("sharded %s: replicas %v, want 3", k, replicas)
		}
		args := func(o *unstructured.Unstructured) []string {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			var out []string
			for _, a := range cs[0].(map[string]any)["args"].([]any) {
				out = append(out, a.(string))
			}
			return out
		}
		wantArgs := append(args(want), "--shard-buckets=32")
		if got := args(got); !slices.Equal(got, wantArgs) {
			t.Errorf("sharded %s: args %q, want %q", k, got, wantArgs)
		}
		if !slices.Contains(wantArgs, "--leader-elect=true") {
			t.Errorf("sharded %s: args %q lack --leader-elect=true, which --shard-buckets needs", k, wantArgs)
		}
		// The rest is the install's.
		w, g := want.DeepCopy(), got.DeepCopy()
		for _, o := range []*unstructured.Unstructured{w, g} {
			unstructured.RemoveNestedField(o.Object, "spec", "replicas")
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			delete(cs[0].(map[string]any), "args")
			_ = unstructured.SetNestedSlice(o.Object, cs, "spec", "template", "spec", "containers")
		}
		diffObjects(t, k+" but replicas and args", w.Object, g.Object)
	}
	for k := range sharded {
		if _, ok := base[k]; !ok {
			t.Errorf("the sharded install renders %s, which the install does not", k)
		}
	}
}

// TestHelmShardedEqualsKustomize checks that the chart with replicaCount 3
// and sharding.buckets 32 renders what the sharded kustomize install does
// (the same comparison as TestHelmDefaultsEqualKustomize).
func TestHelmShardedEqualsKustomize(t *testing.T) {
	checkHelmEqualsKustomize(t, renderSharded(t), helmTemplate(t, "metactl", namespace, "--set", "replicaCount=3,sharding.buckets=32"))
}

// TestHelmRefusesShardingWithoutLeaderElection checks that the chart does
// not render sharding without leader election, whose Lease namespace and
// identity it needs.
func TestHelmRefusesShardingWithoutLeaderElection(t *testing.T) {
	_, err := runHelm(t, "template", "metactl", repo(t, "charts", "metactl"), "--set", "leaderElection.enabled=false,replicaCount=1,sharding.buckets=32")
	if err == nil || !strings.Contains(err.Error(), "sharding.buckets needs leaderElection.enabled") {
		t.Errorf("helm template with leaderElection.enabled=false and sharding.buckets=32: %v, want the chart's refusal", err)
	}
}
