package discovery

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestNotFoundSuggestsTheClosestResource: a resource looked up by another
// of its names, in another letter case, in the wrong apiVersion or with a
// typo gets a "did you mean"; a name close to nothing gets none.
func TestNotFoundSuggestsTheClosestResource(t *testing.T) {
	server := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", SingularName: "pod", Kind: "Pod", ShortNames: []string{"po"}, Namespaced: true},
			{Name: "configmaps", SingularName: "configmap", Kind: "ConfigMap", ShortNames: []string{"cm"}, Namespaced: true},
			{Name: "events", SingularName: "event", Kind: "Event", ShortNames: []string{"ev"}, Namespaced: true},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", SingularName: "deployment", Kind: "Deployment", ShortNames: []string{"deploy"}, Namespaced: true},
			{Name: "deployments/status", Kind: "Deployment", Namespaced: true},
			{Name: "daemonsets", SingularName: "daemonset", Kind: "DaemonSet", ShortNames: []string{"ds"}, Namespaced: true},
		}},
		{GroupVersion: "events.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "events", SingularName: "event", Kind: "Event", ShortNames: []string{"ev"}, Namespaced: true},
		}},
		{GroupVersion: "batch/v1", APIResources: []metav1.APIResource{
			{Name: "cronjobs", SingularName: "cronjob", Kind: "CronJob", ShortNames: []string{"cj"}, Namespaced: true},
		}},
		{GroupVersion: "ctl.example.com/v1", APIResources: []metav1.APIResource{
			// A CRD without a singular name or short names.
			{Name: "websites", Kind: "Website", Namespaced: true},
		}},
	}}}
	ctx := context.Background()
	m := NewResourceMap(server, Options{})
	if err := m.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		apiVersion, resource string
		want                 string // the error's message; "" for Get's success
	}{
		{"apps/v1", "deployment", `the API server serves no resource "deployment" in apps/v1; did you mean "deployments"?`},
		{"apps/v1", "Deployment", `the API server serves no resource "Deployment" in apps/v1; did you mean "deployments"?`},
		{"apps/v1", "deploy", `the API server serves no resource "deploy" in apps/v1; did you mean "deployments"?`},
		{"apps/v1", "DEPLOYMENTS", `the API server serves no resource "DEPLOYMENTS" in apps/v1; did you mean "deployments"?`},
		{"apps/v1", "deploymnets", `the API server serves no resource "deploymnets" in apps/v1; did you mean "deployments"?`},
		{"apps/v1", "deploymentss", `the API server serves no resource "deploymentss" in apps/v1; did you mean "deployments"?`},
		{"v1", "deployments", `the API server serves no resource "deployments" in v1; did you mean "deployments" in apps/v1?`},
		{"batch/v1beta1", "cronjobs", `the API server serves no resource "cronjobs" in batch/v1beta1; did you mean "cronjobs" in batch/v1?`},
		{"v1", "po", `the API server serves no resource "po" in v1; did you mean "pods"?`},
		{"v1", "confgmaps", `the API server serves no resource "confgmaps" in v1; did you mean "configmaps"?`},
		// The same apiVersion wins over another group's.
		{"v1", "Event", `the API server serves no resource "Event" in v1; did you mean "events"?`},
		{"events.k8s.io/v1", "event", `the API server serves no resource "event" in events.k8s.io/v1; did you mean "events"?`},
		{"ctl.example.com/v1", "website", `the API server serves no resource "website" in ctl.example.com/v1; did you mean "websites"?`},
		{"ctl.example.com/v1", "Website", `the API server serves no resource "Website" in ctl.example.com/v1; did you mean "websites"?`},
		// A typo of a resource of another group is not suggested.
		{"ctl.example.com/v1", "deploymnets", `the API server serves no resource "deploymnets" in ctl.example.com/v1`},
		// Nothing close.
		{"apps/v1", "statefulsets", `the API server serves no resource "statefulsets" in apps/v1`},
		{"v1", "nosuchthings", `the API server serves no resource "nosuchthings" in v1`},
		{"apps/v1", "deployments", ""},
	}
	for _, tc := range cases {
		_, err := m.Get(ctx, tc.apiVersion, tc.resource)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Get(%s, %s):\n got %s\nwant %s", tc.apiVersion, tc.resource, got, tc.want)
		}
		var nf *NotFoundError
		if tc.want != "" && !errors.As(err, &nf) {
			t.Errorf("Get(%s, %s): %T is no *NotFoundError", tc.apiVersion, tc.resource, err)
		}
	}
	// A kind lookup suggests a kind.
	if _, err := m.GetKind(ctx, "apps/v1", "deployment"); err == nil || err.Error() != `the API server serves no resource "deployment" in apps/v1; did you mean "Deployment"?` {
		t.Errorf("GetKind(apps/v1, deployment): %v", err)
	}
}
