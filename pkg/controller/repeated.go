package controller

import (
	"context"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// ReportRepeated tells, in the log and in a Warning Event DuplicateResource
// on the controller object, that entry i of the list field (childResources,
// attachments) repeats entry earlier's resource res (children.Declare);
// with earlier < 0 it does nothing. The controller runs with one entry,
// with the later's update method, as metacontroller does. recorder may be
// nil (no Event).
func ReportRepeated(ctx context.Context, recorder record.EventRecorder, object runtime.Object, field string, i, earlier int, res *discovery.Resource, method v1alpha1.ChildUpdateMethod) {
	if earlier < 0 {
		return
	}
	if method == "" {
		method = "OnDelete (the default)"
	}
	name := res.APIVersion + " " + res.GroupVersionResource().Resource
	klog.FromContext(ctx).Info("A resource is listed twice; using one entry, with the later's update method",
		"field", field, "index", i, "earlier", earlier, "resource", name, "updateMethod", method)
	if recorder != nil {
		recorder.Eventf(object, corev1.EventTypeWarning, "DuplicateResource",
			"spec.%s[%d] lists %s again (spec.%s[%d]): one entry is used, with the later's updateStrategy %s, as metacontroller does; remove one of them",
			field, i, name, field, earlier, method)
	}
}
