package manager

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
)

// DefaultEventSourceComponent is the source component of metactl's Events
// when Options.EventSourceComponent is empty. metacontroller's is
// "metacontroller".
const DefaultEventSourceComponent = "metactl"

// eventSourceComponent is Options.EventSourceComponent or its default.
func (o Options) eventSourceComponent() string {
	if o.EventSourceComponent == "" {
		return DefaultEventSourceComponent
	}
	return o.EventSourceComponent
}

// newEventBroadcaster returns the broadcaster of every Event metactl
// records. Its spam filter (opts.EventsQPS, opts.EventsBurst) counts each
// object's Events per reason, where client-go's default counts them per
// object and type: a sync failing again and again (SyncError) must not use
// up the budget that a different problem of the same object
// (ChildWriteWarning, UnknownAnswerField, ...) needs to be told.
func newEventBroadcaster(opts Options) record.EventBroadcaster {
	return record.NewBroadcaster(record.WithCorrelatorOptions(record.CorrelatorOptions{
		QPS:         opts.EventsQPS,
		BurstSize:   opts.EventsBurst,
		SpamKeyFunc: spamKeyByReason,
	}))
}

// spamKeyByReason is client-go's spam key (source, object, type) plus the
// reason.
func spamKeyByReason(e *corev1.Event) string {
	return strings.Join([]string{
		e.Source.Component, e.Source.Host,
		e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name,
		string(e.InvolvedObject.UID), e.InvolvedObject.APIVersion,
		e.Type, e.Reason,
	}, "\x00")
}

// eventScheme lets the recorder reference our own kinds; unstructured
// objects carry their own apiVersion and kind.
func eventScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}
