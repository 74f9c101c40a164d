package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// httpClient is the OTLP/HTTP (protobuf) transport under the OpenTelemetry
// SDK's OTLP exporter (otlptrace.Client): the exporter turns spans into
// OTLP's ResourceSpans and batches them; httpClient sends each batch as an
// ExportTraceServiceRequest POSTed to the collector.
//
// It stands in for the SDK's otlptracehttp, whose request type lives in a
// package that also holds the gRPC service and so links gRPC into metactl
// (+30 MB of binary, +5 MiB of resident memory from start, whether or not
// traces are exported). It reads the same standard variables for traces
// (the TRACES_ form first): OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT,
// _HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE, _CLIENT_CERTIFICATE and
// _CLIENT_KEY. A batch that fails is not retried: the batcher drops it and
// the error is logged (tracing.New's error handler).
type httpClient struct {
	url      string
	headers  map[string]string
	timeout  time.Duration
	gzip     bool
	client   *http.Client
	maxError int64
}

// defaultOTLPTimeout is the OTLP exporters' default timeout per export.
const defaultOTLPTimeout = 10 * time.Second

// newHTTPClient reads the client's configuration from getenv.
func newHTTPClient(getenv func(string) string) (*httpClient, error) {
	env := func(name string) (string, string) {
		if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_" + name)); v != "" {
			return v, "OTEL_EXPORTER_OTLP_TRACES_" + name
		}
		return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name)), "OTEL_EXPORTER_OTLP_" + name
	}
	c := &httpClient{timeout: defaultOTLPTimeout, headers: map[string]string{}, maxError: 4 << 10}

	// The traces endpoint is used as it is; the general one is a base
	// to which the signal's path is added.
	if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); v != "" {
		c.url = v
	} else {
		c.url = strings.TrimSuffix(strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")), "/") + "/v1/traces"
	}
	if u, err := url.Parse(c.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("OTLP endpoint %q: want an http or https URL", c.url)
	}
	if v, name := env("HEADERS"); v != "" {
		for _, pair := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(pair, "=")
			key, err1 := url.PathUnescape(strings.TrimSpace(k))
			value, err2 := url.PathUnescape(strings.TrimSpace(val))
			if !ok || key == "" || err1 != nil || err2 != nil {
				return nil, fmt.Errorf("%s: want key=value pairs separated by commas", name)
			}
			c.headers[key] = value
		}
	}
	if v, name := env("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("%s=%q: want a positive number of milliseconds", name, v)
		}
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	switch v, name := env("COMPRESSION"); v {
	case "", "none":
	case "gzip":
		c.gzip = true
	default:
		return nil, fmt.Errorf("%s=%q: want gzip or none", name, v)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if v, name := env("CERTIFICATE"); v != "" {
		pem, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate in %s", name, v)
		}
		tlsConfig.RootCAs = pool
	}
	certFile, certName := env("CLIENT_CERTIFICATE")
	keyFile, _ := env("CLIENT_KEY")
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%s and its key: %w", certName, err)
		}
		tlsConfig.Certificates = []tls.Certificate{cert}
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	c.client = &http.Client{Transport: transport, Timeout: c.timeout}
	return c, nil
}

// Start does nothing: connections are made as batches are sent.
func (c *httpClient) Start(context.Context) error { return nil }

// Stop closes the idle connections.
func (c *httpClient) Stop(context.Context) error {
	c.client.CloseIdleConnections()
	return nil
}

// UploadTraces sends spans as one ExportTraceServiceRequest: its only
// field, resource_spans (1), repeated.
func (c *httpClient) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	var body []byte
	for _, rs := range spans {
		b, err := proto.Marshal(rs)
		if err != nil {
			return fmt.Errorf("encoding spans: %w", err)
		}
		body = protowire.AppendTag(body, 1, protowire.BytesType)
		body = protowire.AppendBytes(body, b)
	}
	encoding := ""
	if c.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(body); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		body, encoding = buf.Bytes(), "gzip"
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "metactl")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("sending spans to %s: %w", redactedURL(c.url), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, c.maxError))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("sending spans to %s: HTTP %d: %s", redactedURL(c.url), resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	return nil
}

// redactedURL is u without its user information and query, which may
// hold credentials.
func redactedURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(invalid URL)"
	}
	p.User, p.RawQuery = nil, ""
	return p.String()
}
