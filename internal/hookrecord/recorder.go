package hookrecord

import (
	"container/list"
	"context"
	"path/filepath"
	"strings"
	"sync"

	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/lru"
	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/pkg/hooks/hookclient"
)

// DefaultMaxCalls is the default of RecorderOptions.MaxCalls: the calls
// kept per controller.
const DefaultMaxCalls = 100

// DefaultMaxBytes is the default of RecorderOptions.MaxBytes: the bytes of
// recorded calls kept, all controllers together.
const DefaultMaxBytes int64 = 8 << 20

// callOverhead is what a Call is counted for beyond its strings and
// bodies: its struct, its places in the Recorder's lists.
const callOverhead = 256

// RecorderOptions configure a Recorder.
type RecorderOptions struct {
	// MaxCalls is the most calls kept per controller; past it the
	// controller's oldest goes. The newest are kept: they show what the
	// hook does now, with the objects as they are now, which is what a
	// replay against a new version of the hook should compare with; the
	// oldest may be answers of a version since replaced. Default (0):
	// DefaultMaxCalls.
	MaxCalls int
	// MaxBytes bounds the bytes of the calls kept (their bodies, error
	// and names, plus callOverhead each), all controllers together; past
	// it the oldest calls go, whichever controller made them. A call
	// larger than MaxBytes on its own is neither kept nor written to Dir
	// (nor even decoded). Default (0): DefaultMaxBytes.
	MaxBytes int64
	// Dir, when set, is where each call is also written as it is
	// recorded, with WriteDir: into Dir/<kind>-<name>/ (for the
	// controller "compositecontroller/NAME", Dir/compositecontroller-NAME),
	// numbered on from the calls already there (Next). What is written
	// there is not bounded in number (each call by MaxBytes): it is for
	// development (metactl dev --record-dir), not for a metactl left
	// running.
	Dir string
}

// Recorder records the hook calls of the controllers that opt in: the
// hookclient.Tap of metactl's hook client. An Engine marks the calls of a
// controller that records (Enable) with With; Recording accepts exactly
// those, so that the calls of other controllers cost one context lookup.
// Each call's Secret data is replaced by digests (DigestSecrets) before
// it is kept. Safe for concurrent use.
type Recorder struct {
	opts RecorderOptions

	mu sync.Mutex
	// all holds every call kept, under the number it was recorded as,
	// oldest first (never looked up with Get, so it keeps the order the
	// calls came in), within MaxBytes: past it, the oldest go.
	all         *lru.Cache[uint64, *entry]
	recorded    uint64 // the number of the last call recorded
	controllers map[string]*controllerCalls
	// writers are the directories in Dir written to, by controller;
	// kept when a controller stops recording, so that the numbers it
	// took stay taken.
	writers map[string]*dirWriter
}

// dirWriter writes one controller's calls into its directory in Dir, one
// at a time, numbering them.
type dirWriter struct {
	mu  sync.Mutex
	dir string
	// next is the number of its next file; 0 until read from the
	// directory (Next).
	next int
}

// write writes c as the next call in w's directory.
func (w *dirWriter) write(c Call) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.next == 0 {
		n, err := Next(w.dir)
		if err != nil {
			return err
		}
		w.next = n
	}
	n := w.next
	w.next++
	return WriteDir(w.dir, n, []Call{c})
}

// controllerCalls are one controller's recorded calls.
type controllerCalls struct {
	enabled bool
	calls   *list.List // of *entry, oldest first
}

type entry struct {
	id    uint64 // its key in Recorder.all
	call  Call
	owner *controllerCalls
	own   *list.Element // in owner.calls
}

// NewRecorder returns a Recorder configured by opts.
func NewRecorder(opts RecorderOptions) *Recorder {
	if opts.MaxCalls <= 0 {
		opts.MaxCalls = DefaultMaxCalls
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	r := &Recorder{opts: opts, controllers: map[string]*controllerCalls{}, writers: map[string]*dirWriter{}}
	r.all = lru.New(lru.Options[uint64, *entry]{MaxBytes: opts.MaxBytes, OnEvict: func(_ uint64, e *entry) {
		e.owner.calls.Remove(e.own)
		metrics.RecordedCalls.Dec()
		metrics.RecordEvictions.Inc()
	}})
	return r
}

// Enable says whether controller ("compositecontroller/NAME") records:
// its calls under With are kept from now on (on), or no longer, and those
// kept are dropped (off). An Engine calls it as it starts.
func (r *Recorder) Enable(controller string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.controllers[controller]
	if !on {
		if c != nil {
			r.dropAll(c)
			delete(r.controllers, controller)
		}
		return
	}
	if c == nil {
		c = &controllerCalls{calls: list.New()}
		r.controllers[controller] = c
	}
	c.enabled = true
}

// Forget drops controller's calls and its choice to record: its
// controller object is gone.
func (r *Recorder) Forget(controller string) { r.Enable(controller, false) }

// Enabled reports whether controller records.
func (r *Recorder) Enabled(controller string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.controllers[controller]
	return c != nil && c.enabled
}

// Calls returns the calls kept of controller, oldest first, and whether it
// records.
func (r *Recorder) Calls(controller string) ([]Call, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.controllers[controller]
	if c == nil || !c.enabled {
		return nil, false
	}
	out := make([]Call, 0, c.calls.Len())
	for e := c.calls.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(*entry).call)
	}
	return out, true
}

