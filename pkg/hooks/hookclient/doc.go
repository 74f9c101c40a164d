/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package hookclient calls hooks: it POSTs a request encoded by
// pkg/hooks to a webhook, reads the answer within memory budgets shared by
// all calls, and decodes it (Client.Call). It owns what happens on the
// wire between the two: the HTTP client and its connection pool, the
// hook's timeout, redirects (never followed), the ETag cache, the limits
// on an answer's size, the trace context of each request and its span,
// the metrics and the Tap of each call, and the errors that tell the
// caller what went wrong. Per-webhook transport settings and credentials
// come from outside, through Options.Transport and Options.PrepareRequest
// (pkg/hooks/credentials implements both). What a call shares with its
// caller's other calls is a parameter of Call, CallOptions: the Hold that
// keeps the decoded part of a sync's answers until the sync ends, and
// whether the call is a retry, as its span says.
//
// # Errors
//
// Call returns one of five error types, so the caller can react to each:
//
//   - *UnreachableError: the hook could not be reached or did not answer
//     in time: refused connection, DNS or TLS failure, the hook's timeout
//     (which bounds the whole call, reading the body included), or a
//     connection closed or reset by the hook before its answer was
//     complete (it crashed, most likely: the message says so, and
//     ClosedByHook tells), or an answer whose body came slower than
//     Options.MinResponseBytesPerSecond after Options.ResponseGrace once
//     it had room in the budget (the message says so; its room is given
//     back). IsUnreachable tells.
//   - *StatusError: the hook answered with a status other than 200 (or
//     than 304 and 412 to a request carrying If-None-Match). It
//     carries the code, the start of the body (at most 1 KiB) and, for a
//     429 with a Retry-After header in seconds or as an HTTP date, the
//     delay asked for (see RetryAfter). A redirect (301, 302, 303, 307,
//     308) is one too: no client follows redirects, and the error names
//     the Location (see StatusError.Location).
//   - *ResponseError: the hook answered 200 with an unusable body: larger
//     than Options.MaxResponseBytes, estimated to take more than
//     Options.DecodedBudgetBytes once decoded, not JSON, with an unknown
//     field in strict mode, a status that is not an object, or an invalid
//     child.
//   - *BudgetError: the hook answered 200, but its answer found no room
//     within the hook's timeout in the budget of all hook answers as read
//     (Options.ResponseBudgetBytes, beside its controller's own
//     Options.ResponseFloorBytes) or decoded (Options.DecodedBudgetBytes);
//     the message names the flags to raise (--hook-response-budget-bytes
//     and --hook-response-floor-bytes, or --hook-decoded-budget-bytes).
//   - a CallError (wrapped) of Options.Transport or Options.PrepareRequest:
//     the hook was not called. With pkg/hooks/credentials it is a
//     *credentials.CredentialError: a credential or trust setting of the
//     webhook cannot be used or is refused by the credential policy; Call
//     gives it the controller and hook (CallError.ForCall). A server
//     certificate that does not verify against the CA bundle is an
//     *UnreachableError wrapping a *tls.CertificateVerificationError.
//
// A misconfigured webhook, a request that cannot be encoded, or a context
// cancelled by the caller give a plain error (the last wraps the context's
// error). Every message names the hook and the webhook's URL, but not the
// controller (the errors carry it in a field): the caller says which
// controller, once. URLs are shown with their user information and query
// values redacted (redact.URL), so no credentials appear.
//
// # Guarantees
//
// Call never retries: the caller decides what to do with a failure (a sync
// error retries the object with backoff and applies nothing; a 429
// requeues it after the delay). A Client is safe for concurrent use and its
// calls share one connection pool: by default the one of
// DefaultHTTPClient, which verifies certificates, requires TLS 1.2 or later
// and keeps many idle connections per host. A response body is never
// buffered beyond the limit (plus one byte to detect it).
//
// Each controller (the controller argument of Call) has its own room for
// answers, Options.ResponseFloorBytes, beside the budget all share, and
// likewise for the objects decoded from them, Options.DecodedFloorBytes:
// its calls use it first, and no other controller's calls can take it,
// so that a hook that stalls, or syncs that hold their answers, cannot
// starve other controllers' small answers.
// An answer's body that stalls holds its room at most
// Options.ResponseGrace plus its bytes at Options.MinResponseBytesPerSecond.
//
// # ETag caching
//
// Only for a webhook with etag.enabled, Call remembers, per webhook URL and
// request body (by hash), the last valid 200 answer that carried an ETag
// header. The next identical request sends If-None-Match with that ETag; a
// 304 Not Modified or a 412 Precondition Failed answer (metacontroller
// reads both as "the ETag still matches") is then decoded from the
// remembered body and is a success, exactly as the 200 was (a 304 or 412
// to a request without If-None-Match is a *StatusError). A request that
// differs in any byte, for example because a child changed, is not
// revalidated. An entry expires etag.cacheTimeoutSeconds (default 60;
// never when below 1) after the 200 that brought it; expired entries are
// dropped when looked up, and all of them at most every
// etag.cacheCleanupSeconds (default 300; a hook with a value below 1 asks
// for no such sweep), without a goroutine. A 200 without ETag, or an
// invalid answer, drops the entry. The cache of a Client holds at most
// Options.EtagCacheMaxEntries answers (default 10,000) and
// Options.EtagCacheMaxBytes (default 32 MiB), the least recently used
// going first (an internal/lru.Cache).
package hookclient
