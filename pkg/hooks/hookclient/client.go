/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hookclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/klog/v2"

	"github.com/metactl/metactl/internal/redact"
	"github.com/metactl/metactl/pkg/apis/metacontroller/v1alpha1"
	"github.com/metactl/metactl/pkg/hooks"
)

// DefaultMaxResponseBytes is the default limit on the size of a hook's
// response body.
const DefaultMaxResponseBytes int64 = 16 << 20

// Observer is told about every hook call that was sent.
type Observer interface {
	// ObserveHookCall reports one call: the controller's name, the hook
	// ("sync", "finalize", "customize"), the HTTP status code (0 when no
	// response arrived) and how long the call took, reading the body
	// included but not the time waited for room in the budget of hook
	// answers.
	ObserveHookCall(controller, hook string, code int, d time.Duration)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(controller, hook string, code int, d time.Duration)

// ObserveHookCall calls f.
func (f ObserverFunc) ObserveHookCall(controller, hook string, code int, d time.Duration) {
	f(controller, hook, code, d)
}

// TransportResolver chooses the HTTP client that calls a hook. It is the
// place for per-webhook transport settings (CA bundle, client
// certificate). It must be safe for concurrent use. The client it returns
// is used without following redirects, whatever its CheckRedirect, as
// every client of a Client is (see Client.Call).
type TransportResolver interface {
	// TransportFor returns the client for hook; nil means the default.
	TransportFor(hook *v1alpha1.Hook) (*http.Client, error)
}

// ContextTransportResolver is a TransportResolver that reads what it needs
// (Secrets, ConfigMaps) within a context. Call uses TransportForContext,
// with the call's context (bounded by the hook's timeout), when its
// TransportResolver implements it.
type ContextTransportResolver interface {
	TransportResolver
	TransportForContext(ctx context.Context, hook *v1alpha1.Hook) (*http.Client, error)
}

// TransportFunc adapts a function to TransportResolver.
type TransportFunc func(hook *v1alpha1.Hook) (*http.Client, error)

// TransportFor calls f.
func (f TransportFunc) TransportFor(hook *v1alpha1.Hook) (*http.Client, error) { return f(hook) }

// RequestPreparer adjusts a hook request before it is sent, typically its
// headers (credentials, cache validators). The request's body is set, and
// can be read again through req.GetBody. It must be safe for concurrent use.
type RequestPreparer interface {
	PrepareRequest(hook *v1alpha1.Hook, req *http.Request) error
}

// RequestPreparerFunc adapts a function to RequestPreparer.
type RequestPreparerFunc func(hook *v1alpha1.Hook, req *http.Request) error

// PrepareRequest calls f.
func (f RequestPreparerFunc) PrepareRequest(hook *v1alpha1.Hook, req *http.Request) error {
	return f(hook, req)
}

// Options configure a Client. The zero value is ready to use.
type Options struct {
	// HTTPClient calls the hooks. Default: DefaultHTTPClient(). It is used
	// without following redirects, whatever its CheckRedirect (a copy of
	// it is).
	HTTPClient *http.Client
	// Transport, when set, chooses the client per hook instead; a nil
	// client from it falls back to HTTPClient or its default.
	Transport TransportResolver
	// PrepareRequest, when set, adjusts every request before it is sent.
	PrepareRequest RequestPreparer
	// MaxResponseBytes limits the size of a response body. Default:
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// ResponseBudgetBytes bounds the bytes of answers all calls hold at
	// once beyond their controllers' floors (ResponseFloorBytes), from the
	// first read of a body until its answer is decoded (see Call). Answers
	// over 64 KiB use at most seven eighths of it; a larger one than that
	// is refused as too large. Default: DefaultResponseBudgetBytes.
	ResponseBudgetBytes int64
	// ResponseFloorBytes is each controller's own room for answers,
	// beside ResponseBudgetBytes: its calls use it first, and no other
	// controller's calls can take it, so that a controller's answers of up
	// to this size are read whatever other controllers' hooks hold. Floors
	// count only while used: all calls together hold at most
	// ResponseBudgetBytes plus this per controller reading an answer.
	// Default: DefaultResponseFloorBytes.
	ResponseFloorBytes int64
	// MinResponseBytesPerSecond and ResponseGrace bound how long an answer's
	// body may hold its room: once it has room in the budget, the whole
	// body must be read within ResponseGrace plus its reserved bytes at
	// MinResponseBytesPerSecond (the time it waits for more room not
	// counted), else the call fails as the hook's (an *UnreachableError)
	// and gives its room back, whatever the hook's timeout. Defaults:
	// DefaultMinResponseBytesPerSecond (1 MiB/s) and DefaultResponseGrace
	// (5s): a 16 MiB answer may take 21s, a 27-byte one 5s.
	MinResponseBytesPerSecond int64
	ResponseGrace             time.Duration
	// DecodedBudgetBytes bounds the memory the objects decoded from
	// answers take at once, all calls together, as estimated from each
	// answer's JSON before it is decoded: from decoding until Call
	// returns, or, with a Hold (CallOptions), until the caller is done with them.
	// An answer whose estimate is larger is refused. Default:
	// DefaultDecodedBudgetBytes.
	DecodedBudgetBytes int64
	// DecodedFloorBytes is each controller's own room for the objects
	// decoded from its answers, beside DecodedBudgetBytes, used first and
	// taken by no other controller (see ResponseFloorBytes). Default:
	// DefaultDecodedFloorBytes.
	DecodedFloorBytes int64
	// Metrics, when set, observes every call.
	Metrics Observer
	// EtagCacheMaxEntries caps the number of responses cached for hooks
	// with etag enabled. Default: DefaultEtagCacheMaxEntries.
	EtagCacheMaxEntries int
	// EtagCacheMaxBytes caps their total size. Default:
	// DefaultEtagCacheMaxBytes.
	EtagCacheMaxBytes int64
	// Tap, when set, is given the calls it records, with their request
	// and answer bodies (see Tap). Default nil: nothing is recorded.
	Tap Tap
	// Tracer, when set, records a span of every call, a child of the
	// span of the call's context (docs/tracing.md). Default nil: no span;
	// the request still carries the context's trace (see Call).
	Tracer trace.Tracer
	// Replica, when set, is sent as the ReplicaHeader of every request:
	// the identity of the calling process, so that a hook can tell
	// replicas apart (docs/hooks.md). Default "": no such header.
	Replica string
	// Dial, when set, says which addresses hooks may be called at, checked
	// as each connection is dialed, by the transports NewTransport builds
	// (the default HTTPClient's, and those of Transport when built with
	// it). Default nil: every address is allowed. metactl run sets it
	// (--allow-loopback-hooks, --allow-link-local-hooks), refusing
	// link-local, cloud metadata and loopback addresses by default.
	// Clients that share an HTTP client should share the rule too: a
	// connection one dialed may be kept and serve the other's call.
	Dial *DialRule
}

// ReplicaHeader is the request header that carries Options.Replica, the
// calling replica's identity (no X- prefix: RFC 6648).
const ReplicaHeader = "Metactl-Replica"

// Client calls hooks. It is safe for concurrent use; its calls share the
// connection pool of the underlying HTTP client.
type Client struct {
	httpClient *http.Client
	transport  TransportResolver
	prepare    RequestPreparer
	maxBody    int64
	metrics    Observer
	tap        Tap
	tracer     trace.Tracer
	replica    string
	dial       *DialRule
	etags      *etagCache
	budget     *responseBudget
	decoded    *decodedBudget
	minRate    int64
	grace      time.Duration
	now        func() time.Time
}

// NewClient returns a Client configured by opts.
func NewClient(opts Options) *Client {
	c := &Client{
		httpClient: opts.HTTPClient,
		transport:  opts.Transport,
		prepare:    opts.PrepareRequest,
		maxBody:    opts.MaxResponseBytes,
		metrics:    opts.Metrics,
		tap:        opts.Tap,
		tracer:     opts.Tracer,
		replica:    opts.Replica,
		dial:       opts.Dial,
		etags:      newEtagCache(opts.EtagCacheMaxEntries, opts.EtagCacheMaxBytes),
		now:        time.Now,
	}
	if c.httpClient == nil {
		c.httpClient = DefaultHTTPClient() // shared; refuses redirects
	} else {
		c.httpClient = withoutRedirects(c.httpClient)
	}
	if c.maxBody <= 0 {
		c.maxBody = DefaultMaxResponseBytes
	}
	budget := opts.ResponseBudgetBytes
	if budget <= 0 {
		budget = DefaultResponseBudgetBytes
	}
	floor := opts.ResponseFloorBytes
	if floor <= 0 {
		floor = DefaultResponseFloorBytes
	}
	c.budget = newResponseBudget(budget, c.maxBody, floor)
	c.minRate = opts.MinResponseBytesPerSecond
	if c.minRate <= 0 {
		c.minRate = DefaultMinResponseBytesPerSecond
	}
	c.grace = opts.ResponseGrace
	if c.grace <= 0 {
		c.grace = DefaultResponseGrace
	}
	decoded := opts.DecodedBudgetBytes
	if decoded <= 0 {
		decoded = DefaultDecodedBudgetBytes
	}
	decodedFloor := opts.DecodedFloorBytes
	if decodedFloor <= 0 {
		decodedFloor = DefaultDecodedFloorBytes
	}
	c.decoded = newDecodedBudget(decoded, decodedFloor)
	return c
}

// ResponseBytesInFlight returns the bytes of hook answers held now, all
// calls together, controllers' floors included (at most
// Options.ResponseBudgetBytes plus Options.ResponseFloorBytes per
// controller reading an answer); for metrics.
func (c *Client) ResponseBytesInFlight() int64 { return c.budget.inFlight() }

// ResponseBytesShared returns the bytes of hook answers held now in the
// shared part of the budget (at most Options.ResponseBudgetBytes); for
// metrics.
func (c *Client) ResponseBytesShared() int64 { return c.budget.inShared() }

// DecodedBytesInUse returns the estimated memory of the decoded answers in
// use now, all calls together, floors included (at most
// Options.DecodedBudgetBytes plus Options.DecodedFloorBytes per controller
// using one); for metrics.
func (c *Client) DecodedBytesInUse() int64 { return c.decoded.inUse() }

var sharedHTTPClient = sync.OnceValue(func() *http.Client { return NewHTTPClient(NewTransport()) })

// NewHTTPClient returns an HTTP client that calls hooks through rt and
// follows no redirect (see Call).
func NewHTTPClient(rt http.RoundTripper) *http.Client {
	return &http.Client{Transport: rt, CheckRedirect: refuseRedirects}
}

// DefaultHTTPClient returns the HTTP client that Clients share by default.
// It has no overall timeout: each call is bounded by its hook's timeout.
// It does not follow redirects.
func DefaultHTTPClient() *http.Client {
	return sharedHTTPClient()
}

// NewTransport returns a transport with the settings metactl uses for
// hooks: certificates verified, TLS 1.2 or later, HTTP/1.1 only, proxies
// from the environment, and a connection pool sized for many concurrent
// calls to one hook. Build per-webhook transports from it.
//
// HTTP/2 is not used, even when the server offers it: its transport reads
// an answer into its own buffers, before Call reserves its bytes from the
// budget (Options.ResponseBudgetBytes), as far as the flow-control
// windows let the server send (by default 4 MiB per call), so that calls
// waiting for room would hold answers outside the budget; and with
// windows small enough to bound that, the answers waiting for room fill
// the connection's shared window and starve the calls that hold room
// (measured: those calls then time out). Over HTTP/1.1 each call has its
// own connection, read only as fast as Call reads it.
//
// Every connection it dials is checked against the DialRule of the call
// that dials it (Options.Dial), after DNS; a dial outside a Client's call,
// or of a Client without one, is not checked.
func NewTransport() *http.Transport {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, ControlContext: controlDial}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		Protocols:             protocols,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}
}

