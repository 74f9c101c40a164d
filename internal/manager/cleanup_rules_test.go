package manager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/metactl/metactl/internal/loop"
	"github.com/metactl/metactl/pkg/dynamic/finalizer"
)

// TestManualRemovalNamesEachResource: the hand-removal advice of a
// CleanupAbandoned Event names each resource whose objects may still
// carry the finalizer, group-qualified with its version (a core resource
// by its name alone), the finalizer, and the kubectl command. Fast twin of
// the message checks of the integration test
// TestCleanupGivesUpWhenParentsCannotBeListed.
func TestManualRemovalNamesEachResource(t *testing.T) {
	err := errors.Join(
		&finalizer.RemainingError{Resource: schema.GroupVersionResource{Group: "cleanup.metactl.io", Version: "v1", Resource: "sprockets"},
			Finalizer: "metacontroller.io/compositecontroller-sprockets", Err: errors.New("forbidden")},
		&finalizer.RemainingError{Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
			Finalizer: "metacontroller.io/decoratorcontroller-cms", Err: errors.New("forbidden")},
	)
	got := manualRemoval(finalizer.Remaining(err))
	for _, want := range []string{
		"Objects of sprockets.v1.cleanup.metactl.io may still carry finalizer metacontroller.io/compositecontroller-sprockets",
		"kubectl get sprockets.v1.cleanup.metactl.io -A",
		"Objects of configmaps may still carry finalizer metacontroller.io/decoratorcontroller-cms",
		"kubectl get configmaps -A",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("manualRemoval = %q, does not say %q", got, want)
		}
	}
	if got := manualRemoval(nil); got != "" {
		t.Errorf("manualRemoval(nil) = %q, want nothing", got)
	}
}

// cleanupManager is a Manager with what cleanup uses when the controller
// object is gone already: its options and a recorder.
func cleanupManager(opts Options) (*Manager, *record.FakeRecorder) {
	rec := record.NewFakeRecorder(10)
	return &Manager{opts: opts, recorder: rec, cleanups: map[string]cleanupState{}}, rec
}

// TestCleanupGivesUpAtTheTimeout: a cleanup that fails once the cleanup
// timeout has passed since its first failure gives up: it returns nil, so
// that the controller object goes, and records a CleanupAbandoned Warning
// that names the resource left with the finalizer; later calls do not
// try again. Fast twin of the integration test
// TestCleanupGivesUpWhenParentsCannotBeListed (there after 5s; here with a
// timeout of zero).
func TestCleanupGivesUpAtTheTimeout(t *testing.T) {
	m, rec := cleanupManager(Options{CleanupTimeout: 0})
	k := kinds[0]
	attempts := 0
	attempt := func(context.Context) error {
		attempts++
		return fmt.Errorf("listing: %w", &finalizer.RemainingError{
			Resource:  schema.GroupVersionResource{Group: "cleanup.metactl.io", Version: "v1", Resource: "sprockets"},
			Finalizer: "metacontroller.io/compositecontroller-sprockets", Err: errors.New("forbidden")})
	}
	if err := m.cleanup(context.Background(), k, "sprockets", nil, types.UID("u1"), attempt); err != nil {
		t.Fatalf("cleanup = %v, want nil: it gives up", err)
	}
	select {
	case e := <-rec.Events:
		for _, want := range []string{"Warning", ReasonCleanupAbandoned, "forbidden", "kubectl get sprockets.v1.cleanup.metactl.io"} {
			if !strings.Contains(e, want) {
				t.Errorf("Event %q does not say %q", e, want)
			}
		}
	default:
		t.Fatal("no Event")
	}
	if err := m.cleanup(context.Background(), k, "sprockets", nil, types.UID("u1"), attempt); err != nil || attempts != 1 {
		t.Errorf("cleanup again = %v after %d attempts, want nil after 1", err, attempts)
	}
}

// TestCleanupIsDoneOncePerObject: a cleanup that succeeded is not
// attempted again for the same controller object (by UID), but is for a
// new object of the same name. Fast twin of the integration tests
// TestDeletedCompositeControllerLeavesNoFinalizers and
// TestDeletingControllersAfterTheirParentCRD, which delete controller
// objects and recreate them under the same name.
func TestCleanupIsDoneOncePerObject(t *testing.T) {
	m, rec := cleanupManager(Options{CleanupTimeout: DefaultCleanupTimeout})
	k := kinds[0]
	attempts := 0
	attempt := func(context.Context) error { attempts++; return nil }
	for i, uid := range []types.UID{"u1", "u1", "u2"} {
		if err := m.cleanup(context.Background(), k, "c", &unstructured.Unstructured{}, uid, attempt); err != nil {
			t.Fatalf("cleanup %d: %v", i, err)
		}
	}
	if attempts != 2 {
		t.Errorf("%d attempts, want 2: one for u1, one for u2", attempts)
	}
	if len(rec.Events) != 0 {
		t.Errorf("%d Events for successful cleanups, want none", len(rec.Events))
	}
}

// TestCleanupFailureIsReportedOnce: before the cleanup timeout, a failed
// cleanup of a controller object that is gone already returns an error to
// be retried and records one CleanupFailed Warning, which names the kind
// and the error; failing again records no other; a later success ends the
// cleanup without another Event. Fast twin of the CleanupFailed Event the
// integration test TestCleanupGivesUpWhenParentsCannotBeListed waits for.
func TestCleanupFailureIsReportedOnce(t *testing.T) {
	m, rec := cleanupManager(Options{CleanupTimeout: time.Hour})
	m.loop = loop.New(loop.Options[string]{}, func(context.Context, *loop.Sync[string]) (time.Duration, error) { return 0, nil })
	t.Cleanup(m.loop.Stop)
	k := kinds[0]
	failing := errors.New("sprockets is forbidden")
	for i := range 2 {
		err := m.cleanup(context.Background(), k, "sprockets", nil, types.UID("u1"), func(context.Context) error { return failing })
		if !errors.Is(err, failing) {
			t.Fatalf("failure %d: cleanup = %v, want the failure, to be retried", i+1, err)
		}
	}
	if n := len(rec.Events); n != 1 {
		t.Fatalf("%d Events after two failures, want 1", n)
	}
	e := <-rec.Events
	for _, want := range []string{"Warning", ReasonCleanupFailed, "retrying until", k.name, "sprockets is forbidden"} {
		if !strings.Contains(e, want) {
			t.Errorf("Event %q does not say %q", e, want)
		}
	}
	if err := m.cleanup(context.Background(), k, "sprockets", nil, types.UID("u1"), func(context.Context) error { return nil }); err != nil {
		t.Errorf("cleanup after the API came back: %v", err)
	}
	if n := len(rec.Events); n != 0 {
		t.Errorf("%d Events after success, want none", n)
	}
}
