package v1alpha1

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Address returns where w is called: its url when set (service and path
// are then ignored, as in metacontroller), else
// protocol://name.namespace:port followed by its path, protocol and port
// defaulting to http and 80: the host is the one metacontroller calls
// (ServiceReference.Host). A service whose name is not a DNS-1035 label,
// whose namespace is not a DNS-1123 label (in either case letters are
// allowed: DNS ignores case, and metacontroller calls them as written), whose protocol is not http or
// https, or a path that does not start with "/", is an error, so that no
// field can move the address to another host. It does not check that a
// url is a valid URL.
func (w *Webhook) Address() (string, error) {
	switch {
	case w.URL != nil:
		return *w.URL, nil
	case w.Service != nil:
		s := w.Service
		if s.Name == "" || s.Namespace == "" {
			return "", errors.New("webhook service needs a name and a namespace")
		}
		if msgs := validation.IsDNS1035Label(strings.ToLower(s.Name)); len(msgs) > 0 {
			return "", errors.New("webhook service name " + strconv.Quote(s.Name) + " is not a DNS-1035 label: " + strings.Join(msgs, "; "))
		}
		if msgs := validation.IsDNS1123Label(strings.ToLower(s.Namespace)); len(msgs) > 0 {
			return "", errors.New("webhook service namespace " + strconv.Quote(s.Namespace) + " is not a DNS-1123 label: " + strings.Join(msgs, "; "))
		}
		protocol := DefaultServiceProtocol
		if s.Protocol != nil {
			protocol = *s.Protocol
		}
		if !strings.EqualFold(protocol, "http") && !strings.EqualFold(protocol, "https") {
			return "", errors.New("webhook service protocol " + strconv.Quote(protocol) + " is neither http nor https")
		}
		port := DefaultServicePort
		if s.Port != nil {
			port = *s.Port
		}
		path := ""
		if w.Path != nil {
			path = *w.Path
		}
		if path != "" && !strings.HasPrefix(path, "/") {
			return "", errors.New("webhook path must start with /")
		}
		// The path is appended as written (a query in it stays a query,
		// as in metacontroller); starting with "/", it cannot change the
		// host.
		u := url.URL{Scheme: strings.ToLower(protocol), Host: net.JoinHostPort(s.Host(), strconv.Itoa(int(port)))}
		return u.String() + path, nil
	default:
		return "", errors.New("webhook sets neither url nor service")
	}
}

// Host returns the host name a hook given as this Service is called at:
// name.namespace, as metacontroller calls it (no ".svc" suffix: the
// cluster's DNS search path resolves it). Address refuses a name or
// namespace that is not a DNS label, which could make it another host.
func (s *ServiceReference) Host() string {
	return s.Name + "." + s.Namespace
}

// hasConnectionSettings reports whether w sets any of caBundle, clientTLS,
// authorization and basicAuth. Such a webhook takes nothing from
// endpointConfigs: its own settings are used in full, not merged.
func (w *Webhook) hasConnectionSettings() bool {
	return w.CABundle != nil || w.ClientTLS != nil || w.Authorization != nil || w.BasicAuth != nil
}

// EndpointConfigFor returns the index of the entry of configs whose
// settings apply to w, or -1 when none does: w sets settings of its own,
// its address does not parse, or no entry's host matches. See
// MatchEndpointConfig.
func EndpointConfigFor(w *Webhook, configs []EndpointConfig) int {
	if w == nil || len(configs) == 0 || w.hasConnectionSettings() {
		return -1
	}
	address, err := w.Address()
	if err != nil {
		return -1
	}
	return MatchEndpointConfig(address, configs)
}

// MatchEndpointConfig returns the index of the first entry of configs
// whose host matches the host of address, or -1. Host names are compared
// ignoring case; a host without a port stands for the default port of the
// address's scheme (80 for http, 443 for https), on either side: entry
// "example.com" matches https://example.com and https://example.com:443
// but not https://example.com:8443, and entry "example.com:443" matches
// https://example.com.
func MatchEndpointConfig(address string, configs []EndpointConfig) int {
	u, err := url.Parse(address)
	if err != nil || u.Host == "" {
		return -1
	}
	defaultPort := map[string]string{"http": "80", "https": "443"}[u.Scheme]
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = defaultPort
	}
	for i := range configs {
		h, p := splitHostPort(configs[i].Host)
		if p == "" {
			p = defaultPort
		}
		if h != "" && strings.EqualFold(h, host) && p == port {
			return i
		}
	}
	return -1
}

// splitHostPort splits "host", "host:port", "[v6]" or "[v6]:port". A
// string that is none of these (an IPv6 address without brackets) is all
// host.
func splitHostPort(s string) (host, port string) {
	if h, p, err := net.SplitHostPort(s); err == nil {
		return h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), ""
}

// IgnoredFields returns the paths of the fields of spec that metactl
// accepts but does not act on, as metacontroller does not either.
func (spec *CompositeControllerSpec) IgnoredFields() []string {
	var paths []string
	if h := spec.Hooks; h != nil {
		if h.PreUpdateChild != nil {
			paths = append(paths, "spec.hooks.preUpdateChild")
		}
		if h.PostUpdateChild != nil {
			paths = append(paths, "spec.hooks.postUpdateChild")
		}
	}
	return paths
}