// Call POSTs request as JSON to the webhook of hook and decodes the answer
// into response (a nil response discards a successful answer).
//
// controller (the controller's name) and hookName ("sync", "finalize" or
// "customize") name the call in errors and metrics. The hook's timeout
// (default 10s) bounds the whole call, reading the response included. The
// response is decoded in the hook's responseUnMarshallMode, which defaults
// to loose for v1 hooks and strict for v2.
//
// With etag enabled on the webhook, a request equal to one answered
// before with an ETag carries If-None-Match, and a 304 Not Modified or 412
// Precondition Failed answer is decoded from the cached body, as a 200
// would be; the metrics count either as code 304.
//
// A response body is read into memory against the Client's budget: the
// room of the calling controller (Options.ResponseFloorBytes), which its
// calls use first and no other controller's can take, then the room all
// calls share (Options.ResponseBudgetBytes). The call reserves the body's
// bytes before reading them (all of a Content-Length at once) and holds
// them until the answer is decoded; once it has room, the body must come
// within Options.ResponseGrace plus its bytes at
// Options.MinResponseBytesPerSecond, else the call fails (an
// *UnreachableError) and gives its room back. It waits for room,
// at most until the hook's timeout; an answer larger than
// Options.MaxResponseBytes, or than seven eighths of the budget (the last
// eighth is kept for answers of 64 KiB or less), is refused. Before
// decoding it, the call also takes the answer's estimated decoded size
// from the decoded budget (Options.DecodedBudgetBytes), waiting for room
// likewise, and gives it back as it returns; with opts.Hold, when the
// next call with the same Hold begins or the Hold is released. An
// answer whose estimate exceeds that budget is refused undecoded.
//
// Call never follows a redirect: a 3xx answer is a *StatusError naming
// its Location, and the request (body and credentials) goes nowhere else.
//
// Call never retries. Its errors are an *UnreachableError, a *StatusError,
// a *ResponseError or a *BudgetError as described in the package
// documentation, or, wrapped, the CallError of Options.Transport or
// Options.PrepareRequest (a *credentials.CredentialError when a credential
// of the hook cannot be used); a misconfigured hook, a request that cannot be encoded or a ctx cancelled
// by the caller give a plain error.
//
// A call that Options.Tap records is given to it as Call returns, once its
// request was sent, with its request and answer bodies and its error.
//
// Every request carries a W3C traceparent header (and tracestate, when
// the trace has one): with Options.Tracer, that of the call's own span,
// a child of ctx's; without, ctx's span context, or fresh ids when ctx
// has none.
//
// opts carry what the call shares with its caller's other calls: the Hold
// of its answer's decoded part, and whether its span marks it as a retry.
func (c *Client) Call(ctx context.Context, controller, hookName string, hook *v1alpha1.Hook, request any, response hooks.Response, opts CallOptions) (err error) {
	cs := &callState{hookCall: hookCall{Controller: controller, Hook: hookName, URL: "(no URL)"},
		ctx: ctx, hook: hook, request: request, response: response}
	cs.tap = c.startTap(ctx, controller, hookName)
	if cs.tap != nil {
		defer func() { cs.tap.done(cs.ctx, c.tap, err) }()
	}
	if err := cs.address(); err != nil {
		return err
	}
	// The answer the previous call with this Hold kept is no longer used:
	// give back its part of the decoded budget before this call may wait
	// for room.
	cs.hold = opts.Hold
	cs.hold.release()
	cs.timeout = hooks.Timeout(hook.Webhook)
	callCtx, cancel := context.WithTimeout(withDialRule(ctx, c.dial), cs.timeout)
	defer cancel()
	cs.callCtx = callCtx
	// The request's context: callCtx, or cancelled sooner when the
	// answer's body misses its deadline (pace).
	reqCtx, cancelReq := context.WithCancelCause(callCtx)
	defer cancelReq(nil)
	cs.reqCtx, cs.pace = reqCtx, &pace{rate: c.minRate, grace: c.grace, cancel: cancelReq}
	if err := cs.newRequest(); err != nil {
		return err
	}
	cs.ctx, cs.span = c.startSpan(ctx, controller, hookName, cs.URL, opts.Retry)
	defer func() { cs.span.end(err) }()
	if err := cs.checkURL(); err != nil {
		return err
	}
	httpClient, err := c.clientFor(callCtx, hook)
	if err != nil {
		return setupError(cs.hookCall, "choosing the HTTP client", err)
	}
	body, err := hooks.EncodeRequest(request)
	defer body.Release()
	if err != nil {
		return fmt.Errorf("%s: encoding the request: %w", cs.prefix(), err)
	}
	if err := c.writeRequest(cs, body); err != nil {
		return err
	}
	c.lookUpETag(cs, body.Bytes())
	resp, err := c.send(cs, httpClient, body.Bytes())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case cs.etag.cached != nil && (resp.StatusCode == http.StatusNotModified || resp.StatusCode == http.StatusPreconditionFailed):
		return c.revalidated(cs, resp)
	case resp.StatusCode != http.StatusOK:
		return c.statusError(cs, resp)
	}
	return c.answered(cs, resp)
}

