// Package controllertest holds what the integration tests of the
// controller kinds (pkg/composite, pkg/decorator) share: the parts of
// engine.Options that a process shares among its controllers, built
// once per test binary on its control plane, and readers of the Events
// and metrics the controllers report.
package controllertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/metactl/metactl/internal/history"
	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/testenv"
	"github.com/metactl/metactl/internal/trigger"
	"github.com/metactl/metactl/pkg/dynamic/discovery"
	"github.com/metactl/metactl/pkg/dynamic/informer"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
	"github.com/metactl/metactl/pkg/dynamic/status"
)

// Request is what a test hook reads of a sync (finalize) request of
// either kind: the parent and children of a CompositeController's, the
// object and attachments of a DecoratorController's.
type Request struct {
	Parent      *unstructured.Unstructured                       `json:"parent"`
	Children    map[string]map[string]*unstructured.Unstructured `json:"children"`
	Object      *unstructured.Unstructured                       `json:"object"`
	Attachments map[string]map[string]*unstructured.Unstructured `json:"attachments"`
	Finalizing  bool                                             `json:"finalizing"`
}

// Shared is what a process shares among its controllers.
type Shared struct {
	Resources *discovery.ResourceMap
	Objects   *objectclient.Client
	Informers *informer.Factory
	// Recorder records Events through the API server, from component
	// metactl-test.
	Recorder record.EventRecorder
}

var (
	once   sync.Once
	shared Shared
	err    error
)

// Get returns the Shared of env, built at the first call.
func Get(t testing.TB, env *testenv.Environment) Shared {
	t.Helper()
	once.Do(func() {
		shared.Resources = discovery.NewResourceMap(env.Kube.Discovery(), discovery.Options{})
		if err = shared.Resources.Refresh(context.Background()); err != nil {
			return
		}
		if shared.Objects, err = objectclient.New(env.Config, nil); err != nil {
			return
		}
		shared.Informers = informer.NewFactory(shared.Objects.ListerWatcher, informer.Options{})
		broadcaster := record.NewBroadcaster()
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: env.Kube.CoreV1().Events("")})
		shared.Recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "metactl-test"})
	})
	if err != nil {
		t.Fatal(err)
	}
	return shared
}

// Context returns a context that ends with the test, or after two
// minutes.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// EventMessage waits for an Event with reason on the object named name
// whose message contains substr, and returns its message.
func EventMessage(t testing.TB, env *testenv.Environment, namespace, name, reason, substr string) string {
	t.Helper()
	var msg string
	testenv.Eventually(t, 30*time.Second, "a "+reason+" Event on "+name+" containing "+substr, func(ctx context.Context) (bool, error) {
		events, err := env.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == reason && strings.Contains(e.Message, substr) {
				msg = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	return msg
}

// Writes reads metactl_object_writes_total of a controller.
func Writes(controller, verb, target string) float64 {
	return testutil.ToFloat64(metrics.ObjectWrites.WithLabelValues(controller, verb, target))
}

// Syncs reads metactl_syncs_total of a controller, over every trigger.
func Syncs(controller, result string) float64 {
	var n float64
	for _, cause := range trigger.Causes {
		n += SyncsFor(controller, result, cause)
	}
	return n
}

// SyncsFor reads metactl_syncs_total of a controller for the syncs whose
// first trigger had cause.
func SyncsFor(controller, result string, cause trigger.Cause) float64 {
	return testutil.ToFloat64(metrics.Syncs.WithLabelValues(controller, result, string(cause)))
}

// Unsettled reads metactl_syncs_unsettled_total of a controller.
func Unsettled(controller string) float64 {
	return testutil.ToFloat64(metrics.UnsettledSyncs.WithLabelValues(controller))
}

// WaitFor polls the object until check passes (check is given nil while
// the object does not exist), and returns the object that passed.
func WaitFor(t testing.TB, env *testenv.Environment, gvr schema.GroupVersionResource, namespace, name, what string, check func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%s %s/%s: %s", gvr.Resource, namespace, name, what), func(ctx context.Context) (bool, error) {
		obj, err := env.Dynamic.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			last = nil // what is returned is what passed the check
			return check(nil), nil
		}
		if err != nil {
			return false, err
		}
		last = obj
		return check(obj), nil
	})
	return last
}

// Condition returns the condition of type typ in obj's status.conditions;
// nil when it has none (or obj is nil).
func Condition(obj *unstructured.Unstructured, typ string) map[string]any {
	if obj == nil {
		return nil
	}
	st, _ := obj.Object["status"].(map[string]any)
	return status.FindCondition(st, typ)
}

// WaitForSync polls records, a controller's record of the object queued as
// key (Engine.History), for a sync that check accepts, for at most 30 s,
// and returns it.
func WaitForSync(t *testing.T, records func(key string) []*history.Sync, key, what string, check func(*history.Sync) bool) *history.Sync {
	t.Helper()
	var found *history.Sync
	testenv.Eventually(t, 30*time.Second, what, func(context.Context) (bool, error) {
		for _, s := range records(key) {
			if check(s) {
				found = s
				return true, nil
			}
		}
		return false, nil
	})
	return found
}
