package children

import (
	"fmt"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
)

// NameError is a child's name that the API server refuses for its
// resource: the write is not sent.
type NameError struct {
	Kind, Name string
	// Rule is what the resource's names must be ("a DNS-1123 subdomain").
	Rule     string
	Problems []string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("invalid metadata.name %q for a %s, which the API server refuses: %s; fix: name it with lower-case letters, digits and '-' (a %s name must be %s)",
		e.Name, e.Kind, strings.Join(e.Problems, "; "), e.Kind, e.Rule)
}

// CheckName says whether the API server accepts name for an object of
// res, by the rule its validation applies, with apimachinery's own
// functions: a Service's or a Namespace's name is a DNS-1123 label (an
// API server before Kubernetes 1.34 wants a Service's to be a DNS-1035
// label, starting with a letter, and refuses the write itself), an RBAC object's (Role, ClusterRole and their
// bindings) any single path segment (ClusterRoles take "app:reader"),
// and every other object's, custom resources included, a DNS-1123
// subdomain (the rule of ObjectMeta validation). It is the one rule the
// writer applies before creating a child (Writer.Manage) and `metactl hook
// test` applies to the children a hook asks for. An aggregated API whose
// names are looser than a subdomain would be refused here: none of
// Kubernetes' is.
func CheckName(res *Resource, name string) error {
	rule, check := "a DNS-1123 subdomain", apivalidation.NameIsDNSSubdomain
	group := res.GroupVersionResource().Group
	switch {
	case group == "rbac.authorization.k8s.io":
		// Desired has checked the path segment already.
		return nil
	case group == "" && (res.Name == "services" || res.Name == "namespaces"):
		rule, check = "a DNS-1123 label", apivalidation.NameIsDNSLabel
	}
	if msgs := check(name, false); len(msgs) > 0 {
		return &NameError{Kind: res.Kind, Name: name, Rule: rule, Problems: msgs}
	}
	return nil
}
