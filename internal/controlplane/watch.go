package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Ready asks kube-apiserver's /readyz once, waiting at most timeout, and
// returns its error.
func (cp *ControlPlane) Ready(ctx context.Context, timeout time.Duration) error {
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	return readyz(ctx, client, timeout)
}

func readyz(ctx context.Context, client kubernetes.Interface, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
}

// Lost returns a channel that receives, once, the first sign that the
// control plane is gone while ctx lasts: a process it started itself
// (kube-controller-manager, kube-scheduler, kwok) exited, or kube-apiserver
// did not answer /readyz in three checks in a row, every interval. Nothing
// is sent after Stop has begun or once ctx ends.
func (cp *ControlPlane) Lost(ctx context.Context, interval time.Duration) <-chan error {
	lost := make(chan error, 1)
	report := func(err error) {
		select {
		case lost <- err:
		default:
		}
	}
	for i, done := range cp.procDone {
		name := filepath.Base(cp.procs[i].Path)
		go func() {
			select {
			case <-ctx.Done():
			case <-done:
				if !cp.stopping.Load() {
					report(fmt.Errorf("%s exited (its log is %s)", name, filepath.Join(cp.Dir, name+".log")))
				}
			}
		}()
	}
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		report(fmt.Errorf("a client for kube-apiserver: %w", err))
		return lost
	}
	go func() {
		failures := 0
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			err := readyz(ctx, client, interval)
			if err == nil || ctx.Err() != nil {
				failures = 0
				continue
			}
			if failures++; failures >= 3 && !cp.stopping.Load() {
				report(fmt.Errorf("kube-apiserver stopped answering: %w", err))
				return
			}
		}
	}()
	return lost
}
