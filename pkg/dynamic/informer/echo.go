package informer

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// echoTTL bounds how long an expected echo is remembered; an echo that
// never arrives (the informer re-listed past it) is forgotten after it.
const echoTTL = 2 * time.Minute

// Echoes remembers the writes a controller made so that the watch events
// they cause, their echoes, can be told apart from changes by others. A
// controller that already acted on the result of its own write need not
// sync again when the write comes back through the informer.
//
// An object version (UID and resourceVersion) counts as an echo at most
// once. Echoes is safe for concurrent use.
type Echoes struct {
	mu       sync.Mutex
	expected map[types.UID]map[string]time.Time
	writes   int
}

// NewEchoes returns an empty Echoes.
func NewEchoes() *Echoes {
	return &Echoes{expected: map[types.UID]map[string]time.Time{}}
}

// Expect records obj, as a write returned it, as an expected echo.
func (e *Echoes) Expect(obj metav1.Object) {
	if obj == nil || obj.GetUID() == "" || obj.GetResourceVersion() == "" {
		return
	}
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	versions := e.expected[obj.GetUID()]
	if versions == nil {
		versions = map[string]time.Time{}
		e.expected[obj.GetUID()] = versions
	}
	versions[obj.GetResourceVersion()] = now
	if e.writes++; e.writes%1024 == 0 {
		e.expireLocked(now)
	}
}

// IsEcho reports whether obj is a version this controller wrote and was
// expecting, and forgets it.
func (e *Echoes) IsEcho(obj metav1.Object) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	versions, ok := e.expected[obj.GetUID()]
	if !ok {
		return false
	}
	at, ok := versions[obj.GetResourceVersion()]
	if !ok {
		return false
	}
	delete(versions, obj.GetResourceVersion())
	if len(versions) == 0 {
		delete(e.expected, obj.GetUID())
	}
	return time.Since(at) < echoTTL
}

// Forget drops what is expected of the object with uid, e.g. when it is
// deleted.
func (e *Echoes) Forget(uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.expected, uid)
}

// Len returns the number of objects with expected echoes; for tests.
func (e *Echoes) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.expected)
}

func (e *Echoes) expireLocked(now time.Time) {
	for uid, versions := range e.expected {
		for rv, at := range versions {
			if now.Sub(at) > echoTTL {
				delete(versions, rv)
			}
		}
		if len(versions) == 0 {
			delete(e.expected, uid)
		}
	}
}