// callState is one call as the steps of Call share it.
type callState struct {
	hookCall
	// ctx is the caller's context, then, once the span starts, the
	// span's (startSpan); callCtx is ctx bounded by the hook's timeout;
	// reqCtx, the request's, is callCtx cut short by pace.
	ctx, callCtx, reqCtx context.Context
	pace                 *pace
	timeout              time.Duration
	hook                 *v1alpha1.Hook
	rawURL               string
	req                  *http.Request
	request              any
	response             hooks.Response
	hold                 *Hold
	tap                  *tapping
	span                 *callSpan
	etag                 etagLookup
	// start is when the request was sent.
	start time.Time
}

// etagLookup is what a call with etag found in the cache.
type etagLookup struct {
	// on is true when the webhook has etag enabled.
	on   bool
	opts etagSettings
	key  etagKey
	// cached is the answer remembered for the request, sent as
	// If-None-Match; nil when none.
	cached *etagEntry
}

// address sets cs.rawURL, the webhook's address, or returns the error of
// a hook without a webhook or without a valid address.
func (cs *callState) address() error {
	if cs.hook == nil || cs.hook.Webhook == nil {
		return fmt.Errorf("%s: no webhook configured", cs.prefix())
	}
	rawURL, err := cs.hook.Webhook.Address()
	if err != nil {
		return fmt.Errorf("%s: %w", cs.prefix(), err)
	}
	cs.rawURL = rawURL
	return nil
}

