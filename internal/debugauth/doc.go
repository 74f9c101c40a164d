// Package debugauth guards metactl's debug endpoints (/debug/explain,
// /debug/record on the metrics address) as kube-rbac-proxy and
// controller-runtime's metrics filters guard theirs: the caller's bearer
// token is authenticated by the API server (a TokenReview), and what the
// request would show is authorized for that user (SubjectAccessReviews),
// before the endpoint's handler runs.
//
// Guarantees, for a handler wrapped by Guard.Protect:
//   - A request without a bearer token, or whose token the API server does
//     not authenticate, is answered 401 and never reaches the handler.
//   - A request is answered 403, without reaching the handler, unless the
//     authenticated user is allowed every ResourceAttributes the
//     endpoint's Attributes function names for it.
//   - At most Options.MaxReaders requests are in the guard and the handler
//     at once; another is answered 429 at once, with Retry-After.
//   - A decision (a token's user, a user's access) is kept at most
//     Options.CacheTTL and reused only for the same token, or the same user,
//     groups, extra and attributes; a token is kept only as its SHA-256.
//
// The token comes from the Authorization header, or, as the API server's
// Pod proxy consumes that header (it authenticates the caller itself),
// from TokenHeader, which `metactl explain` and `metactl record fetch`
// set to the same value (ForwardToken).
package debugauth
