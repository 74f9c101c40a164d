package decorator

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metactl/metactl/internal/engine"
	"github.com/metactl/metactl/internal/explain"
	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/rbac"
)

// The controller's life and what it tells, as its engine runs it: each
// method is the engine's (engine.Engine) of the same name.

// Name returns the controller's name.
func (c *Controller) Name() string { return c.eng.Name() }

// Finalizer returns the finalizer the controller puts on its objects
// while it has a finalize hook.
func (c *Controller) Finalizer() string { return c.eng.Finalizer() }

// Start starts the controller and returns once its caches are synced
// (Engine.Start).
func (c *Controller) Start(ctx context.Context) error { return c.eng.Start(ctx) }

// StartCaches readies the controller for SyncOnce (Engine.StartCaches).
func (c *Controller) StartCaches(ctx context.Context) error { return c.eng.StartCaches(ctx) }

// SyncOnce runs one sync of obj on the calling goroutine
// (Engine.SyncOnce).
func (c *Controller) SyncOnce(ctx context.Context, obj *unstructured.Unstructured) (*engine.Target, error) {
	return c.eng.SyncOnce(ctx, obj)
}

// Stop stops the controller (Engine.Stop).
func (c *Controller) Stop() { c.eng.Stop() }

// Cleanup removes the controller's finalizer from every object that
// carries it (Engine.Cleanup).
func (c *Controller) Cleanup(ctx context.Context) error { return c.eng.Cleanup(ctx) }

// Access lists what the controller must be allowed to do (the
// engine's Engine.Access).
func (c *Controller) Access() []rbac.Access { return c.eng.Access() }

// HookCredentialError returns the error of the last hook call when it
// failed for the hook's credentials, else nil.
func (c *Controller) HookCredentialError() error { return c.eng.HookCredentialError() }

// Failing returns the set of objects whose last sync failed.
func (c *Controller) Failing() *engine.Failing { return c.eng.Failing() }

// Explain adds to a what the controller knows of the object a.Object
// (Engine.Explain).
func (c *Controller) Explain(a *explain.Answer) { c.eng.Explain(a) }

// History returns the recorded syncs of the object whose queue key's text
// is key (Engine.History).
func (c *Controller) History(key string) []*history.Sync { return c.eng.History(key) }
