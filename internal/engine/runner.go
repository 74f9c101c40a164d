package engine

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/rbac"
	"github.com/metactl/metactl/internal/trigger"
)

var _ Runner = (*Engine)(nil)

// Runner is what those who run a controller (the manager, metactl plan,
// hook test, tests) use of its Engine: its life and what it tells. A kind
// (pkg/composite, pkg/decorator) embeds its Engine as a Runner, and holds
// the Engine itself in a field of its own, so that the Engine's other
// methods (its handlers, Enqueue, ...) are not the kind's.
type Runner interface {
	Name() string
	Finalizer() string
	Start(ctx context.Context) error
	StartCaches(ctx context.Context) error
	SyncOnce(ctx context.Context, obj *unstructured.Unstructured) (*Target, error)
	Stop()
	Cleanup(ctx context.Context) error
	Access() []rbac.Access
	HookCredentialError() error
	Failing() *Failing
	Explain(a *explain.Answer)
	History(key string) []*history.Sync
	EnqueueAdmitted(t trigger.Trigger)
	ForgetNotAdmitted()
	ParentNamespaces(f func(namespace string))
	HookResources() []schema.GroupVersionResource
}
