package related_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metactl/metactl/internal/related"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// TestNamespace: the one namespace a rule selects in, by the customize
// hook's version and the parent's scope (the selection itself is checked
// against the API server in related_test.go).
func TestNamespace(t *testing.T) {
	v1, v2 := v1alpha1.HookVersionV1, v1alpha1.HookVersionV2
	named := v1alpha1.RelatedResourceRule{Namespace: "other"}
	selecting := v1alpha1.RelatedResourceRule{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}
	for _, c := range []struct {
		name       string
		rule       v1alpha1.RelatedResourceRule
		namespaced bool
		version    v1alpha1.HookVersion
		want       string
		wantOK     bool
	}{
		{"v1 namespaced parent: its own, the rule's namespace ignored", named, true, v1, "ns", true},
		{"v1 namespaced parent: its own, the selector ignored", selecting, true, v1, "ns", true},
		{"v1 namespaced parent, no rule", v1alpha1.RelatedResourceRule{}, true, v1, "ns", true},
		{"v2 namespaced parent: the rule's namespace", named, true, v2, "other", true},
		{"v2 namespaced parent: by selector", selecting, true, v2, "", false},
		{"v2 namespaced parent, no rule: every namespace", v1alpha1.RelatedResourceRule{}, true, v2, "", false},
		{"v1 cluster-scoped parent: the rule's namespace", named, false, v1, "other", true},
		{"v1 cluster-scoped parent, no rule: every namespace", v1alpha1.RelatedResourceRule{}, false, v1, "", false},
	} {
		parentNamespace := ""
		if c.namespaced {
			parentNamespace = "ns"
		}
		if got, ok := related.Namespace(c.rule, parentNamespace, c.namespaced, c.version); got != c.want || ok != c.wantOK {
			t.Errorf("%s: %q, %v; want %q, %v", c.name, got, ok, c.want, c.wantOK)
		}
	}
}