// newRequest makes the POST of the call, bounded by callCtx, and sets
// cs.URL, the URL for messages, redacted.
func (cs *callState) newRequest() error {
	req, err := http.NewRequestWithContext(cs.reqCtx, http.MethodPost, cs.rawURL, nil)
	if err != nil {
		// The error of a URL that does not parse repeats the URL, which
		// may hold credentials.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		cs.URL = "(invalid URL)"
		return fmt.Errorf("%s: invalid webhook URL: %w", cs.prefix(), err)
	}
	cs.req = req
	cs.URL = redactURL(req.URL)
	return nil
}

// checkURL refuses a URL that is not an absolute http or https URL.
func (cs *callState) checkURL() error {
	if u := cs.req.URL; (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: invalid webhook URL: want an absolute http or https URL", cs.prefix())
	}
	return nil
}

// writeRequest gives the request its body, the encoded request (logged at
// V(6)), and its headers: content type, user agent, the replica (when
// Options.Replica is set), the trace context, and what
// Options.PrepareRequest adds.
func (c *Client) writeRequest(cs *callState, body *hooks.EncodedRequest) error {
	if logger := klog.FromContext(cs.ctx).V(6); logger.Enabled() {
		logger.Info("Hook request", "controller", cs.Controller, "hook", cs.Hook, "url", cs.URL, "body", redact.JSON(body.Bytes()))
	}
	req := cs.req
	req.ContentLength = int64(len(body.Bytes()))
	req.Body = body.NewReader()
	req.GetBody = func() (io.ReadCloser, error) { return body.NewReader(), nil }
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "metactl")
	if c.replica != "" {
		req.Header.Set(ReplicaHeader, c.replica)
	}
	injectTrace(cs.ctx, req.Header)
	if c.prepare != nil {
		if err := c.prepare.PrepareRequest(cs.hook, req); err != nil {
			req.Body.Close()
			return setupError(cs.hookCall, "preparing the request", err)
		}
	}
	return nil
}

