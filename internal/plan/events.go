package plan

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// Event is an Event the sync would record.
type Event struct {
	// Object names the object it is about: "Kind namespace/name".
	Object  string `json:"object"`
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// eventCollector is the plan's record.EventRecorder: it keeps the Events
// and sends none.
type eventCollector struct {
	mu     sync.Mutex
	events []Event
}

func (c *eventCollector) Event(obj runtime.Object, eventtype, reason, message string) {
	name := ""
	if m, err := meta.Accessor(obj); err == nil {
		name = m.GetName()
		if ns := m.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
	}
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	c.mu.Lock()
	c.events = append(c.events, Event{Object: kind + " " + name, Type: eventtype, Reason: reason, Message: message})
	c.mu.Unlock()
}

func (c *eventCollector) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	c.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (c *eventCollector) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	c.Eventf(obj, eventtype, reason, messageFmt, args...)
}

func (c *eventCollector) list() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Event(nil), c.events...)
}
