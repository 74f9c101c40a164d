/*
Copyright The metactl Authors.

Licensed under the Apache License, Version 2.0.
*/

package hooks

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
	// once, from the first read of a body until its answer is decoded (see
	// Call). Answers over 64 KiB use at most seven eighths of it; a larger
	// one than that is refused as too large. Default:
	// DefaultResponseBudgetBytes.
	ResponseBudgetBytes int64
	// DecodedBudgetBytes bounds the memory the objects decoded from
	// answers take at once, all calls together, as estimated from each
	// answer's JSON before it is decoded: from decoding until Call
	// returns, or, under HoldAnswers, until the caller is done with them.
	// An answer whose estimate is larger is refused. Default:
	// DefaultDecodedBudgetBytes.
	DecodedBudgetBytes int64
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
}

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
	etags      *etagCache
	budget     *responseBudget
	decoded    *decodedBudget
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
	c.budget = newResponseBudget(budget, c.maxBody)
	decoded := opts.DecodedBudgetBytes
	if decoded <= 0 {
		decoded = DefaultDecodedBudgetBytes
	}
	c.decoded = newDecodedBudget(decoded)
	return c
}

// ResponseBytesInFlight returns the bytes of hook answers held now, all
// calls together (at most Options.ResponseBudgetBytes); for metrics.
func (c *Client) ResponseBytesInFlight() int64 { return c.budget.inFlight() }

// DecodedBytesInUse returns the estimated memory of the decoded answers in
// use now, all calls together (at most Options.DecodedBudgetBytes); for
// metrics.
func (c *Client) DecodedBytesInUse() int64 { return c.decoded.inUse() }