// lookUpETag looks, for a webhook with etag enabled, for the answer
// remembered for this request body, and sends its ETag as If-None-Match.
func (c *Client) lookUpETag(cs *callState, body []byte) {
	cs.etag.opts, cs.etag.on = etagConfig(cs.hook.Webhook)
	if !cs.etag.on {
		return
	}
	cs.etag.key = newEtagKey(cs.rawURL, body)
	if e, ok := c.etags.get(cs.etag.key, cs.etag.opts, c.now()); ok {
		cs.etag.cached = e
		cs.req.Header.Set("If-None-Match", e.etag)
	}
}

// send sends the request, telling the tap and the span, and returns the
// answer; when none comes, it reports the call to the metrics and returns
// its error (see transportError).
func (c *Client) send(cs *callState, httpClient *http.Client, body []byte) (*http.Response, error) {
	cs.tap.request(body)
	cs.span.request(len(body))
	cs.start = time.Now()
	resp, err := httpClient.Do(cs.req)
	if err != nil {
		c.observe(cs.Controller, cs.Hook, 0, time.Since(cs.start))
		cs.tap.answered(0, time.Since(cs.start))
		return nil, transportError(cs.ctx, cs.callCtx, cs.hookCall, cs.timeout, phaseResponse, err)
	}
	cs.span.answered(resp.StatusCode)
	return resp, nil
}

