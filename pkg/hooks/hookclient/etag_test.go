/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// etagServer is a hook that names each answer by an ETag derived from the
// request and answers 304 when asked with a matching If-None-Match.
type etagServer struct {
	mu          sync.Mutex
	ifNoneMatch []string // of each request
	codes       []int
	noETag      atomic.Bool  // answer without an ETag
	version     atomic.Int32 // changes every ETag
	always304   atomic.Bool  // answer 304 whatever the request
	use412      atomic.Bool  // answer 412 Precondition Failed instead of 304
}

func (s *etagServer) handler(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	sum := sha256.Sum256(body)
	tag := fmt.Sprintf(`"%x-%d"`, sum[:8], s.version.Load())
	inm := r.Header.Get("If-None-Match")
	code := http.StatusOK
	if inm == tag || s.always304.Load() {
		code = http.StatusNotModified
		if s.use412.Load() {
			code = http.StatusPreconditionFailed
		}
	}
	s.mu.Lock()
	s.ifNoneMatch = append(s.ifNoneMatch, inm)
	s.codes = append(s.codes, code)
	s.mu.Unlock()
	if !s.noETag.Load() {
		w.Header().Set("ETag", tag)
	}
	if code != http.StatusOK {
		w.WriteHeader(code)
		return
	}
	// The answer depends on the request, so a wrong cache hit shows.
	fmt.Fprintf(w, `{"status":{"request":%q},"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}]}`, fmt.Sprintf("%x", sum[:4]))
}

// last returns the If-None-Match sent and the code answered by the last
// request.
func (s *etagServer) last() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ifNoneMatch[len(s.ifNoneMatch)-1], s.codes[len(s.codes)-1]
}

func etagHook(url string, timeoutSeconds int32) *v1alpha1.Hook {
	return hookWith(url, func(w *v1alpha1.Webhook) {
		w.Etag = &v1alpha1.WebhookEtagConfig{Enabled: ptr.To(true), CacheTimeoutSeconds: ptr.To(timeoutSeconds), CacheCleanupSeconds: ptr.To(int32(300))}
	})
}

