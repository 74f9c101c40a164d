package debugauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/lru"
)

// TokenHeader carries the caller's bearer token ("Bearer TOKEN") through
// the API server's Pod proxy, which consumes the Authorization header.
const TokenHeader = "Metactl-Authorization"

// Defaults of Options.
const (
	DefaultMaxReaders      = 4
	DefaultCacheTTL        = 10 * time.Second
	DefaultMaxCacheEntries = 1024
	// reviewTimeout bounds each TokenReview and SubjectAccessReview.
	reviewTimeout = 10 * time.Second
)

// Options configure a Guard.
type Options struct {
	// Tokens reviews bearer tokens (TokenReviews); Access reviews what a
	// user may do (SubjectAccessReviews). Both required: metactl's own
	// client, which needs create on tokenreviews and subjectaccessreviews.
	Tokens authenticationv1client.TokenReviewInterface
	Access authorizationv1client.SubjectAccessReviewInterface
	// MaxReaders bounds the requests in the guard and its handlers at
	// once, all endpoints together. Default: DefaultMaxReaders (4).
	MaxReaders int
	// CacheTTL is how long a token's review and a user's access decision
	// are reused. Default: DefaultCacheTTL (10 s); negative: not reused.
	CacheTTL time.Duration
	// MaxCacheEntries bounds each of the two caches. Default:
	// DefaultMaxCacheEntries.
	MaxCacheEntries int
}

// Attributes names what a request to an endpoint would show: every one of
// them must be allowed to the caller. An error is answered, to an
// authenticated caller, without reviewing access: with its HTTPStatus()
// when it has one (an interface{ HTTPStatus() int } in its chain), else
// 400.
type Attributes func(r *http.Request) ([]authorizationv1.ResourceAttributes, error)

// Guard authenticates and authorizes requests to debug endpoints. Safe for
// concurrent use.
type Guard struct {
	opts    Options
	readers chan struct{}
	now     func() time.Time

	mu     sync.Mutex
	users  *lru.Cache[[sha256.Size]byte, cachedUser]
	access *lru.Cache[string, cachedDecision]
}

type cachedUser struct {
	user    authenticationv1.UserInfo
	ok      bool
	expires time.Time
}

type cachedDecision struct {
	allowed bool
	reason  string
	expires time.Time
}

// New returns a Guard configured by opts.
func New(opts Options) *Guard {
	if opts.MaxReaders <= 0 {
		opts.MaxReaders = DefaultMaxReaders
	}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	if opts.MaxCacheEntries <= 0 {
		opts.MaxCacheEntries = DefaultMaxCacheEntries
	}
	return &Guard{
		opts:    opts,
		readers: make(chan struct{}, opts.MaxReaders),
		now:     time.Now,
		users:   lru.New(lru.Options[[sha256.Size]byte, cachedUser]{MaxEntries: opts.MaxCacheEntries}),
		access:  lru.New(lru.Options[string, cachedDecision]{MaxEntries: opts.MaxCacheEntries}),
	}
}