// revalidated takes a 304 or 412 to a request with If-None-Match: the
// cached answer is still the hook's answer to this request, and is
// decoded as the 200 that brought it was.
func (c *Client) revalidated(cs *callState, resp *http.Response) error {
	// If-None-Match failing (412) says so as well as 304 does, so the
	// metrics count both as a revalidation, code 304.
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	c.observe(cs.Controller, cs.Hook, http.StatusNotModified, time.Since(cs.start))
	cs.tap.answered(resp.StatusCode, time.Since(cs.start))
	cs.tap.body(cs.etag.cached.body)
	if cs.response == nil {
		return nil
	}
	return c.decodeAnswer(cs, cs.etag.cached.body)
}

// statusError returns the *StatusError of an answer that is neither a 200
// nor a revalidation.
func (c *Client) statusError(cs *callState, resp *http.Response) error {
	body := readErrorBody(resp.Body, cs.request, cs.req)
	c.observe(cs.Controller, cs.Hook, resp.StatusCode, time.Since(cs.start))
	cs.tap.answered(resp.StatusCode, time.Since(cs.start))
	se := &StatusError{Controller: cs.Controller, Hook: cs.Hook, URL: cs.URL, Code: resp.StatusCode, Body: body}
	if resp.StatusCode == http.StatusTooManyRequests {
		se.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), c.now())
	}
	se.Location = redirectLocation(resp)
	return se
}

// answered reads a 200's body within the response budget, decodes it and,
// with etag, caches it.
func (c *Client) answered(cs *callState, resp *http.Response) error {
	buf := getBuffer()
	defer putBuffer(buf)
	// Released once the answer is decoded and, with etag, cached (a copy,
	// which the ETag cache's own limit bounds).
	budget := reservation{b: c.budget, controller: cs.Controller}
	defer budget.release()
	if err := c.receive(cs, resp, buf, &budget); err != nil {
		return err
	}
	// What the answer holds is its buffer, which readBody kept within
	// the reservation.
	budget.shrinkTo(int64(buf.Cap()))
	cs.tap.body(buf.Bytes())
	cs.span.body(buf.Len())
	if logger := klog.FromContext(cs.ctx).V(6); logger.Enabled() {
		logger.Info("Hook response", "controller", cs.Controller, "hook", cs.Hook, "url", cs.URL, "body", redact.JSON(buf.Bytes()))
	}
	if cs.response != nil {
		if err := c.decodeAnswer(cs, buf.Bytes()); err != nil {
			return err
		}
	}
	if cs.etag.on {
		// Only a valid answer is cached; an answer without an ETag makes
		// the one cached before obsolete.
		if tag := resp.Header.Get("ETag"); tag != "" {
			c.etags.put(cs.etag.key, tag, bytes.Clone(buf.Bytes()), cs.etag.opts, c.now())
		} else if cs.etag.cached != nil {
			c.etags.remove(cs.etag.key)
		}
	}
	return nil
}

