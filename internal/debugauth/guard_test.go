package debugauth

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeReviews is a clientset whose TokenReviews authenticate every token
// as user "u" and whose SubjectAccessReviews allow everything, counting
// both.
func fakeReviews(tokens, access *atomic.Int32) *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tokens.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "u"}}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		access.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		sar.Status.Allowed = true
		return true, sar, nil
	})
	return c
}

func everything(*http.Request) ([]authorizationv1.ResourceAttributes, error) {
	return []authorizationv1.ResourceAttributes{{Verb: "get", Resource: "configmaps"}}, nil
}

func serve(h http.Handler, token string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/debug/explain", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	h.ServeHTTP(w, r)
	return w
}

// TestGuardCachesDecisions: a token's review and a user's decision are
// reused within CacheTTL, reviewed again after it, and another token is
// reviewed on its own.
func TestGuardCachesDecisions(t *testing.T) {
	var tokens, access atomic.Int32
	c := fakeReviews(&tokens, &access)
	g := New(Options{Tokens: c.AuthenticationV1().TokenReviews(), Access: c.AuthorizationV1().SubjectAccessReviews()})
	now := time.Unix(1000, 0)
	g.now = func() time.Time { return now }
	h := g.Protect(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), everything)

	for range 3 {
		if w := serve(h, "t1"); w.Code != http.StatusOK {
			t.Fatalf("answer %d %q", w.Code, w.Body)
		}
	}
	if tokens.Load() != 1 || access.Load() != 1 {
		t.Errorf("3 requests within the TTL: %d TokenReviews, %d SubjectAccessReviews; want 1 and 1", tokens.Load(), access.Load())
	}
	serve(h, "t2")
	if tokens.Load() != 2 || access.Load() != 1 {
		t.Errorf("another token of the same user: %d TokenReviews, %d SubjectAccessReviews; want 2 and 1", tokens.Load(), access.Load())
	}
	now = now.Add(DefaultCacheTTL)
	serve(h, "t1")
	if tokens.Load() != 3 || access.Load() != 2 {
		t.Errorf("after the TTL: %d TokenReviews, %d SubjectAccessReviews; want 3 and 2", tokens.Load(), access.Load())
	}
}

// TestGuardBoundsReaders: with MaxReaders requests in the handler, another
// is answered 429 with Retry-After at once, and served once one is done.
func TestGuardBoundsReaders(t *testing.T) {
	var tokens, access atomic.Int32
	c := fakeReviews(&tokens, &access)
	g := New(Options{Tokens: c.AuthenticationV1().TokenReviews(), Access: c.AuthorizationV1().SubjectAccessReviews(), MaxReaders: 2})
	in, release := make(chan struct{}), make(chan struct{})
	h := g.Protect(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		in <- struct{}{}
		<-release
	}), everything)
	done := make(chan int, 2)
	for range 2 {
		go func() { done <- serve(h, "t").Code }()
		<-in
	}
	w := serve(h, "t")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Errorf("a third reader while two read: %d, Retry-After %q; want 429 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	release <- struct{}{}
	if code := <-done; code != http.StatusOK {
		t.Errorf("a reader: %d", code)
	}
	go func() { done <- serve(h, "t").Code }()
	<-in
	close(release)
	for range 2 {
		if code := <-done; code != http.StatusOK {
			t.Errorf("a reader: %d", code)
		}
	}
}

// TestBearerToken: from Authorization, else from TokenHeader; other
// schemes and empty tokens are none.
func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		header map[string]string
		want   string
	}{
		{map[string]string{"Authorization": "Bearer abc"}, "abc"},
		{map[string]string{"Authorization": "bearer  abc "}, "abc"},
		{map[string]string{TokenHeader: "Bearer def"}, "def"},
		{map[string]string{"Authorization": "Basic abc", TokenHeader: "Bearer def"}, "def"},
		{map[string]string{"Authorization": "Bearer "}, ""},
		{map[string]string{"Authorization": "Basic abc"}, ""},
		{nil, ""},
	} {
		h := http.Header{}
		for k, v := range tc.header {
			h.Set(k, v)
		}
		if got := BearerToken(h); got != tc.want {
			t.Errorf("BearerToken(%v) = %q, want %q", tc.header, got, tc.want)
		}
	}
}

// TestForwardToken: a bearer Authorization header is copied to
// TokenHeader; a request without one is sent as it is.
func TestForwardToken(t *testing.T) {
	var got http.Header
	rt := ForwardToken(roundTripper(func(r *http.Request) (*http.Response, error) {
		got = r.Header
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	}))
	for auth, want := range map[string]string{"Bearer abc": "Bearer abc", "Basic xyz": "", "": ""} {
		r := httptest.NewRequest(http.MethodGet, "http://x/", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		if _, err := rt.RoundTrip(r); err != nil {
			t.Fatal(err)
		}
		if got.Get(TokenHeader) != want {
			t.Errorf("Authorization %q: %s %q, want %q", auth, TokenHeader, got.Get(TokenHeader), want)
		}
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