// target is what With puts in a context.
type target struct{ controller, object string }

// targetKey is the context key of With's target. It is a context key
// because the hook call reaches the Recorder only through hooks.Tap,
// which pkg/hooks calls with the call's context and nothing of the sync.
type targetKey struct{}

// With returns ctx marking the hook calls under it as controller's
// ("compositecontroller/NAME"), about object (see Call.Object), to be
// recorded.
func With(ctx context.Context, controller, object string) context.Context {
	return context.WithValue(ctx, targetKey{}, &target{controller: controller, object: object})
}

// Recording reports whether the call under ctx is recorded: marked by
// With. It is hookclient.Tap's check, made on every call.
func (r *Recorder) Recording(ctx context.Context) bool {
	_, ok := ctx.Value(targetKey{}).(*target)
	return ok
}

// Record keeps tc, a call Recording accepted, with its Secret data
// replaced by digests and the credentials of the URLs in its controller
// object redacted (scrubRequest), unless its controller no longer records
// or it is larger than MaxBytes; and writes it to Dir when set.
func (r *Recorder) Record(ctx context.Context, tc *hookclient.TappedCall) {
	t, ok := ctx.Value(targetKey{}).(*target)
	if !ok {
		return
	}
	logger := klog.FromContext(ctx)
	if int64(len(tc.Request)+len(tc.Response)) > r.opts.MaxBytes {
		// Too large to be kept or written: not even decoded to digest
		// its Secrets (decoding takes several times the JSON's size).
		metrics.RecordEvictions.Inc()
		return
	}
	request, err := scrubRequest(tc.Request)
	if err != nil {
		logger.V(2).Info("Not recording a hook call: its request is not JSON", "hook", tc.Hook, "err", err)
		return
	}
	c := Call{Controller: t.controller, Hook: tc.Hook, Object: t.object, Time: tc.Start.UTC(),
		DurationSeconds: tc.Duration.Seconds(), Request: request, Code: tc.Code}
	if len(tc.Response) > 0 {
		// An answer that is not JSON is not kept: the call's error says
		// what was wrong with it.
		if response, err := DigestSecrets(tc.Response); err == nil {
			c.Response = response
		}
	}
	if tc.Err != nil {
		c.Error = tc.Err.Error()
	}
	size := int64(len(c.Request)+len(c.Response)+len(c.Error)+len(c.Object)+len(c.Controller)) + callOverhead

	r.mu.Lock()
	owner := r.controllers[t.controller]
	if owner == nil || !owner.enabled {
		r.mu.Unlock()
		return
	}
	var w *dirWriter
	if r.opts.Dir != "" {
		if w = r.writers[t.controller]; w == nil {
			w = &dirWriter{dir: r.dir(t.controller)}
			r.writers[t.controller] = w
		}
	}
	if size <= r.opts.MaxBytes {
		// The controller's oldest calls past MaxCalls go first, then
		// (r.all) the oldest of all until the call fits in MaxBytes.
		for owner.calls.Len() >= r.opts.MaxCalls {
			r.drop(owner.calls.Front().Value.(*entry))
			metrics.RecordEvictions.Inc()
		}
		r.recorded++
		e := &entry{id: r.recorded, call: c, owner: owner}
		r.all.Put(e.id, e, size)
		e.own = owner.calls.PushBack(e)
		metrics.RecordedCalls.Inc()
		metrics.RecordedBytes.Set(float64(r.all.Bytes()))
	} else {
		metrics.RecordEvictions.Inc()
	}
	r.mu.Unlock()

	if w != nil {
		if err := w.write(c); err != nil {
			logger.Error(err, "Writing a recorded hook call", "dir", r.opts.Dir)
		}
	}
}

// dir is the directory of controller's calls in Dir.
func (r *Recorder) dir(controller string) string {
	return filepath.Join(r.opts.Dir, strings.Replace(controller, "/", "-", 1))
}

// drop removes e. r.mu is held.
func (r *Recorder) drop(e *entry) {
	r.all.Remove(e.id)
	e.owner.calls.Remove(e.own)
	metrics.RecordedCalls.Dec()
}

// dropAll removes every call of c. r.mu is held.
func (r *Recorder) dropAll(c *controllerCalls) {
	for c.calls.Len() > 0 {
		r.drop(c.calls.Front().Value.(*entry))
	}
	metrics.RecordedBytes.Set(float64(r.all.Bytes()))
}

// Set is the recorded calls of one controller as metactl serves them at
// Path.
type Set struct {
	// Controller names the controller: "compositecontroller/NAME" or
	// "decoratorcontroller/NAME".
	Controller string `json:"controller"`
	// Calls are its calls kept, oldest first.
	Calls []Call `json:"calls"`
}

var _ hookclient.Tap = (*Recorder)(nil)