// receive reads the body of resp into buf within the reservation (see
// readBody) and reports the call to the metrics and the tap, without the
// time waited for room. Its error is a *ResponseError for an answer too
// large, a *BudgetError for one that found no room in time, or what
// transportError makes of a failed read.
func (c *Client) receive(cs *callState, resp *http.Response, buf *bytes.Buffer, budget *reservation) error {
	err := c.readBody(cs.callCtx, resp.Body, resp.ContentLength, buf, budget, cs.pace)
	// The time waited for room in the budget is metactl's, not the hook's.
	c.observe(cs.Controller, cs.Hook, resp.StatusCode, time.Since(cs.start)-budget.waited)
	cs.tap.answered(resp.StatusCode, time.Since(cs.start)-budget.waited)
	if err == nil {
		return nil
	}
	var waited *BudgetError
	switch {
	case err == errTooLarge:
		return &ResponseError{Controller: cs.Controller, Hook: cs.Hook, URL: cs.URL, Err: c.tooLarge()}
	case errors.As(err, &waited) && cs.ctx.Err() == nil:
		waited.Controller, waited.Hook, waited.URL, waited.Timeout = cs.Controller, cs.Hook, cs.URL, cs.timeout
		return waited
	case cs.ctx.Err() == nil && cs.callCtx.Err() == nil && context.Cause(cs.reqCtx) == errSlowBody:
		return &UnreachableError{Controller: cs.Controller, Hook: cs.Hook, URL: cs.URL,
			Err: &slowBodyError{read: int64(buf.Len()), held: budget.held, allowed: cs.pace.allowed(budget.held), rate: c.minRate}}
	default:
		return transportError(cs.ctx, cs.callCtx, cs.hookCall, cs.timeout, phaseBody, err)
	}
}

// decodeAnswer decodes body into the call's response (decode); with etag,
// an answer that is not valid is no longer cached.
func (c *Client) decodeAnswer(cs *callState, body []byte) error {
	err := c.decode(cs, body)
	var re *ResponseError
	if err != nil && cs.etag.on && errors.As(err, &re) {
		c.etags.remove(cs.etag.key)
	}
	return err
}

// decode decodes body into the call's response within the decoded budget:
// it takes the answer's estimated part (decodedSize) first, waiting for
// room up to the call's timeout, and gives it back when it returns, or
// leaves it to the call's Hold (CallOptions) when the answer is decoded.
// An answer whose estimate exceeds the whole budget is a *ResponseError;
// no room within the timeout, a *BudgetError.
func (c *Client) decode(cs *callState, body []byte) error {
	n := decodedSize(body)
	if n > c.decoded.size {
		return &ResponseError{Controller: cs.Controller, Hook: cs.Hook, URL: cs.URL,
			Err: fmt.Errorf("the answer's %d bytes of JSON would take about %d bytes once decoded, more than all decoded hook answers together may take (%d bytes, --hook-decoded-budget-bytes): answer fewer or larger values", len(body), n, c.decoded.size)}
	}
	part, err := c.decoded.acquire(cs.callCtx, cs.Controller, n)
	if err != nil {
		return &BudgetError{Controller: cs.Controller, Hook: cs.Hook, URL: cs.URL, Need: n, Budget: c.decoded.size,
			Floor: c.decoded.floor, Timeout: cs.timeout, Flag: "--hook-decoded-budget-bytes", Err: err}
	}
	if err := cs.response.DecodeHookResponse(body, hooks.ResponseMode(cs.hook)); err != nil {
		part.release()
		// It may quote the start of the answer: scrubbed of the request's
		// secrets, as an error body is.
		return &ResponseError{Controller: cs.Controller, Hook: cs.Hook, URL: cs.URL, Err: &scrubbedError{text: scrub(err.Error(), false, cs.request, cs.req), err: err}}
	}
	if cs.hold != nil {
		cs.hold.keep(part)
	} else {
		part.release()
	}
	return nil
}

