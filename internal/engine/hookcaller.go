package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
	"github.com/metactl/metactl/pkg/hooks/credentials"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// HookCaller calls one controller's hooks and remembers whether they last
// failed for their credentials. Safe for concurrent use.
type HookCaller struct {
	// Hooks makes the calls.
	Hooks hookClient
	// Controller names the controller in metrics and logs.
	Controller string
	// OnHealthChange, when set, is called when the hooks start or stop
	// failing for their credentials.
	OnHealthChange func()

	health credentials.CredentialHealth
}

// Call calls hook, named name ("sync", "finalize", "customize"), with
// request and decodes its answer into response. The call is a wait of
// w, the sync's (loop.Waiter; nil: none to tell): other syncs run while it
// waits on the hook. A call whose ctx is cancelled (the
// controller stops or restarts) ends at once, and so does a call that
// answered after the cancellation: it returns the cancellation's cause,
// so that the sync writes nothing of the answer. opts are the sync's
// (Target.calls): its hold of the answers, whether it is a retry.
func (h *HookCaller) Call(ctx context.Context, w loop.Waiter, name string, hook *v1alpha1.Hook, request any, response hooks.Response, opts hookclient.CallOptions) error {
	var err error
	start := time.Now()
	call := func() { err = h.Hooks.Call(ctx, h.Controller, name, hook, request, response, opts) }
	if w == nil {
		call()
	} else {
		w.WhileWaiting(call)
	}
	cancelled := ctx.Err() != nil
	if cancelled {
		err = fmt.Errorf("%s hook: %w", name, context.Cause(ctx))
	}
	recordCall(ctx, name, start, err)
	if cancelled {
		return err
	}
	if h.health.Record(err) && h.OnHealthChange != nil {
		h.OnHealthChange()
	}
	return err
}

// CredentialError returns the error of the last call when it failed for
// the hook's credentials (a missing Secret, a malformed CA bundle, ...),
// else nil.
func (h *HookCaller) CredentialError() error { return h.health.Err() }
