package related_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/internal/inmemory"
	"github.com/metactl/metactl/internal/related"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// TestRelatedRules: which ConfigMaps a customize hook's rule relates to a
// parent, and how the sync hook's request keys them, without an API
// server (in-memory discovery and informers): the customize hook's own
// version decides the namespace rules (v1: the parent's namespace only;
// v2: a rule without namespace or namespaceSelector selects in every
// namespace, a namespace restricts it, a namespaceSelector selects by the
// namespaces' labels), a cluster-scoped parent selects in every namespace
// under either version, rules select by labels or by names, and the sync
// hook's version keys the objects (v1 keys a namespaced parent's by name).
// The integration tests in related_test.go check the same against an API
// server, and what follows a change of the objects.
func TestRelatedRules(t *testing.T) {
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	namespaces := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	labelled := map[string]string{"related-test": "yes"}
	objects := map[schema.GroupVersionResource][]*unstructured.Unstructured{
		configMaps: {
			inmemory.Object("v1", "ConfigMap", "a", "x", labelled, nil),
			inmemory.Object("v1", "ConfigMap", "b", "y", labelled, nil),
			inmemory.Object("v1", "ConfigMap", "a", "named", nil, nil),
			inmemory.Object("v1", "ConfigMap", "b", "named", nil, nil),
			inmemory.Object("v1", "ConfigMap", "b", "other", nil, nil),
		},
		namespaces: {
			inmemory.Object("v1", "Namespace", "", "a", map[string]string{"team": "red"}, nil),
			inmemory.Object("v1", "Namespace", "", "b", map[string]string{"team": "blue"}, nil),
		},
	}
	byLabels := func(rule map[string]any) map[string]any {
		rule["apiVersion"], rule["resource"] = "v1", "configmaps"
		rule["labelSelector"] = map[string]any{"matchLabels": map[string]any{"related-test": "yes"}}
		return rule
	}
	v1, v2 := ptr.To(v1alpha1.HookVersionV1), ptr.To(v1alpha1.HookVersionV2)
	for _, tc := range []struct {
		name            string
		customize       *v1alpha1.HookVersion
		sync            v1alpha1.HookVersion
		parentNamespace string
		rule            map[string]any
		want            []string
	}{
		{"v2: labels, every namespace", v2, v1alpha1.HookVersionV2, "a", byLabels(map[string]any{}), []string{"a/x", "b/y"}},
		{"v2: names, every namespace", v2, v1alpha1.HookVersionV2, "a",
			map[string]any{"apiVersion": "v1", "resource": "configmaps", "names": []any{"named"}}, []string{"a/named", "b/named"}},
		{"v2: labels in one namespace", v2, v1alpha1.HookVersionV2, "a", byLabels(map[string]any{"namespace": "b"}), []string{"b/y"}},
		{"v2: a namespaceSelector", v2, v1alpha1.HookVersionV2, "a",
			byLabels(map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "blue"}}}), []string{"b/y"}},
		{"v1 customize (unset): the parent's namespace, whatever the namespaceSelector says", nil, v1alpha1.HookVersionV2, "a",
			byLabels(map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "blue"}}}), []string{"a/x"}},
		{"v1 customize: the parent's own namespace named", v1, v1alpha1.HookVersionV2, "a", byLabels(map[string]any{"namespace": "a"}), []string{"a/x"}},
		{"v1 customize: the parent's namespace", v1, v1alpha1.HookVersionV2, "a", byLabels(map[string]any{}), []string{"a/x"}},
		{"v2 customize, v1 sync: the parent's namespace, keyed by name", v2, v1alpha1.HookVersionV1, "a", byLabels(map[string]any{}), []string{"x"}},
		{"v2 customize, v1 sync: names in every namespace, no collision", v2, v1alpha1.HookVersionV1, "a",
			map[string]any{"apiVersion": "v1", "resource": "configmaps", "names": []any{"named"}}, []string{"named"}},
		{"cluster-scoped parent, v1: every namespace", nil, v1alpha1.HookVersionV1, "", byLabels(map[string]any{}), []string{"a/x", "b/y"}},
		{"cluster-scoped parent, v2: one namespace", v2, v1alpha1.HookVersionV1, "", byLabels(map[string]any{"namespace": "b"}), []string{"b/y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixtureOptions(t, asAccount(related.Options[string]{
				Resources: inmemory.Resources(t, &metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
					{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: []string{"list", "watch"}},
					{Name: "namespaces", Kind: "Namespace", Verbs: []string{"list", "watch"}},
				}}),
				Informers: inmemory.Informers(objects),
			}), tc.customize, tc.sync, tc.rule)
			want(t, tc.name, f.relatedKeys(t, parentIn(tc.parentNamespace)), tc.want...)
		})
	}
}

