package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// apiProfileSeconds is how long each kube-apiserver profile lasts: the
// same for the limit's create and metactl's, so that their samples
// compare as CPU-seconds over equal windows (each phase plus the idle rest
// of the window). 8 s per 1,000 parents, at least 8 s: about twice
// metactl's create phase on the 2-core machine of docs/performance.md.
func (b *bench) apiProfileSeconds() int {
	return max(8, int(math.Ceil(8*float64(b.o.n)/1000)))
}

// profileAPIServer starts a CPU profile of kube-apiserver (its
// /debug/pprof/profile, which the control plane serves to its admin) and
// returns a function that waits until it is saved as
// <out dir>/<label>-apiserver-<name>.cpu.pprof. A failure is logged, not
// returned: the profile is a diagnostic, not a measurement.
func (b *bench) profileAPIServer(ctx context.Context, name string) (wait func()) {
	seconds := b.apiProfileSeconds()
	path := filepath.Join(b.outDir, fmt.Sprintf("%s-apiserver-%s.cpu.pprof", b.o.label, name))
	done := make(chan struct{})
	go func() {
		defer close(done)
		data, err := b.jsonKube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", fmt.Sprint(seconds)).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(path, data, 0o644)
		}
		if err != nil {
			logf("kube-apiserver CPU profile %s: %v", name, err)
			return
		}
		logf("kube-apiserver CPU profile (%ds) in %s", seconds, path)
	}()
	return func() { <-done }
}
