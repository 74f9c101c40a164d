package manager

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"

	clientdiscovery "k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/metactl/metactl/internal/metrics"
	"github.com/metactl/metactl/internal/rbac"
	"github.com/metactl/metactl/internal/throttle"
	"github.com/metactl/metactl/pkg/dynamic/children"
	"github.com/metactl/metactl/pkg/dynamic/objectclient"
)

// clients are the API server's clients the manager builds. They share one
// HTTP client, one cap on the requests in flight that the API server's 429
// answers set (internal/throttle) and, when Options.Config's QPS is
// positive, one rate limiter, so that these bound every request metactl
// makes; metrics.InstrumentTransport counts each request.
type clients struct {
	// httpClient is shared by every client.
	httpClient *http.Client
	client     dynamic.Interface
	// objects lists and watches objects for the cache and writes them, as
	// informer.Objects.
	objects   *objectclient.Client
	discovery *clientdiscovery.DiscoveryClient
	// metadata reads objects' metadata only (the CRDs, see
	// refreshDiscoveryOnCRDChanges).
	metadata metadata.Interface
	// The typed clients metactl needs, and no others: a full clientset
	// would link every API group's client code into the binary.
	core          typedcorev1.CoreV1Interface
	coordination  coordinationv1client.CoordinationV1Interface
	authorization authorizationv1client.AuthorizationV1Interface
	// config is the copy of Options.Config the clients are built from,
	// with the shared rate limiter.
	config *rest.Config
}

// newClients builds the clients from a copy of config.
func newClients(config *rest.Config) (clients, error) {
	config = rest.CopyConfig(config)
	config.UserAgent = userAgent(config.UserAgent)
	config.Wrap(metrics.InstrumentTransport)
	// Outermost, so that a request held over the cap is not yet counted
	// as sent.
	config.Wrap(throttle.New(throttle.Options{InFlight: metrics.APIInFlight, Cap: metrics.APIInFlightCap}).RoundTripper)
	switch {
	case config.RateLimiter != nil:
		// A rate limiter given is every client's, as it is.
	case config.QPS > 0:
		// One budget for every client built below: each would otherwise
		// get a token bucket of its own.
		config.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(config.QPS, config.Burst)
	default:
		// No client-side rate: the server's answers set the pace.
		// (client-go reads a QPS of 0 as its default of 5.)
		config.QPS = -1
	}
	var (
		c   clients
		err error
	)
	c.config = config
	if c.httpClient, err = rest.HTTPClientFor(config); err != nil {
		return c, fmt.Errorf("building the API server's HTTP client: %w", err)
	}
	if c.client, err = dynamic.NewForConfigAndClient(config, c.httpClient); err != nil {
		return c, fmt.Errorf("building the dynamic client: %w", err)
	}
	if c.objects, err = objectclient.New(config, c.httpClient); err != nil {
		return c, err
	}
	if c.discovery, err = clientdiscovery.NewDiscoveryClientForConfigAndClient(config, c.httpClient); err != nil {
		return c, fmt.Errorf("building the discovery client: %w", err)
	}
	if c.metadata, err = metadata.NewForConfigAndClient(config, c.httpClient); err != nil {
		return c, fmt.Errorf("building the metadata client: %w", err)
	}
	if c.core, err = typedcorev1.NewForConfigAndClient(config, c.httpClient); err != nil {
		return c, fmt.Errorf("building the core/v1 client: %w", err)
	}
	if c.coordination, err = coordinationv1client.NewForConfigAndClient(config, c.httpClient); err != nil {
		return c, fmt.Errorf("building the coordination/v1 client: %w", err)
	}
	if c.authorization, err = authorizationv1client.NewForConfigAndClient(config, c.httpClient); err != nil {
		return c, fmt.Errorf("building the authorization/v1 client: %w", err)
	}
	return c, nil
}

// accountClients are the clients of the controllers that act as one
// ServiceAccount: they make the controllers' writes, and their uncached
// reads, impersonating it.
type accountClients struct {
	client  dynamic.Interface
	objects *objectclient.Client
	// refs counts the controllers built with these clients.
	refs int
}

// newAccountClients builds clients that impersonate sa. They share the
// manager's HTTP client's transport (its connections, authentication and
// metrics), with the impersonation headers added on top, and its rate
// limiter: one budget for every request metactl makes.
func (c clients) newAccountClients(sa rbac.ServiceAccount) (*accountClients, error) {
	// The account's user name; the API server adds its groups. Any
	// impersonation of Options.Config is replaced, not chained: the API
	// server does not chain them.
	impersonating := &http.Client{
		Transport: transport.NewImpersonatingRoundTripper(transport.ImpersonationConfig{UserName: sa.UserName()}, c.httpClient.Transport),
		Timeout:   c.httpClient.Timeout,
	}
	a := &accountClients{}
	var err error
	if a.client, err = dynamic.NewForConfigAndClient(c.config, impersonating); err != nil {
		return nil, fmt.Errorf("building the dynamic client of ServiceAccount %s: %w", sa, err)
	}
	if a.objects, err = objectclient.New(c.config, impersonating); err != nil {
		return nil, fmt.Errorf("ServiceAccount %s: %w", sa, err)
	}
	return a, nil
}

// acquireAccount returns the clients of sa, built on first use, and the
// function that releases them; the last release forgets them.
func (m *Manager) acquireAccount(sa rbac.ServiceAccount) (*accountClients, func(), error) {
	m.accountsMu.Lock()
	defer m.accountsMu.Unlock()
	a := m.accounts[sa]
	if a == nil {
		var err error
		if a, err = m.newAccountClients(sa); err != nil {
			return nil, nil, err
		}
		m.accounts[sa] = a
	}
	a.refs++
	var once sync.Once
	return a, func() {
		once.Do(func() {
			m.accountsMu.Lock()
			defer m.accountsMu.Unlock()
			if a.refs--; a.refs == 0 && m.accounts[sa] == a {
				delete(m.accounts, sa)
			}
		})
	}, nil
}

// userAgent is the User-Agent of every request of the manager: ua when
// it starts with children.ClientSideManager and "/" (metactl run's
// "metactl/<version> (run)"), else that prefix before ua (the Go module's
// version when ua is empty, as metactl dev's control plane gives it). The
// API server names the field manager of a write that names none after
// the part before the first "/": so metactl's client-side writes of
// children are children.ClientSideManager's in every binary, which
// switching a controller to server-side apply hands over
// (children.Writer's switchOwnership), never "Go-http-client" or the
// binary's name.
func userAgent(ua string) string {
	prefix := children.ClientSideManager + "/"
	switch {
	case strings.HasPrefix(ua, prefix):
		return ua
	case ua != "":
		return prefix + ua
	}
	version := "(devel)"
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		version = info.Main.Version
	}
	return prefix + version
}
