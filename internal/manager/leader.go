package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/metrics"
)

// LeaderElection configures Lease-based leader election: of several
// replicas, only the one holding the Lease runs controllers.
type LeaderElection struct {
	// Namespace and Name of the Lease.
	Namespace, Name string
	// Identity of this replica; default hostname plus a random suffix.
	Identity string
	// LeaseDuration is how long others wait after the last renewal before
	// taking over; RenewDeadline how long the leader keeps trying to renew
	// before it gives up; RetryPeriod the pace of attempts. Defaults 15s,
	// 10s, 2s. A leader that cannot renew stops within RenewDeadline, before
	// another replica may take over at LeaseDuration.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// ErrLeadershipLost is returned by Run when this replica lost the Lease. It
// returns at once, with the syncs in flight cancelled but not waited for: the process must
// exit now, so that it stops acting before another replica starts.
var ErrLeadershipLost = errors.New("lost the leader lease")

// runElected runs the controllers only while this replica holds the Lease.
// On ctx's end it stops them (cancelling their in-flight syncs, waited for
// at most the stop grace period) and only then
// releases the Lease, so the next leader never overlaps with it.
func (m *Manager) runElected(ctx context.Context, le *LeaderElection) error {
	setElectionDefaults(le)
	logger := klog.FromContext(ctx).WithValues("lease", klog.KRef(le.Namespace, le.Name), "identity", le.Identity)
	m.standby.Store(true)
	// The controllers run with runCtx: losing the Lease cancels their
	// syncs at once, even when Run's caller does not exit.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	term := newLeadership()
	elector, err := m.newElector(le, m.leaderCallbacks(runCtx, logger, term))
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	release := runElector(ctx, elector)
	return awaitElectionEnd(ctx, term, release, stopRun, logger)
}

// setElectionDefaults gives le's unset fields their defaults.
func setElectionDefaults(le *LeaderElection) {
	if le.Identity == "" {
		host, _ := os.Hostname()
		le.Identity = host + "_" + uuid.NewString()
	}
	if le.LeaseDuration <= 0 {
		le.LeaseDuration = 15 * time.Second
	}
	if le.RenewDeadline <= 0 {
		le.RenewDeadline = 10 * time.Second
	}
	if le.RetryPeriod <= 0 {
		le.RetryPeriod = 2 * time.Second
	}
}

// leadership is what the leader election's callbacks tell runElected.
type leadership struct {
	// leading is set once this replica got the Lease.
	leading atomic.Bool
	// lost is closed once it lost it (or never got it and stopped
	// trying).
	lost     chan struct{}
	lostOnce sync.Once
	// done receives the controllers' Run error once they stop.
	done chan error
}

func newLeadership() *leadership {
	return &leadership{lost: make(chan struct{}), done: make(chan error, 1)}
}

// leaderCallbacks run the controllers with runCtx once this replica
// leads, and tell term when it does and when it stops leading.
func (m *Manager) leaderCallbacks(runCtx context.Context, logger klog.Logger, term *leadership) leaderelection.LeaderCallbacks {
	return leaderelection.LeaderCallbacks{
		OnStartedLeading: func(context.Context) {
			logger.Info("Became the leader")
			metrics.Leader.Set(1)
			m.standby.Store(false)
			term.leading.Store(true)
			go func() { term.done <- m.run(runCtx) }()
		},
		OnStoppedLeading: func() {
			metrics.Leader.Set(0)
			// Explain answers "not leading" from now until the
			// process exits.
			m.standby.Store(true)
			term.lostOnce.Do(func() { close(term.lost) })
		},
	}
}

// newElector returns the elector of le's Lease, which releases it when
// its context ends.
func (m *Manager) newElector(le *LeaderElection, callbacks leaderelection.LeaderCallbacks) (*leaderelection.LeaderElector, error) {
	return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
			Client:     m.coordination,
			LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
		},
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            "metactl",
		Callbacks:       callbacks,
	})
}

// runElector runs elector, not stopped by ctx's end but by the returned
// release, which returns once the Lease is released.
func runElector(ctx context.Context, elector *leaderelection.LeaderElector) (release func()) {
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		elector.Run(electorCtx)
	}()
	return func() {
		stopElector()
		<-electorDone // the Lease is released
	}
}

// awaitElectionEnd waits for ctx's end, the loss of the Lease or the
// controllers' end (term), and returns runElected's error: on ctx's end
// the controllers stop before the Lease is released; on its loss they
// are cancelled (stopRun) and not waited for.
func awaitElectionEnd(ctx context.Context, term *leadership, release func(), stopRun context.CancelFunc, logger klog.Logger) error {
	select {
	case <-ctx.Done():
		var err error
		if term.leading.Load() {
			err = <-term.done // controllers stopped, in-flight syncs ended or abandoned
		}
		release()
		return err
	case <-term.lost:
		if ctx.Err() != nil {
			return nil
		}
		logger.Info("Lost the leader lease; stopping at once")
		stopRun()
		return ErrLeadershipLost
	case err := <-term.done:
		release()
		return err
	}
}