var sharedHTTPClient = sync.OnceValue(func() *http.Client {
	return &http.Client{Transport: NewTransport(), CheckRedirect: refuseRedirects}
})

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
func NewTransport() *http.Transport {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
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
// A response body is read into memory against the Client's budget
// (Options.ResponseBudgetBytes), shared by all its calls: the call
// reserves the body's bytes before reading them (all of a Content-Length
// at once) and holds them until the answer is decoded. It waits for room,
// at most until the hook's timeout; an answer larger than
// Options.MaxResponseBytes, or than seven eighths of the budget (the last
// eighth is kept for answers of 64 KiB or less), is refused. Before
// decoding it, the call also takes the answer's estimated decoded size
// from the decoded budget (Options.DecodedBudgetBytes), waiting for room
// likewise, and gives it back as it returns; under HoldAnswers, when the
// next call under the same context begins or the hold is released. An
// answer whose estimate exceeds that budget is refused undecoded.
//
// Call never follows a redirect: a 3xx answer is a *StatusError naming
// its Location, and the request (body and credentials) goes nowhere else.
//
// Call never retries. Its errors are an *UnreachableError, a *StatusError,
// a *ResponseError or a *BudgetError as described in the package
// documentation, or a
// *CredentialError (wrapped) when a credential of the hook cannot be used;
// a misconfigured hook, a request that cannot be encoded or a ctx cancelled
// by the caller give a plain error.
//
// A call that Options.Tap records is given to it as Call returns, once its
// request was sent, with its request and answer bodies and its error.
//
// Every request carries a W3C traceparent header (and tracestate, when
// the trace has one): with Options.Tracer, that of the call's own span,
// a child of ctx's; without, ctx's span context, or fresh ids when ctx
// has none.
func (c *Client) Call(ctx context.Context, controller, hookName string, hook *v1alpha1.Hook, request any, response Response) (err error) {
	tap := c.startTap(ctx, controller, hookName)
	if tap != nil {
		defer func() { tap.done(ctx, c.tap, err) }()
	}
	call := hookCall{Controller: controller, Hook: hookName, URL: "(no URL)"}
	if hook == nil || hook.Webhook == nil {
		return fmt.Errorf("%s: no webhook configured", call.prefix())
	}
	rawURL, err := hook.Webhook.Address()
	if err != nil {
		return fmt.Errorf("%s: %w", call.prefix(), err)
	}
	// The answer the previous call under ctx kept is no longer used: give
	// back its part of the decoded budget before this call may wait for
	// room.
	hold := heldAnswers(ctx)
	hold.release()
	timeout := hookTimeout(hook.Webhook)
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, rawURL, nil)
	if err != nil {
		// The error of a URL that does not parse repeats the URL, which
		// may hold credentials.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		call.URL = "(invalid URL)"
		return fmt.Errorf("%s: invalid webhook URL: %w", call.prefix(), err)
	}
	call.URL = redactURL(req.URL)
	ctx, span := c.startSpan(ctx, controller, hookName, call.URL)
	defer func() { span.end(err) }()
	if (req.URL.Scheme != "http" && req.URL.Scheme != "https") || req.URL.Host == "" {
		return fmt.Errorf("%s: invalid webhook URL: want an absolute http or https URL", call.prefix())
	}
	httpClient, err := c.clientFor(callCtx, hook)
	if err != nil {
		return setupError(call, "choosing the HTTP client", err)
	}

	enc := getEncoder()
	rb := newRequestBody(enc)
	defer rb.release()
	if err := enc.request(request); err != nil {
		return fmt.Errorf("%s: encoding the request: %w", call.prefix(), err)
	}
	if logger := klog.FromContext(ctx).V(6); logger.Enabled() {
		logger.Info("Hook request", "controller", controller, "hook", hookName, "url", call.URL, "body", redact.JSON(enc.b.Bytes()))
	}
	req.ContentLength = int64(enc.b.Len())
	req.Body = rb.reader()
	req.GetBody = func() (io.ReadCloser, error) { return rb.reader(), nil }
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "metactl")
	injectTrace(ctx, req.Header)
	if c.prepare != nil {
		if err := c.prepare.PrepareRequest(hook, req); err != nil {
			req.Body.Close()
			return setupError(call, "preparing the request", err)
		}
	}
	etagOpts, etagOn := etagConfig(hook.Webhook)
	var (
		cacheKey   etagKey
		etagCached *etagEntry
	)
	if etagOn {
		cacheKey = newEtagKey(rawURL, enc.b.Bytes())
		if e, ok := c.etags.get(cacheKey, etagOpts, c.now()); ok {
			etagCached = e
			req.Header.Set("If-None-Match", e.etag)
		}
	}

	tap.request(enc.b.Bytes())
	span.request(enc.b.Len())
	start := time.Now()
	resp, err := httpClient.Do(req)
	if err != nil {
		c.observe(controller, hookName, 0, time.Since(start))
		tap.answered(0, time.Since(start))
		return transportError(ctx, callCtx, call, timeout, phaseResponse, err)
	}
	defer resp.Body.Close()
	span.answered(resp.StatusCode)

	if etagCached != nil && (resp.StatusCode == http.StatusNotModified || resp.StatusCode == http.StatusPreconditionFailed) {
		// The cached answer is still the hook's answer to this request:
		// If-None-Match failing (412) says so as well as 304 does, so the
		// metrics count both as a revalidation, code 304.
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		c.observe(controller, hookName, http.StatusNotModified, time.Since(start))
		tap.answered(resp.StatusCode, time.Since(start))
		tap.body(etagCached.body)
		if response == nil {
			return nil
		}
		if err := c.decode(callCtx, call, timeout, hook, etagCached.body, response, hold); err != nil {
			var re *ResponseError
			if errors.As(err, &re) {
				c.etags.remove(cacheKey)
			}
			return err
		}
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		body := readErrorBody(resp.Body, request, req)
		c.observe(controller, hookName, resp.StatusCode, time.Since(start))
		tap.answered(resp.StatusCode, time.Since(start))
		se := &StatusError{Controller: controller, Hook: hookName, URL: call.URL, Code: resp.StatusCode, Body: body}
		if resp.StatusCode == http.StatusTooManyRequests {
			se.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), c.now())
		}
		se.Location = redirectLocation(resp)
		return se
	}

	buf := getBuffer()
	defer putBuffer(buf)
	// Released once the answer is decoded and, with etag, cached (a copy,
	// which the ETag cache's own limit bounds).
	budget := reservation{b: c.budget}
	defer budget.release()
	err = c.readBody(callCtx, resp.Body, resp.ContentLength, buf, &budget)
	// The time waited for room in the budget is metactl's, not the hook's.
	c.observe(controller, hookName, resp.StatusCode, time.Since(start)-budget.waited)
	tap.answered(resp.StatusCode, time.Since(start)-budget.waited)
	if err != nil {
		var waited *BudgetError
		switch {
		case err == errTooLarge:
			return &ResponseError{Controller: controller, Hook: hookName, URL: call.URL, Err: c.tooLarge()}
		case errors.As(err, &waited) && ctx.Err() == nil:
			waited.Controller, waited.Hook, waited.URL, waited.Timeout = controller, hookName, call.URL, timeout
			return waited
		default:
			return transportError(ctx, callCtx, call, timeout, phaseBody, err)
		}
	}
	// What the answer holds is its buffer, which readBody kept within
	// the reservation.
	budget.shrinkTo(int64(buf.Cap()))
	tap.body(buf.Bytes())
	span.body(buf.Len())
	if logger := klog.FromContext(ctx).V(6); logger.Enabled() {
		logger.Info("Hook response", "controller", controller, "hook", hookName, "url", call.URL, "body", redact.JSON(buf.Bytes()))
	}
	if response != nil {
		if err := c.decode(callCtx, call, timeout, hook, buf.Bytes(), response, hold); err != nil {
			var re *ResponseError
			if etagOn && errors.As(err, &re) {
				c.etags.remove(cacheKey)
			}
			return err
		}
	}
	if etagOn {
		// Only a valid answer is cached; an answer without an ETag makes
		// the one cached before obsolete.
		if tag := resp.Header.Get("ETag"); tag != "" {
			c.etags.put(cacheKey, tag, bytes.Clone(buf.Bytes()), etagOpts, c.now())
		} else if etagCached != nil {
			c.etags.remove(cacheKey)
		}
	}
	return nil
}

