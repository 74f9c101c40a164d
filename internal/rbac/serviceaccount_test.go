package rbac

import (
	"context"
	"slices"
	"strings"
	"testing"

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
