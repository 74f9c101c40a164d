/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestHTTP2AnswersWaitingForBudgetAreNotBuffered: over HTTP/2 the
// transport reads an answer into its own buffers as far as the stream's
// flow-control window lets the server send, before Call reads (and
// reserves) anything. Calls that wait for room in the budget must not hold
// megabytes there: an HTTPS hook (the CA bundle's per-TLS-material
// transport, built by NewTransport) may send at most a small window per
// stream before the answer is read.
func TestHTTP2AnswersWaitingForBudgetAreNotBuffered(t *testing.T) {
	const size = 8 << 20
	body := statusAnswer(size)
	var (
		mu      sync.Mutex
		written []int // per answer, the bytes the server could send
		done    sync.WaitGroup
		started atomic.Int32
	)
	ca := newTestCA(t, "hooks CA")
	_, _, serverCert := ca.issue(t, "hook server", false)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		done.Add(1)
		defer done.Done()
		started.Add(1)
		if r.ProtoMajor != 2 {
			http.Error(w, "want HTTP/2, got "+r.Proto, http.StatusBadRequest)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", strconv.Itoa(size))
		n := 0
		defer func() {
			mu.Lock()
			written = append(written, n)
			mu.Unlock()
		}()
		for n < size {
			m, err := io.WriteString(w, body[n:min(n+16<<10, size)])
			n += m
			if err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	_, src := newSource(t)
	c, _ := secureClient(t, src)
	// Hold the whole main part: the 8 MiB answers wait for room.
	held := reservation{b: c.budget}
	if err := held.reserveAll(context.Background(), c.budget.main); err != nil {
		t.Fatal(err)
	}
	defer held.release()

	hook := hookWith(srv.URL, func(w *v1alpha1.Webhook) {
		w.CABundle = &v1alpha1.CABundleConfig{Inline: ptr.To(string(ca.pem))}
		w.Timeout = &metav1.Duration{Duration: time.Second}
	})
	const calls = 4
	errs := make(chan error, calls)
	for range calls {
		go func() { errs <- call(c, hook) }()
	}
	for range calls {
		if err := <-errs; err == nil || !IsUnreachable(err) {
			t.Fatalf("err = %v, want the answer refused for want of room in the budget", err)
		}
	}
	until(t, "the server's handlers end", func() bool { return started.Load() == calls })
	done.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, n := range written {
		if n >= 1<<20 {
			t.Errorf("the server sent %d KiB of an answer that waited for budget: the HTTP/2 transport buffers it outside the budget", n>>10)
		}
	}
}
