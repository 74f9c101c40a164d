package engine

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
)

// ReportRepeated tells, in the log and in a Warning Event DuplicateResource
// on the controller object, that entry i of the list field (childResources,
// attachments) repeats entry earlier's resource res, and that the one entry
// the controller runs with (children.Declare) updates with method.
// recorder may be nil (no Event).
func ReportRepeated(ctx context.Context, recorder record.EventRecorder, object runtime.Object, field string, i, earlier int, res *discovery.Resource, method v1alpha1.ChildUpdateMethod) {
	if method == "" {
		method = v1alpha1.ChildUpdateOnDelete
	}
	name := res.APIVersion + " " + res.GroupVersionResource().Resource
	klog.FromContext(ctx).Info("A resource is listed twice; using one entry",
		"field", field, "index", i, "earlier", earlier, "resource", name, "updateMethod", method)
	if recorder != nil {
		recorder.Eventf(object, corev1.EventTypeWarning, ReasonDuplicateResource,
			"spec.%s[%d] lists %s again (spec.%s[%d]): one entry is used, updating with %s (the last entry's updateStrategy other than OnDelete, as in metacontroller); remove one of them",
			field, i, name, field, earlier, method)
	}
}
