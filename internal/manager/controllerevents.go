package manager

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// controllerEventsDrain is how long the Event pipeline of a stopped
// controller keeps writing the Events it holds before it is shut down.
const controllerEventsDrain = 10 * time.Second

// controllerEvents is the Event pipeline of one controller: a broadcaster
// of its own, with its own queue (client-go's, of 1,000 Events, the
// newest dropped when full), spam filter and writer (three goroutines,
// three channels of 1,000 entries), so that a controller
// recording a flood of Events (a hook asking for many, a failing hook on
// many objects) fills and waits on only its own queue. Another
// controller's Events are queued and written as if there were no flood;
// what the controllers share is the API clients (their rate limit, if any,
// and the cap on requests in flight).
type controllerEvents struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

// newControllerEvents starts the Event pipeline of a controller: it
// writes through the manager's core client, with the spam filter of
// Options.EventsQPS and EventsBurst, and logs each Event at -v=4.
func (m *Manager) newControllerEvents() *controllerEvents {
	b := newEventBroadcaster(m.opts)
	b.StartStructuredLogging(4)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: m.core.Events("")})
	return &controllerEvents{broadcaster: b, recorder: b.NewRecorder(eventScheme(), corev1.EventSource{Component: "metactl"})}
}

// stop shuts the pipeline down controllerEventsDrain from now: the Events
// the controller recorded before it stopped are written meanwhile, those
// still queued then are dropped.
func (e *controllerEvents) stop() {
	time.AfterFunc(controllerEventsDrain, e.broadcaster.Shutdown)
}

// eventsRunner is a controller with its Event pipeline, stopped with it.
type eventsRunner struct {
	runner
	events *controllerEvents
}

// Stop stops the controller, then its Event pipeline (controllerEvents.stop).
func (r *eventsRunner) Stop() {
	r.runner.Stop()
	r.events.stop()
}
