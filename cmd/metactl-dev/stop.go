package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// stopContext returns a context that ends on SIGINT, SIGTERM or SIGHUP, or
// when standard output or standard error is a pipe whose reading end is
// closed (`metactl dev | head`, or a `| tee` ended by Ctrl-C): metactl dev
// then stops everything it started instead of dying of SIGPIPE on its next
// write and leaving its processes behind.
func stopContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	signals := make(chan os.Signal, 1)
	// Notifying SIGPIPE also turns a write to a closed pipe into an EPIPE
	// error instead of death; the signal comes for any broken pipe or
	// socket, so only a closed standard output or error stops metactl dev.
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGPIPE)
	// Unless started with them ignored (nohup, a background job of a
	// script): notifying them would undo that.
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGHUP} {
		if !signal.Ignored(sig) {
			signal.Notify(signals, sig)
		}
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case sig := <-signals:
				if sig != syscall.SIGPIPE {
					cancel(errors.New("received " + sig.String()))
					return
				}
				if fd, closed, _ := closedOutput(0); closed {
					cancel(errors.New(fd + " was closed"))
					return
				}
			}
		}
	}()
	// A closed pipe raises SIGPIPE only on a write, and metactl dev may
	// write nothing for hours: watch for it.
	go func() {
		for ctx.Err() == nil {
			fd, closed, watched := closedOutput(time.Second)
			if closed {
				cancel(errors.New(fd + " was closed"))
			}
			if !watched {
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(signals)
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			klog.InfoS("Stopped metactl dev", "cause", cause.Error())
		}
		cancel(context.Canceled)
	}
}

// closedOutput reports whether standard output or standard error is a pipe
// or socket whose other end is closed, waiting up to timeout for that;
// watched is false when neither is a pipe or socket.
func closedOutput(timeout time.Duration) (fd string, closed, watched bool) {
	names := map[int32]string{1: "standard output", 2: "standard error"}
	var fds []unix.PollFd
	for fd := range names {
		var st unix.Stat_t
		if unix.Fstat(int(fd), &st) != nil {
			continue
		}
		if mode := st.Mode & unix.S_IFMT; mode == unix.S_IFIFO || mode == unix.S_IFSOCK {
			fds = append(fds, unix.PollFd{Fd: fd}) // no events: only POLLERR and POLLHUP
		}
	}
	if len(fds) == 0 {
		return "", false, false
	}
	if _, err := unix.Poll(fds, int(timeout.Milliseconds())); err != nil {
		return "", false, true // EINTR: look again
	}
	for _, p := range fds {
		if p.Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
			return names[p.Fd], true, true
		}
	}
	return "", false, true
}
