package tracing

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestExportOverHTTP: spans reach an OTLP/HTTP receiver as an
// ExportTraceServiceRequest that the collector's own type decodes, with
// the headers and the compression the standard variables ask for.
func TestExportOverHTTP(t *testing.T) {
	var (
		mu    sync.Mutex
		names []string
		auth  string
		enc   string
		team  string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		auth = r.Header.Get("Authorization")
		enc = r.Header.Get("Content-Encoding")
		team = r.Header.Get("x-team")
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, s.Name)
				}
			}
		}
	}))
	defer srv.Close()
	env := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":    srv.URL + "/",
		"OTEL_EXPORTER_OTLP_HEADERS":     "Authorization=Bearer%20token,x-team=a",
		"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
		"OTEL_EXPORTER_OTLP_TIMEOUT":     "2000",
	}
	p, err := New(context.Background(), Options{Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Tracer().Start(context.Background(), "sync test")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(names, ",") != "sync test" || auth != "Bearer token" {
		t.Errorf("received spans %v with Authorization %q; want [sync test] with %q", names, auth, "Bearer token")
	}
	if enc != "gzip" || team != "a" {
		t.Errorf("received Content-Encoding %q and x-team %q; want gzip and a", enc, team)
	}
}

func TestHTTPClientConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		url  string
		err  string
	}{
		{name: "base endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, url: "http://c:4318/v1/traces"},
		{name: "traces endpoint as is", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://t:443/custom"}, url: "https://t:443/custom"},
		{name: "not a URL", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "c:4318"}, err: "http or https URL"},
		{name: "bad header", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "novalue"}, err: "OTEL_EXPORTER_OTLP_TRACES_HEADERS"},
		{name: "bad timeout", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, err: "milliseconds"},
		{name: "bad compression", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, err: "gzip or none"},
		{name: "missing CA file", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"}, err: "OTEL_EXPORTER_OTLP_CERTIFICATE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newHTTPClient(func(k string) string { return tc.env[k] })
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %q", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case c.url != tc.url:
				t.Errorf("url %q, want %q", c.url, tc.url)
			}
		})
	}
}
