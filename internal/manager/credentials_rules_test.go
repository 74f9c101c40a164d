package manager

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestCheckCredentials: which controllers the credential policy refuses
// before they are built (checkCredentials), with which reason, and what
// the message names: a hook's Secret in a namespace the policy does not
// allow, credentials over plain http, and an endpointConfigs entry's
// credentials, which apply to the hooks of its host. The integration test
// TestCredentialPolicyRefusesControllers checks the same through a
// running manager: conditions, Events, and that refused hooks are never
// called.
func TestCheckCredentials(t *testing.T) {
	kindOf := func(resource string) *kind {
		for _, k := range kinds {
			if k.resource.Resource == resource {
				return k
			}
		}
		t.Fatalf("no kind of %s", resource)
		return nil
	}
	bearer := func(namespace string) map[string]any {
		return map[string]any{"secretRef": map[string]any{"name": "hook-token", "namespace": namespace}}
	}
	composite := func(webhook map[string]any) *unstructured.Unstructured {
		return compositeWithHooks(map[string]any{"sync": map[string]any{"webhook": webhook}})
	}
	decorator := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
		"metadata": map[string]any{"name": "d"},
		"spec": map[string]any{
			"resources": []any{map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "things"}},
			"hooks":     map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": "https://hooks.example.com/sync"}}},
			"endpointConfigs": []any{map[string]any{"host": "hooks.example.com",
				"basicAuth": map[string]any{"secretRef": map[string]any{"name": "hook-basic", "namespace": "other"}}}},
		},
	}}
	for _, tc := range []struct {
		name   string
		opts   Options
		kind   string
		obj    *unstructured.Unstructured
		reason string // "": allowed
		says   []string
	}{
		{name: "a token of an allowed namespace over https", opts: Options{CredentialNamespaces: []string{"allowed"}}, kind: "compositecontrollers",
			obj: composite(map[string]any{"url": "https://hooks.example.com/sync", "authorization": bearer("allowed")})},
		{name: "a token of another namespace", opts: Options{CredentialNamespaces: []string{"allowed"}}, kind: "compositecontrollers",
			obj:    composite(map[string]any{"url": "https://hooks.example.com/sync", "authorization": bearer("other")}),
			reason: v1alpha1.ReasonCredentialNotAllowed, says: []string{"sync hook", "authorization", "Secret other/hook-token", "add the namespace to --credential-namespaces"}},
		{name: "a token over plain http", opts: Options{CredentialNamespaces: []string{"allowed"}}, kind: "compositecontrollers",
			obj:    composite(map[string]any{"url": "http://hooks.example.com/sync", "authorization": bearer("allowed")}),
			reason: v1alpha1.ReasonInsecureCredentials, says: []string{"sync hook", "authorization", "plain http", "--allow-insecure-credentials"}},
		{name: "plain http allowed", opts: Options{CredentialNamespaces: []string{"allowed"}, AllowInsecureCredentials: true}, kind: "compositecontrollers",
			obj: composite(map[string]any{"url": "http://hooks.example.com/sync", "authorization": bearer("allowed")})},
		{name: "an endpointConfigs entry's Secret of another namespace", opts: Options{CredentialNamespaces: []string{"allowed"}}, kind: "decoratorcontrollers",
			obj: decorator, reason: v1alpha1.ReasonCredentialNotAllowed, says: []string{"sync hook", "basicAuth: Secret other/hook-basic"}},
		{name: "the endpointConfigs entry's namespace allowed", opts: Options{CredentialNamespaces: []string{"allowed", "other"}}, kind: "decoratorcontrollers",
			obj: decorator},
		{name: "no credentials", opts: Options{CredentialNamespaces: []string{"allowed"}}, kind: "compositecontrollers",
			obj: composite(map[string]any{"url": "http://hooks.example.com/sync"})},
	} {
		refusal := tc.opts.checkCredentials(kindOf(tc.kind), tc.obj)
		switch {
		case tc.reason == "" && refusal != nil:
			t.Errorf("%s: refused (%s: %s), want allowed", tc.name, refusal.reason, refusal.message)
		case tc.reason != "" && refusal == nil:
			t.Errorf("%s: allowed, want refused with %s", tc.name, tc.reason)
		case tc.reason != "" && refusal.reason != tc.reason:
			t.Errorf("%s: reason %s, want %s", tc.name, refusal.reason, tc.reason)
		}
		for _, s := range tc.says {
			if refusal != nil && !strings.Contains(refusal.message, s) {
				t.Errorf("%s: message %q does not say %q", tc.name, refusal.message, s)
			}
		}
	}
}

// TestCredentialAccessNamesEachCredential: what a controller that acts as
// a ServiceAccount must be allowed in order to use its hooks' credentials
// (credentialAccess): get of each Secret and ConfigMap they name, by
// name, in its namespace, with a ConfigMap CA bundle read as a ConfigMap;
// an inline caBundle needs nothing. Fast twin of the part of the
// integration test TestControllersActAsTheirServiceAccounts in which a
// controller's account may not get another team's hook token.
func TestCredentialAccessNamesEachCredential(t *testing.T) {
	cc := compositeWithHooks(map[string]any{
		"sync": map[string]any{"webhook": map[string]any{"url": "https://hooks.example.com/sync",
			"caBundle":      map[string]any{"configMapRef": map[string]any{"namespace": "ca", "name": "hook-ca"}},
			"authorization": map[string]any{"secretRef": map[string]any{"namespace": "team-b", "name": "team-b-token"}}}},
		"finalize": map[string]any{"webhook": map[string]any{"url": "https://hooks.example.com/finalize",
			"caBundle": map[string]any{"inline": "PEM"}}},
	})
	var got []string
	for _, a := range credentialAccess(kinds[0], cc) {
		got = append(got, fmt.Sprintf("%s %s %s/%s", strings.Join(a.Verbs, ","), a.Resource.Name, a.Namespace, a.Name))
	}
	want := []string{"get configmaps ca/hook-ca", "get secrets team-b/team-b-token"}
	if !slices.Equal(got, want) {
		t.Errorf("credentialAccess = %q, want %q", got, want)
	}
}

// compositeWithHooks is a CompositeController object named c, of parent
// things.test.metactl.io and child ConfigMaps, with hooks.
func compositeWithHooks(hooks map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": "c"},
		"spec": map[string]any{
			"parentResource":   map[string]any{"apiVersion": "test.metactl.io/v1", "resource": "things"},
			"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": "configmaps"}},
			"generateSelector": true,
			"hooks":            hooks,
		},
	}}
}
