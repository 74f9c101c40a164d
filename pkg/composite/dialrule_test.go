//go:build integration

package composite_test

import (
	"testing"

	"github.com/metactl/metactl/pkg/composite"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// TestRefusedHookAddressIsASyncError: a controller whose hook client
// refuses loopback addresses (metactl run's default) never calls its hook
// on 127.0.0.1, and the parent's SyncError Event says the address is
// refused and which flag allows it.
func TestRefusedHookAddressIsASyncError(t *testing.T) {
	ns := env.CreateNamespace(t)
	hook := newTestHook(t, valueHook)
	cc := compositeController(t, hook, thingsGVR, nil)
	startController(t, cc, func(o *composite.Options) {
		o.Hooks = hookclient.NewClient(hookclient.Options{
			HTTPClient: hookclient.NewHTTPClient(hookclient.NewTransport()),
			Dial:       &hookclient.DialRule{},
		})
	})
	newThing(t, thingsGVR, ns, "p1", nil)
	waitForEvent(t, ns, "p1", "SyncError", "is loopback, which metactl does not call hooks at: run metactl with --allow-loopback-hooks")
	if n := hook.calls.Load(); n != 0 {
		t.Errorf("the refused hook was called %d times, want 0", n)
	}
}
