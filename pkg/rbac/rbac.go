package rbac

import (
	"context"
	"fmt"

	"github.com/metactl/metactl/pkg/dynamic/discovery"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// Access is what a controller must be allowed to do with one resource, or
// with one subresource of it.
type Access struct {
	Resource    *discovery.Resource
	Subresource string
	Verbs       []string
}

// The verbs a controller needs on the objects it syncs (parents, decorated
// objects), on their status subresource, and on the objects it writes for
// them (children, attachments).
var (
	OwnerVerbs  = []string{"get", "list", "watch", "update", "patch"}
	StatusVerbs = []string{"patch"}
	ChildVerbs  = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
)

// Denied checks access with one SelfSubjectAccessReview per distinct verb
// and (sub)resource, and returns what metactl may not do, in the order of
// access: "list configmaps", "patch widgets.example.com/status", ...
func Denied(ctx context.Context, reviews authorizationv1client.SelfSubjectAccessReviewInterface, access []Access) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, a := range access {
		gvr := a.Resource.GroupVersionResource()
		for _, verb := range a.Verbs {
			what := verb + " " + gvr.GroupResource().String()
			if a.Subresource != "" {
				what += "/" + a.Subresource
			}
			if seen[what] {
				continue
			}
			seen[what] = true
			review, err := reviews.Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: verb, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource, Subresource: a.Subresource,
				}},
			}, metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("checking permissions: %w", err)
			}
			if !review.Status.Allowed {
				out = append(out, what)
			}
		}
	}
	return out, nil
}
