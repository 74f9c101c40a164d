package controller

import (
	"context"
	"fmt"

	"github.com/metactl/metactl/internal/loop"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// ReasonSyncError is the reason of the Warning Event of a failed sync.
const ReasonSyncError = "SyncError"

// SyncFailed records a failed sync of obj as a SyncError Warning Event
// naming the controller (kind and name) once and saying when the object
// is retried, and returns err, for the work queue to retry. ctx is the
// sync's (see loop.RetryDelay). Conflicts are not reported: they resolve
// on the retry. Nor is a sync cancelled because its controller stops or
// restarts (ctx is done): it is not the object's failure.
func SyncFailed(ctx context.Context, recorder record.EventRecorder, obj runtime.Object, kind, name string, err error) error {
	if apierrors.IsConflict(err) || ctx.Err() != nil {
		return err
	}
	retry := ""
	if delay, ok := loop.RetryDelay(ctx, err); ok {
		retry = fmt.Sprintf(" (retrying in %v)", delay)
	}
	recorder.Eventf(obj, corev1.EventTypeWarning, ReasonSyncError, "%s %s: %v%s", kind, name, err, retry)
	return err
}