func TestCallEtag(t *testing.T) {
	es := &etagServer{}
	srv := serve(t, es.handler)
	clock := newFakeClock()
	var codes []int
	c := NewClient(Options{Metrics: ObserverFunc(func(_, _ string, code int, _ time.Duration) { codes = append(codes, code) })})
	c.now = clock.Now
	hook := etagHook(srv.URL, 1)
	ctx := context.Background()
	req := sampleCompositeRequest(v1alpha1.HookVersionV1)

	var first hooks.CompositeSyncResponse
	if err := c.Call(ctx, "c", "sync", hook, req, &first, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if inm, code := es.last(); inm != "" || code != http.StatusOK {
		t.Fatalf("first call: If-None-Match %q, code %d", inm, code)
	}

	var second hooks.CompositeSyncResponse
	if err := c.Call(ctx, "c", "sync", hook, req, &second, CallOptions{}); err != nil {
		t.Fatalf("304: %v", err)
	}
	if inm, code := es.last(); inm == "" || code != http.StatusNotModified {
		t.Fatalf("second call: If-None-Match %q, code %d, want a revalidation answered 304", inm, code)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("the 304 answer differs from the first (-first +second):\n%s", diff)
	}
	if diff := cmp.Diff([]int{200, 304}, codes); diff != "" {
		t.Errorf("observed codes (-want +got):\n%s", diff)
	}

	// A changed request is not answered from the cache.
	changed := sampleCompositeRequest(v1alpha1.HookVersionV1)
	changed.Finalizing = true
	var third hooks.CompositeSyncResponse
	if err := c.Call(ctx, "c", "sync", hook, changed, &third, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if inm, code := es.last(); inm != "" || code != http.StatusOK {
		t.Errorf("changed request: If-None-Match %q, code %d, want no revalidation", inm, code)
	}
	if cmp.Equal(first.Status, third.Status) {
		t.Error("the changed request got the first answer")
	}

	// The same request to another URL is not answered from the cache.
	if err := c.Call(ctx, "c", "sync", etagHook(srv.URL+"/other", 1), req, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if inm, _ := es.last(); inm != "" {
		t.Errorf("other URL: If-None-Match %q", inm)
	}

	// Within the timeout the entry lives; after it, it is gone.
	clock.Step(999 * time.Millisecond)
	if err := c.Call(ctx, "c", "sync", hook, req, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if inm, _ := es.last(); inm == "" {
		t.Error("entry expired before its timeout")
	}
	clock.Step(time.Millisecond)
	if err := c.Call(ctx, "c", "sync", hook, req, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if inm, code := es.last(); inm != "" || code != http.StatusOK {
		t.Errorf("after the timeout: If-None-Match %q, code %d, want a fresh request", inm, code)
	}
}

// A hook may say "your cached answer is current" with 412 Precondition
// Failed (If-None-Match failed) as well as with 304, as metacontroller
// reads it; the metrics count it as a revalidation, code 304.
func TestCallEtag412UsesTheCachedAnswer(t *testing.T) {
	es := &etagServer{}
	es.use412.Store(true)
	srv := serve(t, es.handler)
	var codes []int
	c := NewClient(Options{Metrics: ObserverFunc(func(_, _ string, code int, _ time.Duration) { codes = append(codes, code) })})
	hook := etagHook(srv.URL, 60)
	req := sampleCompositeRequest(v1alpha1.HookVersionV1)
	var first, second hooks.CompositeSyncResponse
	if err := c.Call(context.Background(), "c", "sync", hook, req, &first, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := c.Call(context.Background(), "c", "sync", hook, req, &second, CallOptions{}); err != nil {
			t.Fatalf("412 to If-None-Match: %v", err)
		}
		if inm, code := es.last(); inm == "" || code != http.StatusPreconditionFailed {
			t.Fatalf("If-None-Match %q, code %d, want a revalidation answered 412", inm, code)
		}
		if diff := cmp.Diff(first, second); diff != "" {
			t.Errorf("the 412 answer differs from the first (-first +second):\n%s", diff)
		}
	}
	if diff := cmp.Diff([]int{200, 304, 304}, codes); diff != "" {
		t.Errorf("observed codes (-want +got):\n%s", diff)
	}
	// Without If-None-Match, a 412 is an error, etag on or off.
	es.always304.Store(true)
	changed := sampleCompositeRequest(v1alpha1.HookVersionV1)
	changed.Finalizing = true
	for _, hook := range []*v1alpha1.Hook{urlHook(srv.URL), hook} {
		err := c.Call(context.Background(), "c", "sync", hook, changed, &hooks.CompositeSyncResponse{}, CallOptions{})
		var se *StatusError
		if !errors.As(err, &se) || se.Code != http.StatusPreconditionFailed {
			t.Errorf("err = %v, want a StatusError 412", err)
		}
	}
}

// Durations below 1 s mean what they mean to metacontroller: responses
// that never expire, and no periodic cleanup.
func TestCallEtagDurationsBelowOneSecond(t *testing.T) {
	es := &etagServer{}
	srv := serve(t, es.handler)
	clock := newFakeClock()
	c := NewClient(Options{})
	c.now = clock.Now
	for _, seconds := range []int32{0, -5} {
		hook := hookWith(srv.URL, func(w *v1alpha1.Webhook) {
			w.Etag = &v1alpha1.WebhookEtagConfig{Enabled: ptr.To(true), CacheTimeoutSeconds: ptr.To(seconds), CacheCleanupSeconds: ptr.To(seconds)}
		})
		req := sampleCompositeRequest(v1alpha1.HookVersionV1)
		req.Parent.Object["spec"] = map[string]any{"seconds": int64(seconds)}
		if err := c.Call(context.Background(), "c", "sync", hook, req, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
			t.Fatal(err)
		}
		clock.Step(1000 * time.Hour)
		if err := c.Call(context.Background(), "c", "sync", hook, req, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
			t.Fatal(err)
		}
		if inm, code := es.last(); inm == "" || code != http.StatusNotModified {
			t.Errorf("cacheTimeoutSeconds %d: If-None-Match %q, code %d after 1000 h, want the entry kept", seconds, inm, code)
		}
	}
	if !c.etags.nextSweep.IsZero() {
		t.Errorf("a sweep is planned at %v, though no hook asked for one", c.etags.nextSweep)
	}
}

func TestCallEtagDisabled(t *testing.T) {
	es := &etagServer{}
	srv := serve(t, es.handler)
	c := NewClient(Options{})
	req := sampleCompositeRequest(v1alpha1.HookVersionV1)
	for _, hook := range []*v1alpha1.Hook{
		urlHook(srv.URL),
		hookWith(srv.URL, func(w *v1alpha1.Webhook) { w.Etag = &v1alpha1.WebhookEtagConfig{Enabled: ptr.To(false)} }),
		hookWith(srv.URL, func(w *v1alpha1.Webhook) { w.Etag = &v1alpha1.WebhookEtagConfig{} }),
	} {
		for range 2 {
			if err := c.Call(context.Background(), "c", "sync", hook, req, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
				t.Fatal(err)
			}
			if inm, _ := es.last(); inm != "" {
				t.Fatalf("etag %+v: If-None-Match %q sent", hook.Webhook.Etag, inm)
			}
		}
	}
	if n, _ := c.etags.len(); n != 0 {
		t.Errorf("%d responses cached with etag off", n)
	}
}

func TestCallEtagUnexpected304(t *testing.T) {
	es := &etagServer{}
	es.always304.Store(true)
	srv := serve(t, es.handler)
	c := NewClient(Options{})
	// Without a cached answer, a 304 is not a success, etag on or off.
	for _, hook := range []*v1alpha1.Hook{urlHook(srv.URL), etagHook(srv.URL, 60)} {
		err := c.Call(context.Background(), "c", "sync", hook, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
		var se *StatusError
		if !errors.As(err, &se) || se.Code != http.StatusNotModified {
			t.Errorf("err = %v, want a StatusError 304", err)
		}
	}
}

func TestCallEtagAnswerWithoutETagDropsTheEntry(t *testing.T) {
	es := &etagServer{}
	srv := serve(t, es.handler)
	c := NewClient(Options{})
	hook := etagHook(srv.URL, 60)
	req := sampleCompositeRequest(v1alpha1.HookVersionV1)
	do := func() (string, int) {
		t.Helper()
		if err := c.Call(context.Background(), "c", "sync", hook, req, &hooks.CompositeSyncResponse{}, CallOptions{}); err != nil {
			t.Fatal(err)
		}
		return es.last()
	}
	do()
	// The hook's answer changes, and it stops sending ETags.
	es.version.Add(1)
	es.noETag.Store(true)
	if inm, code := do(); inm == "" || code != http.StatusOK {
		t.Fatalf("If-None-Match %q, code %d, want a revalidation answered 200", inm, code)
	}
	if inm, _ := do(); inm != "" {
		t.Errorf("If-None-Match %q sent after an answer without ETag", inm)
	}
	if n, _ := c.etags.len(); n != 0 {
		t.Errorf("%d entries cached", n)
	}
}

func TestCallEtagInvalidAnswerNotCached(t *testing.T) {
	var calls atomic.Int32
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("If-None-Match") != "" {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"bad"`)
		_, _ = io.WriteString(w, `{"children":[{"kind":"NoAPIVersion"}]}`)
	})
	c := NewClient(Options{})
	hook := etagHook(srv.URL, 60)
	for range 2 {
		err := c.Call(context.Background(), "c", "sync", hook, &hooks.CompositeSyncRequest{}, &hooks.CompositeSyncResponse{}, CallOptions{})
		var re *ResponseError
		if !errors.As(err, &re) {
			t.Fatalf("err = %v, want a ResponseError", err)
		}
	}
	if n, _ := c.etags.len(); n != 0 {
		t.Errorf("%d invalid answers cached", n)
	}
}

func TestEtagCacheLimits(t *testing.T) {
	s := etagSettings{timeout: time.Minute, cleanup: time.Hour}
	now := time.Unix(1_700_000_000, 0)
	key := func(i int) etagKey { return newEtagKey("http://h", []byte(fmt.Sprint(i))) }

	c := newEtagCache(3, 0)
	for i := range 3 {
		c.put(key(i), `"t"`, []byte("body"), s, now)
	}
	if _, ok := c.get(key(0), s, now); !ok { // 0 is now the most recently used
		t.Fatal("entry 0 missing")
	}
	c.put(key(3), `"t"`, []byte("body"), s, now)
	if _, ok := c.get(key(1), s, now); ok {
		t.Error("the least recently used entry was not evicted")
	}
	for _, i := range []int{0, 2, 3} {
		if _, ok := c.get(key(i), s, now); !ok {
			t.Errorf("entry %d evicted", i)
		}
	}

	big := make([]byte, 1000)
	c = newEtagCache(100, 2500)
	for i := range 5 {
		c.put(key(i), `"t"`, big, s, now)
	}
	n, size := c.len()
	if size > 2500 || n != 2 {
		t.Errorf("%d entries of %d bytes, want 2 within 2500 bytes", n, size)
	}
	c.put(key(9), `"t"`, make([]byte, 3000), s, now)
	if _, ok := c.get(key(9), s, now); ok {
		t.Error("an entry larger than the cache was kept")
	}
	c.put(key(10), "", []byte("x"), s, now)
	if _, ok := c.get(key(10), s, now); ok {
		t.Error("an entry without ETag was kept")
	}
	for i := range 5 {
		c.remove(key(i))
	}
	if n, size := c.len(); n != 0 || size != 0 {
		t.Errorf("after removing all: %d entries, %d bytes", n, size)
	}
}

func TestEtagCacheSweep(t *testing.T) {
	short := etagSettings{timeout: time.Second, cleanup: 10 * time.Second}
	long := etagSettings{timeout: time.Hour, cleanup: time.Hour}
	now := time.Unix(1_700_000_000, 0)
	c := newEtagCache(0, 0)
	for i := range 100 {
		c.put(newEtagKey("http://h", []byte(fmt.Sprint(i))), `"t"`, []byte("b"), short, now)
	}
	c.put(newEtagKey("http://long", nil), `"t"`, []byte("b"), long, now)
	// Expired, but no sweep is due yet: the entries stay until looked up.
	now = now.Add(5 * time.Second)
	c.get(newEtagKey("http://long", nil), long, now)
	if n, _ := c.len(); n != 101 {
		t.Fatalf("%d entries before the cleanup interval", n)
	}
	// The cleanup interval of the short hook has passed: a sweep drops
	// every expired entry at the next access, whichever hook it is for.
	now = now.Add(5 * time.Second)
	if _, ok := c.get(newEtagKey("http://long", nil), long, now); !ok {
		t.Fatal("live entry dropped")
	}
	if n, _ := c.len(); n != 1 {
		t.Errorf("%d entries after the sweep, want 1", n)
	}
}

func TestCallEtagConcurrent(t *testing.T) {
	es := &etagServer{}
	srv := serve(t, es.handler)
	c := NewClient(Options{EtagCacheMaxEntries: 8})
	hook := etagHook(srv.URL, 60)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 20 {
				req := &hooks.CompositeSyncRequest{Parent: newObject("v1", "Thing", "ns", fmt.Sprintf("p-%d", (i+j)%12))}
				var resp hooks.CompositeSyncResponse
				if err := c.Call(context.Background(), "c", "sync", hook, req, &resp, CallOptions{}); err != nil {
					t.Error(err)
					return
				}
				if len(resp.Children) != 1 {
					t.Errorf("response %+v", resp)
					return
				}
			}
		})
	}
	wg.Wait()
	if n, _ := c.etags.len(); n > 8 {
		t.Errorf("%d entries, cap 8", n)
	}
}
