package v1alpha1

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Address returns where w is called: its url when set (service and path
// are then ignored, as in metacontroller), else
// protocol://name.namespace:port followed by its path, protocol and port
// defaulting to http and 80. It does not check that the address is a valid
// URL.
func (w *Webhook) Address() (string, error) {
	switch {
	case w.URL != nil:
		return *w.URL, nil
	case w.Service != nil:
		s := w.Service
		if s.Name == "" || s.Namespace == "" {
			return "", errors.New("webhook service needs a name and a namespace")
		}
		protocol := DefaultServiceProtocol
		if s.Protocol != nil {
			protocol = *s.Protocol
		}
		port := DefaultServicePort
		if s.Port != nil {
			port = *s.Port
		}
		path := ""
		if w.Path != nil {
			path = *w.Path
		}
		return protocol + "://" + s.Name + "." + s.Namespace + ":" + strconv.Itoa(int(port)) + path, nil
	default:
		return "", errors.New("webhook sets neither url nor service")
	}
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
