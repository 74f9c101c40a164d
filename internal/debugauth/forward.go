package debugauth

import (
	"net/http"
	"strings"
)

// ForwardToken wraps rt so that a request whose Authorization header
// carries a bearer token carries the same value in TokenHeader too, for
// metactl behind the API server's Pod proxy, which consumes the
// Authorization header. Made for rest.Config.Wrap: client-go sets the
// Authorization header (a static token, a token file, an exec plugin's or
// an auth provider's token) before the wrapped transport sees the
// request. A request without a bearer token (a client certificate) is
// sent as it is.
func ForwardToken(rt http.RoundTripper) http.RoundTripper {
	return forwardToken{rt}
}

type forwardToken struct{ next http.RoundTripper }

func (f forwardToken) RoundTrip(req *http.Request) (*http.Response, error) {
	auth := req.Header.Get("Authorization")
	if scheme, _, ok := strings.Cut(auth, " "); !ok || !strings.EqualFold(scheme, "Bearer") || req.Header.Get(TokenHeader) != "" {
		return f.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set(TokenHeader, auth)
	return f.next.RoundTrip(req)
}