// decode decodes body into response within the decoded budget: it takes
// the answer's estimated part (decodedSize) first, waiting for room up to
// the call's timeout, and gives it back when it returns, or leaves it to
// hold (HoldAnswers) when the answer is decoded. An answer whose estimate
// exceeds the whole budget is a *ResponseError; no room within the
// timeout, a *BudgetError.
func (c *Client) decode(callCtx context.Context, call hookCall, timeout time.Duration, hook *v1alpha1.Hook, body []byte, response Response, hold *answerHold) error {
	n := decodedSize(body)
	if n > c.decoded.size {
		return &ResponseError{Controller: call.Controller, Hook: call.Hook, URL: call.URL,
			Err: fmt.Errorf("the answer's %d bytes of JSON would take about %d bytes once decoded, more than all decoded hook answers together may take (%d bytes, --hook-decoded-budget-bytes): answer fewer or larger values", len(body), n, c.decoded.size)}
	}
	if err := c.decoded.acquire(callCtx, n); err != nil {
		return &BudgetError{Controller: call.Controller, Hook: call.Hook, URL: call.URL, Need: n, Budget: c.decoded.size,
			Timeout: timeout, Flag: "--hook-decoded-budget-bytes", Err: err}
	}
	if err := response.DecodeHookResponse(body, responseMode(hook)); err != nil {
		c.decoded.release(n)
		return &ResponseError{Controller: call.Controller, Hook: call.Hook, URL: call.URL, Err: err}
	}
	if hold != nil {
		hold.keep(c.decoded, n)
	} else {
		c.decoded.release(n)
	}
	return nil
}

// setupError reports an error of choosing the HTTP client or preparing the
// request. A *CredentialError gets the call's controller and hook.
func setupError(call hookCall, phase string, err error) error {
	if ce, ok := err.(*CredentialError); ok {
		named := *ce
		named.Controller, named.Hook = call.Controller, call.Hook
		return fmt.Errorf("%s: %w", call.prefix(), &named)
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

// hookTimeout returns the timeout of w, as v1alpha1.SetDefaults_Hook
// defaults it.
func hookTimeout(w *v1alpha1.Webhook) time.Duration {
	if w.Timeout != nil && w.Timeout.Duration > 0 {
		return w.Timeout.Duration
	}
	return v1alpha1.DefaultHookTimeout
}

// responseMode returns the decoding mode of hook, as
// v1alpha1.SetDefaults_Hook defaults it: loose for v1, strict for v2.
func responseMode(hook *v1alpha1.Hook) v1alpha1.ResponseUnMarshallMode {
	if m := hook.Webhook.ResponseUnMarshallMode; m != nil {
		return *m
	}
	if hook.Version != nil && *hook.Version == v1alpha1.HookVersionV2 {
		return v1alpha1.ResponseUnMarshallModeStrict
	}
	return v1alpha1.ResponseUnMarshallModeLoose
}

// redactURL returns u for messages as redact.URL writes it (the one rule
// for URLs in logs, Events and conditions): its user information and the
// values of its query, which may carry credentials, are redact.Redacted.
func redactURL(u *url.URL) string {
	return redact.URL(u.String())
}