// TestRulesOfAControllerWithoutAccountStayInTheParentsNamespace: for a
// controller that reads as metactl (no MayRead: no ServiceAccount), a
// namespaced parent's rules read namespaced resources in the parent's
// namespace only. A v2 rule that reads another namespace (kube-system's
// Secrets, say), namespaces by label or every namespace fails with an
// *related.OutsideNamespaceError saying what to do, and nothing is served;
// a rule in the parent's namespace, a v1 rule (read there; one naming
// another namespace is an error with or without an account, see
// TestTheCustomizeHooksVersionDecides), a cluster-scoped resource and a cluster-scoped parent's rules are
// served as before.
func TestRulesOfAControllerWithoutAccountStayInTheParentsNamespace(t *testing.T) {
	objs := []*unstructured.Unstructured{
		inmemory.Object("v1", "Secret", "kube-system", "token", nil, nil),
		inmemory.Object("v1", "Secret", "own", "mine", nil, nil),
		inmemory.Object("v1", "Namespace", "", "own", map[string]string{"team": "red"}, nil),
		inmemory.Object("v1", "Namespace", "", "kube-system", nil, nil),
	}
	secrets := func(rule map[string]any) map[string]any {
		rule["apiVersion"], rule["resource"] = "v1", "secrets"
		return rule
	}
	v1, v2 := ptr.To(v1alpha1.HookVersionV1), ptr.To(v1alpha1.HookVersionV2)
	for _, tc := range []struct {
		name      string
		customize *v1alpha1.HookVersion
		parent    string // namespace; "" cluster-scoped
		rule      map[string]any
		refused   string // what the error says; "" when served
		want      []string
	}{
		{"v2: another namespace", v2, "own", secrets(map[string]any{"namespace": "kube-system", "names": []any{"token"}}), "in namespace kube-system", nil},
		{"v2: every namespace", v2, "own", secrets(map[string]any{"names": []any{"token"}}), "in every namespace", nil},
		{"v2: a namespaceSelector", v2, "own", secrets(map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "red"}}}),
			"namespaceSelector", nil},
		{"v2: the parent's namespace", v2, "own", secrets(map[string]any{"namespace": "own"}), "", []string{"own/mine"}},
		{"v1: read in the parent's namespace", v1, "own", secrets(map[string]any{}), "", []string{"mine"}},
		{"a cluster-scoped resource", v2, "own", map[string]any{"apiVersion": "v1", "resource": "namespaces", "names": []any{"own"}}, "", []string{"own"}},
		{"a cluster-scoped parent", v2, "", secrets(map[string]any{"namespace": "kube-system"}), "", []string{"kube-system/token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := memOptions(t, related.Options[string]{}, objs...)
			opts.MayRead = nil // a controller without a ServiceAccount
			f := newFixtureOptions(t, opts, tc.customize, *tc.customize, tc.rule)
			parent := parentIn(tc.parent)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			got, err := f.resolver.Related(ctx, nil, hookclient.CallOptions{}, tc.parent+"/p", parent, tc.parent != "", *tc.customize, nil)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				var keys []string
				for _, group := range got {
					for key := range group {
						keys = append(keys, key)
					}
				}
				sort.Strings(keys)
				want(t, tc.name, keys, tc.want...)
				return
			}
			var outside *related.OutsideNamespaceError
			if !errors.As(err, &outside) {
				t.Fatalf("got %v (%d groups), want an *OutsideNamespaceError", err, len(got))
			}
			for _, w := range []string{"relatedResources[0]", tc.refused, "outside the parent's namespace own", "metactl.io/service-account"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
