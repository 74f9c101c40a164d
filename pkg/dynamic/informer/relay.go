package informer

import (
	"sync"
	"sync/atomic"

	"k8s.io/client-go/tools/cache"
)

// relay is one handler added through Informer.AddEventHandler: registered
// on the shared informer's current generation, and moved to the next one
// at a swap, where it first receives what changed between the two.
type relay struct {
	handler cache.ResourceEventHandler

	mu      sync.Mutex
	regs    []registration // the newest last
	removed bool
	gone    chan struct{} // closed when removed
	// synced latches the newest registration's HasSynced.
	synced atomic.Bool
}

type registration struct {
	gen *generation
	reg cache.ResourceEventHandlerRegistration
}

// HasSynced reports whether the handler has received its initial objects;
// once true, it stays true.
func (r *relay) HasSynced() bool {
	if r.synced.Load() {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.regs) == 0 || !r.regs[len(r.regs)-1].reg.HasSynced() {
		return false
	}
	r.synced.Store(true)
	return true
}

// register adds the relay to gen with listener l; false when the relay
// was removed.
func (r *relay) register(gen *generation, l *relayListener) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removed {
		return false, nil
	}
	reg, err := gen.informer.AddEventHandler(l)
	if err != nil {
		return false, err
	}
	r.regs = append(r.regs, registration{gen: gen, reg: reg})
	return true, nil
}

// forget drops the registrations on gen, a stopped generation.
func (r *relay) forget(gen *generation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, reg := range r.regs {
		if reg.gen == gen {
			r.regs = append(r.regs[:i], r.regs[i+1:]...)
			return
		}
	}
}

func (r *relay) remove() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removed {
		return
	}
	r.removed = true
	close(r.gone)
	for _, reg := range r.regs {
		_ = reg.gen.informer.RemoveEventHandler(reg.reg)
	}
	r.regs = nil
}

func (s *shared) addRelay(handler cache.ResourceEventHandler) (*relay, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &relay{handler: handler, gone: make(chan struct{})}
	gen := s.cur.Load()
	if _, err := r.register(gen, &relayListener{r: r, gen: gen}); err != nil {
		return nil, err
	}
	if s.relays == nil {
		s.relays = map[*relay]struct{}{}
	}
	s.relays[r] = struct{}{}
	return r, nil
}

func (s *shared) removeRelay(r *relay) {
	s.mu.Lock()
	delete(s.relays, r)
	s.mu.Unlock()
	r.remove()
}

// relayListener is a relay's handler on one generation. On the generation
// a swap retires, the sentinel ends its events: it then delivers the
// swap's changes and hands over. On the generation that replaces it, it
// waits for that handover before its first event, and drops the
// generation's initial adds when the changes stood for them.
type relayListener struct {
	r   *relay
	gen *generation
	// handover, on a generation that replaced another, is closed once the
	// handler had every event of the old one; nil otherwise.
	handover <-chan struct{}
	// skipInitial drops the initial adds (the swap's changes cover them).
	skipInitial bool
	waited      bool
}

// wait waits for the handover; false when the generation stopped first.
func (l *relayListener) wait() bool {
	if l.handover == nil || l.waited {
		return true
	}
	select {
	case <-l.handover:
		l.waited = true
		return true
	case <-l.gen.stopCh:
		return false
	}
}

func (l *relayListener) OnAdd(obj any, initial bool) {
	if st := l.gen.retiring.Load(); st != nil && obj == st.sentinel {
		st.deliver(l.r)
		return
	}
	if !l.wait() || initial && l.skipInitial {
		return
	}
	l.r.handler.OnAdd(obj, initial)
}

func (l *relayListener) OnUpdate(oldObj, newObj any) {
	if l.wait() {
		l.r.handler.OnUpdate(oldObj, newObj)
	}
}

func (l *relayListener) OnDelete(obj any) {
	if l.wait() {
		l.r.handler.OnDelete(obj)
	}
}