// setupError reports an error of choosing the HTTP client or preparing the
// request. A CallError gets the call's controller and hook.
func setupError(call hookCall, phase string, err error) error {
	if ce, ok := err.(CallError); ok {
		return fmt.Errorf("%s: %w", call.prefix(), ce.ForCall(call.Controller, call.Hook))
	}
	return fmt.Errorf("%s: %s: %w", call.prefix(), phase, err)
}

func (c *Client) clientFor(ctx context.Context, hook *v1alpha1.Hook) (*http.Client, error) {
	if c.transport != nil {
		var hc *http.Client
		var err error
		if cr, ok := c.transport.(ContextTransportResolver); ok {
			hc, err = cr.TransportForContext(ctx, hook)
		} else {
			hc, err = c.transport.TransportFor(hook)
		}
		if err != nil {
			return nil, err
		}
		if hc != nil {
			return withoutRedirects(hc), nil
		}
	}
	return c.httpClient, nil
}

// refuseRedirects is the CheckRedirect of the HTTP clients that call
// hooks: a redirect is not followed, and its answer is returned as it is
// (Call makes it a *StatusError naming the Location). Following one would
// send the request's body and credentials wherever the hook points,
// another host or plain http included.
func refuseRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// withoutRedirects returns a copy of hc that follows no redirect, whatever
// hc's own CheckRedirect says: one rule for every client that calls hooks.
func withoutRedirects(hc *http.Client) *http.Client {
	copied := *hc
	copied.CheckRedirect = refuseRedirects
	return &copied
}

// isRedirect reports whether code is one of the redirects an HTTP client
// follows: 301, 302, 303, 307, 308.
func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// redirectLocation returns, for a redirect, its Location resolved against
// the request's URL, for messages (see redactURL).
// It is empty for other answers and for a redirect without a Location,
// and "(invalid Location)" when it does not parse.
func redirectLocation(resp *http.Response) string {
	loc := resp.Header.Get("Location")
	if !isRedirect(resp.StatusCode) || loc == "" {
		return ""
	}
	u, err := resp.Request.URL.Parse(loc)
	if err != nil {
		return "(invalid Location)"
	}
	return redactURL(u)
}

func (c *Client) observe(controller, hook string, code int, d time.Duration) {
	if c.metrics != nil {
		c.metrics.ObserveHookCall(controller, hook, code, d)
	}
}

func (c *Client) tooLarge() error {
	if c.budget.limit < c.maxBody {
		return fmt.Errorf("body exceeds the limit of %d bytes (seven eighths of the budget of all hook answers at once, --hook-response-budget-bytes)", c.budget.limit)
	}
	return fmt.Errorf("body exceeds the limit of %d bytes", c.maxBody)
}

// The phases of a call that transportError tells apart; they complete the
// message "no %s within the hook timeout".
const (
	phaseResponse = "response"
	phaseBody     = "complete response body"
)

// transportError classifies an error of sending the request or reading the
// response. A ctx cancelled by the caller is not the hook's fault and gives
// a plain error wrapping the cause; anything else means the hook could not
// be reached.
func transportError(ctx, callCtx context.Context, call hookCall, timeout time.Duration, phase string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", call.prefix(), context.Cause(ctx))
	}
	// The client's *url.Error repeats the URL, with the user name.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	switch {
	case callCtx.Err() != nil:
		err = &timeoutError{timeout: timeout, phase: phase}
	case closedByPeer(err):
		err = &closedError{body: phase == phaseBody, err: err}
	}
	return &UnreachableError{Controller: call.Controller, Hook: call.Hook, URL: call.URL, Err: err}
}

// redactURL returns u for messages as redact.URL writes it (the one rule
// for URLs in logs, Events and conditions): its user information and the
// values of its query, which may carry credentials, are redact.Redacted.
func redactURL(u *url.URL) string {
	return redact.URL(u.String())
}