// Protect returns h behind g: served only to an authenticated caller
// allowed every attribute attrs names for the request (see the package
// documentation).
func (g *Guard) Protect(h http.Handler, attrs Attributes) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case g.readers <- struct{}{}:
			defer func() { <-g.readers }()
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("metactl: too many readers of its debug endpoints at once (at most %d): try again", cap(g.readers)), http.StatusTooManyRequests)
			return
		}
		ctx := r.Context()
		token := BearerToken(r.Header)
		if token == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metactl"`)
			http.Error(w, "metactl: Unauthorized: send a bearer token the API server authenticates, in the Authorization header (or "+TokenHeader+" through the API server's Pod proxy); metactl explain and record fetch send the kubeconfig's token", http.StatusUnauthorized)
			return
		}
		user, ok, err := g.authenticate(ctx, token)
		switch {
		case err != nil:
			klog.FromContext(ctx).Error(err, "Reviewing the token of a debug request", "path", r.URL.Path)
			http.Error(w, "metactl: could not review the token: "+err.Error(), http.StatusInternalServerError)
			return
		case !ok:
			w.Header().Set("WWW-Authenticate", `Bearer realm="metactl"`)
			http.Error(w, "metactl: Unauthorized: the API server does not authenticate this token", http.StatusUnauthorized)
			return
		}
		list, err := attrs(r)
		if err != nil {
			code := http.StatusBadRequest
			var status interface{ HTTPStatus() int }
			if errors.As(err, &status) && status.HTTPStatus() != 0 {
				code = status.HTTPStatus()
			}
			http.Error(w, err.Error(), code)
			return
		}
		for _, a := range list {
			allowed, reason, err := g.authorize(ctx, user, a)
			if err != nil {
				klog.FromContext(ctx).Error(err, "Reviewing access of a debug request", "path", r.URL.Path, "user", user.Username)
				http.Error(w, "metactl: could not review access: "+err.Error(), http.StatusInternalServerError)
				return
			}
			if !allowed {
				msg := fmt.Sprintf("metactl: Forbidden: user %q may not %s; %s shows only what its caller may read", user.Username, Describe(a), r.URL.Path)
				if reason != "" {
					msg += " (" + reason + ")"
				}
				http.Error(w, msg, http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// BearerToken is the bearer token of header: from Authorization, else
// from TokenHeader; "" for none.
func BearerToken(header http.Header) string {
	for _, name := range []string{"Authorization", TokenHeader} {
		scheme, token, ok := strings.Cut(strings.TrimSpace(header.Get(name)), " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			if token = strings.TrimSpace(token); token != "" {
				return token
			}
		}
	}
	return ""
}

// Describe says what a is, as "list apps/deployments in namespace x".
func Describe(a authorizationv1.ResourceAttributes) string {
	resource := a.Resource
	if a.Group != "" {
		resource = a.Group + "/" + resource
	}
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	s := a.Verb + " " + resource
	if a.Name != "" {
		s += " " + a.Name
	}
	if a.Namespace != "" {
		s += " in namespace " + a.Namespace
	} else {
		s += " in all namespaces"
	}
	return s
}

func (g *Guard) authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error) {
	key := sha256.Sum256([]byte(token))
	now := g.now()
	g.mu.Lock()
	c, found := g.users.Get(key)
	g.mu.Unlock()
	if found && now.Before(c.expires) {
		return c.user, c.ok, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := g.opts.Tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, false, fmt.Errorf("TokenReview: %w", err)
	}
	c = cachedUser{user: review.Status.User, ok: review.Status.Authenticated && review.Status.Error == "", expires: now.Add(g.opts.CacheTTL)}
	if g.opts.CacheTTL > 0 {
		g.mu.Lock()
		g.users.Put(key, c, 1)
		g.mu.Unlock()
	}
	return c.user, c.ok, nil
}

func (g *Guard) authorize(ctx context.Context, user authenticationv1.UserInfo, a authorizationv1.ResourceAttributes) (bool, string, error) {
	key := accessKey(user, a)
	now := g.now()
	g.mu.Lock()
	c, found := g.access.Get(key)
	g.mu.Unlock()
	if found && now.Before(c.expires) {
		return c.allowed, c.reason, nil
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	attrs := a
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := g.opts.Access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &attrs, User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	c = cachedDecision{allowed: review.Status.Allowed && !review.Status.Denied, reason: review.Status.Reason, expires: now.Add(g.opts.CacheTTL)}
	if g.opts.CacheTTL > 0 {
		g.mu.Lock()
		g.access.Put(key, c, 1)
		g.mu.Unlock()
	}
	return c.allowed, c.reason, nil
}

// accessKey keys a decision: the user, UID, groups and extra, and the
// attributes, each part length-prefixed so that no two differ in one
// string.
func accessKey(user authenticationv1.UserInfo, a authorizationv1.ResourceAttributes) string {
	var b strings.Builder
	add := func(s string) { b.WriteString(strconv.Itoa(len(s))); b.WriteByte(':'); b.WriteString(s) }
	add(user.Username)
	add(user.UID)
	groups := slices.Clone(user.Groups)
	slices.Sort(groups)
	add(strconv.Itoa(len(groups)))
	for _, g := range groups {
		add(g)
	}
	keys := make([]string, 0, len(user.Extra))
	for k := range user.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	add(strconv.Itoa(len(keys)))
	for _, k := range keys {
		add(k)
		add(strconv.Itoa(len(user.Extra[k])))
		for _, v := range user.Extra[k] {
			add(v)
		}
	}
	for _, s := range []string{a.Verb, a.Group, a.Version, a.Resource, a.Subresource, a.Namespace, a.Name} {
		add(s)
	}
	return b.String()
}
