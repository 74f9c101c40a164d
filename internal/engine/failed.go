package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/metactl/metactl/internal/loop"
)

// recordSyncError records a failed sync of obj as a SyncError Warning Event
// naming the controller (kind and name) once and saying when the object
// is retried (s.RetryDelay; s nil: not said), and returns err, for the
// work queue to retry. Conflicts are not reported: they resolve
// on the retry (but a conflict joined with another failure is:
// onlyConflicts). Nor is a sync cancelled because its controller stops or
// restarts (ctx is done): it is not the object's failure.
func recordSyncError(ctx context.Context, s *loop.Sync[Key], recorder record.EventRecorder, obj runtime.Object, kind, name string, err error) error {
	if onlyConflicts(err) || ctx.Err() != nil {
		return err
	}
	retry := ""
	if delay, ok := s.RetryDelay(err); ok {
		retry = fmt.Sprintf(" (retrying in %v)", delay)
	}
	recorder.Eventf(obj, corev1.EventTypeWarning, ReasonSyncError, "%s %s: %v%s", kind, name, err, retry)
	return err
}
