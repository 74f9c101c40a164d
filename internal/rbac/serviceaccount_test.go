package rbac

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/metactl/metactl/pkg/dynamic/discovery"
)

func TestParseServiceAccount(t *testing.T) {
	for _, value := range []string{"team-a/widgets", "a/b.c"} {
		if _, err := ParseServiceAccount(value); err != nil {
			t.Errorf("ParseServiceAccount(%q): %v", value, err)
		}
	}
	for _, value := range []string{"", "widgets", "/widgets", "team-a/", "a/b/c", "Team/x", "a/B_c"} {
		_, err := ParseServiceAccount(value)
		if err == nil || !strings.Contains(err.Error(), "<namespace>/<name>") {
			t.Errorf("ParseServiceAccount(%q): got %v, want an error giving the form <namespace>/<name>", value, err)
		}
	}
	sa, _ := ParseServiceAccount("team-a/widgets")
	if got, want := sa.UserName(), "system:serviceaccount:team-a:widgets"; got != want {
		t.Errorf("UserName: %q, want %q", got, want)
	}
	if got := sa.Groups(); !slices.Equal(got, []string{"system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"}) {
		t.Errorf("Groups: %q", got)
	}
}

// TestClusterWide checks what is asked of an account before its
// controller starts: reads everywhere, and the writes of cluster-scoped
// resources; namespaced writes are left to the API server.
func TestClusterWide(t *testing.T) {
	namespaced := &discovery.Resource{APIVersion: "v1", Name: "configmaps", Namespaced: true}
	cluster := &discovery.Resource{APIVersion: "v1", Name: "namespaces"}
	var asked []string
	review := func(_ context.Context, a *authorizationv1.ResourceAttributes) (bool, error) {
		asked = append(asked, a.Verb+" "+a.Resource+"/"+a.Subresource+" in "+a.Namespace)
		return false, nil
	}
	access := []Access{
		{Resource: namespaced, Verbs: ChildVerbs},
		{Resource: namespaced, Subresource: "status", Verbs: StatusVerbs},
		{Resource: cluster, Verbs: OwnerVerbs},
	}
	denied, err := DeniedBy(context.Background(), review, ClusterWide(access))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"get configmaps/ in ", "list configmaps/ in ", "watch configmaps/ in ",
		"get namespaces/ in ", "list namespaces/ in ", "watch namespaces/ in ", "update namespaces/ in ", "patch namespaces/ in "}
	if !slices.Equal(asked, want) {
		t.Errorf("asked %q, want %q", asked, want)
	}
	if len(denied) != len(want) || denied[0] != "get configmaps" {
		t.Errorf("denied %q", denied)
	}
	reads := Reads(access)
	if len(reads) != 2 || !slices.Equal(reads[0].Verbs, CacheVerbs) || !slices.Equal(reads[1].Verbs, CacheVerbs) {
		t.Errorf("Reads: %+v, want list and watch of each resource", reads)
	}
}

// TestBeforeStart checks where an account's reads are checked: for a
// controller whose synced resources are all namespaced, per namespace
// (InNamespace) and not before it starts; for one that syncs a
// cluster-scoped resource, everywhere before it starts.
func TestBeforeStart(t *testing.T) {
	parents := &discovery.Resource{APIVersion: "example.com/v1", Name: "widgets", Namespaced: true}
	children := &discovery.Resource{APIVersion: "v1", Name: "configmaps", Namespaced: true}
	cluster := &discovery.Resource{APIVersion: "v1", Name: "namespaces"}
	show := func(access []Access) []string {
		var out []string
		for _, a := range access {
			for _, v := range a.Verbs {
				out = append(out, v+" "+a.Resource.Name+"/"+a.Subresource+" in "+a.Namespace)
			}
		}
		return out
	}
	namespaced := []Access{
		{Resource: parents, Verbs: OwnerVerbs, Synced: true},
		{Resource: parents, Subresource: "status", Verbs: StatusVerbs, Synced: true},
		{Resource: children, Verbs: ChildVerbs},
		{Resource: cluster, Verbs: []string{"get", "list", "watch", "create"}},
	}
	if !PerNamespace(namespaced) {
		t.Fatal("PerNamespace: false for namespaced parents")
	}
	if got, want := show(BeforeStart(namespaced)), []string{"get namespaces/ in ", "list namespaces/ in ", "watch namespaces/ in ", "create namespaces/ in "}; !slices.Equal(got, want) {
		t.Errorf("BeforeStart: %q, want %q (the cluster-scoped resource only)", got, want)
	}
	if got, want := show(InNamespace(namespaced, "team-a")), []string{
		"get widgets/ in team-a", "list widgets/ in team-a", "watch widgets/ in team-a",
		"get configmaps/ in team-a", "list configmaps/ in team-a", "watch configmaps/ in team-a",
	}; !slices.Equal(got, want) {
		t.Errorf("InNamespace: %q, want %q", got, want)
	}

	clusterParents := []Access{
		{Resource: cluster, Verbs: OwnerVerbs, Synced: true},
		{Resource: children, Verbs: ChildVerbs},
	}
	if PerNamespace(clusterParents) {
		t.Fatal("PerNamespace: true for cluster-scoped parents, whose children may be in any namespace")
	}
	if got, want := show(BeforeStart(clusterParents)), show(ClusterWide(clusterParents)); !slices.Equal(got, want) {
		t.Errorf("BeforeStart: %q, want ClusterWide's %q", got, want)
	}
	if PerNamespace([]Access{{Resource: children, Verbs: ChildVerbs}}) {
		t.Error("PerNamespace: true without any synced resource")
	}
}

// TestCachedReviewerBound checks that a CachedReviewer keeps at most Max
// answers, the oldest going first, and asks again about one it dropped.
func TestCachedReviewerBound(t *testing.T) {
	asked := map[string]int{}
	c := &CachedReviewer{TTL: time.Hour, Max: 3, Review: func(_ context.Context, a *authorizationv1.ResourceAttributes) (bool, error) {
		asked[a.Namespace]++
		return true, nil
	}}
	ask := func(ns string) {
		t.Helper()
		if _, err := c.Ask(context.Background(), &authorizationv1.ResourceAttributes{Verb: "list", Resource: "configmaps", Namespace: ns}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"a", "b", "c", "a", "d"} {
		ask(ns)
	}
	if n := len(c.answers); n != 3 {
		t.Errorf("%d answers kept, want at most 3", n)
	}
	if asked["a"] != 1 {
		t.Errorf("a asked %d times before the bound was reached, want 1 (cached)", asked["a"])
	}
	ask("a") // "a", the oldest, went for "d"
	if asked["a"] != 2 {
		t.Errorf("a asked %d times, want 2: the oldest answer is dropped when full", asked["a"])
	}
}
