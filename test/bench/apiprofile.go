package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
)

// apiProfileSeconds is how long each kube-apiserver profile lasts: the
// same for the limit's create and metactl's, so that their samples
// compare as CPU-seconds over equal windows (each phase plus the idle rest
// of the window). 8 s per 1,000 parents, at least 8 s, twice that with a
// slow hook: about twice metactl's create phase on the 2-core machine of
// docs/performance.md. A phase that outlasts its window fails the run
// (serverProfile.check).
func (b *bench) apiProfileSeconds() int {
	s := max(8, int(math.Ceil(8*float64(b.o.n)/1000)))
	if b.o.slowHookMs > 0 {
		s *= 2
	}
	return s
}

// serverProfile is a CPU profile of kube-apiserver being taken.
type serverProfile struct {
	name  string
	until time.Time // the end of its window
	done  chan struct{}
	err   error // set before done closes
}

// profileAPIServer starts a CPU profile of kube-apiserver (its
// /debug/pprof/profile, which the control plane serves to its admin),
// saved as <out dir>/<label>-apiserver-<name>.cpu.pprof.
func (b *bench) profileAPIServer(ctx context.Context, name string) *serverProfile {
	seconds := b.apiProfileSeconds()
	path := filepath.Join(b.outDir, fmt.Sprintf("%s-apiserver-%s.cpu.pprof", b.o.label, name))
	p := &serverProfile{name: name, until: time.Now().Add(time.Duration(seconds) * time.Second), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		data, err := b.jsonKube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", fmt.Sprint(seconds)).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(path, data, 0o644)
		}
		if err != nil {
			p.err = fmt.Errorf("kube-apiserver CPU profile %s: %w", name, err)
			return
		}
		logf("kube-apiserver CPU profile (%ds) in %s", seconds, path)
	}()
	return p
}

// wait waits until the profile is saved (or failed) and returns its
// error; nil p does nothing. It may be called more than once.
func (p *serverProfile) wait() error {
	if p == nil {
		return nil
	}
	<-p.done
	return p.err
}

// check is wait, and an error if the phase it profiles ended at end,
// after the profile's window: the profile would not cover the phase.
func (p *serverProfile) check(end time.Time) error {
	if err := p.wait(); err != nil {
		return err
	}
	if p != nil && end.After(p.until) {
		return fmt.Errorf("kube-apiserver CPU profile %s: the phase ended %.1fs after the profile's window", p.name, end.Sub(p.until).Seconds())
	}
	return nil
}
