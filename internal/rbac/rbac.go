package rbac

import (
	"context"
	"fmt"
	"slices"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/metactl/metactl/pkg/dynamic/discovery"
)

// Access is what a controller must be allowed to do with one resource, or
// with one subresource of it.
type Access struct {
	Resource    *discovery.Resource
	Subresource string
	// Namespace, when set, asks only about that namespace; empty asks
	// about every namespace (cluster-wide).
	Namespace string
	// Name, when set, asks only about the object of that name
	// (resourceNames), in Namespace.
	Name  string
	Verbs []string
	// Synced marks the resources whose objects the controller syncs
	// (parents, decorated objects), as opposed to those it writes for
	// them: whether every one of these is namespaced decides where an
	// account's reads are checked (BeforeStart, InNamespace).
	Synced bool
}

// The verbs a controller needs on the objects it syncs (parents, decorated
// objects), on their status subresource, and on the objects it writes for
// them (children, attachments).
var (
	OwnerVerbs  = []string{"get", "list", "watch", "update", "patch"}
	StatusVerbs = []string{"patch"}
	ChildVerbs  = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
)

// CacheVerbs are the verbs the shared cache needs to serve a resource: it
// lists and watches it in every namespace.
var CacheVerbs = []string{"list", "watch"}

// Reviewer answers whether a subject may do what attributes say.
type Reviewer func(ctx context.Context, attributes *authorizationv1.ResourceAttributes) (bool, error)

// SelfReviewer asks with SelfSubjectAccessReviews: about metactl itself.
func SelfReviewer(reviews authorizationv1client.SelfSubjectAccessReviewInterface) Reviewer {
	return func(ctx context.Context, attributes *authorizationv1.ResourceAttributes) (bool, error) {
		review, err := reviews.Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attributes},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return review.Status.Allowed, nil
	}
}

// Denied checks access with one SelfSubjectAccessReview per distinct verb
// and (sub)resource, and returns what metactl may not do, in the order of
// access: "list configmaps", "patch widgets.example.com/status", ...
func Denied(ctx context.Context, reviews authorizationv1client.SelfSubjectAccessReviewInterface, access []Access) ([]string, error) {
	return DeniedBy(ctx, SelfReviewer(reviews), access)
}

// DeniedBy is Denied with the questions asked through review (of metactl,
// SelfReviewer; of a ServiceAccount, ServiceAccount.Reviewer). A question
// about one namespace says so: "create configmaps in namespace a"; about
// one object, it names it: "get secrets token in namespace a".
func DeniedBy(ctx context.Context, review Reviewer, access []Access) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, a := range access {
		gvr := a.Resource.GroupVersionResource()
		for _, verb := range a.Verbs {
			what := verb + " " + gvr.GroupResource().String()
			if a.Subresource != "" {
				what += "/" + a.Subresource
			}
			if a.Name != "" {
				what += " " + a.Name
			}
			if a.Namespace != "" {
				what += " in namespace " + a.Namespace
			}
			if seen[what] {
				continue
			}
			seen[what] = true
			allowed, err := review(ctx, &authorizationv1.ResourceAttributes{
				Verb: verb, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource, Subresource: a.Subresource,
				Namespace: a.Namespace, Name: a.Name,
			})
			if err != nil {
				return nil, fmt.Errorf("checking permissions: %w", err)
			}
			if !allowed {
				out = append(out, what)
			}
		}
	}
	return out, nil
}

// Reads keeps, of access, the verbs the shared cache needs (CacheVerbs):
// what metactl itself must be allowed for a controller whose writes a
// ServiceAccount makes.
func Reads(access []Access) []Access {
	var out []Access
	for _, a := range access {
		if a.Subresource != "" {
			continue
		}
		var verbs []string
		for _, v := range a.Verbs {
			if slices.Contains(CacheVerbs, v) {
				verbs = append(verbs, v)
			}
		}
		if len(verbs) > 0 {
			a.Verbs = verbs
			out = append(out, a)
		}
	}
	return out
}

// ReadVerbs are the verbs that read objects: what an account must be
// allowed, in a namespace, for its controller to be served the objects of
// that namespace from metactl's shared cache.
var ReadVerbs = []string{"get", "list", "watch"}

// PerNamespace reports whether the reads of a controller with access can
// be checked one namespace at a time: every resource it syncs is
// namespaced, so that each object it syncs, and each object it reads or
// writes for one (children, attachments, ControllerRevisions, of the
// object's namespace only), is of one namespace. A controller that syncs a
// cluster-scoped resource may have dependents in any namespace.
func PerNamespace(access []Access) bool {
	synced := false
	for _, a := range access {
		if a.Synced {
			synced = true
			if !a.Resource.Namespaced {
				return false
			}
		}
	}
	return synced
}

// BeforeStart keeps, of access, what is checked of an account before its
// controller starts: ClusterWide, less the reads of namespaced resources
// when PerNamespace holds, which InNamespace checks for each namespace as
// its objects are synced. So a team's account needs, for a controller of
// namespaced parents, Roles in its own namespaces only.
func BeforeStart(access []Access) []Access {
	all := ClusterWide(access)
	if !PerNamespace(access) {
		return all
	}
	var out []Access
	for _, a := range all {
		if !a.Resource.Namespaced {
			out = append(out, a)
		}
	}
	return out
}

// InNamespace keeps, of access, the reads (ReadVerbs) of the namespaced
// resources, asked about namespace only: what an account must be allowed
// for its controller to be served the objects of that namespace.
func InNamespace(access []Access, namespace string) []Access {
	var out []Access
	for _, a := range access {
		if !a.Resource.Namespaced || a.Subresource != "" {
			continue
		}
		out = append(out, Access{Resource: a.Resource, Namespace: namespace, Verbs: ReadVerbs, Synced: a.Synced})
	}
	return out
}

// ClusterWide keeps, of access, what can be checked before a controller
// starts without knowing its objects: every verb on a cluster-scoped
// resource, and the verbs that read (get, list, watch) a namespaced one in
// every namespace, as the shared cache serves it from every namespace. The
// writes of namespaced objects happen in their objects' namespaces, which
// a grant may limit (a RoleBinding per team namespace): the API server
// checks each of them.
func ClusterWide(access []Access) []Access {
	var out []Access
	for _, a := range access {
		if a.Resource.Namespaced {
			var verbs []string
			for _, v := range a.Verbs {
				if v == "get" || slices.Contains(CacheVerbs, v) {
					verbs = append(verbs, v)
				}
			}
			if len(verbs) == 0 {
				continue
			}
			a.Verbs = verbs
		}
		a.Namespace = ""
		out = append(out, a)
	}
	return out
}
