// Package tracing sets up the export of metactl's spans over OTLP from the
// standard OTEL_* environment variables (docs/tracing.md).
//
// With an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set, New returns a Provider whose
// Tracer records one span per sync, with children for each hook call and
// each write, and exports them in batches over OTLP/HTTP (protobuf)
// through the OpenTelemetry Go SDK's OTLP exporter (otlptrace), on a
// transport of metactl's own (otlphttp.go: the SDK's otlptracehttp would
// link gRPC into metactl). Without one, the Provider is off: its
// Tracer is nil, nothing is recorded or exported, and each sync only gets
// fresh trace and span ids (internal/traceid) for its hook requests'
// traceparent header.
//
// Where the spans are made: the sync's in internal/engine (record.go, next
// to the sync's record), the hook calls' in pkg/hooks/hookclient (Client.Call, which
// also sends traceparent and tracestate), the writes' in internal/history
// (Failed, which every recorded write passes).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/klog/v2"
)

// ScopeName is the instrumentation scope of metactl's spans.
const ScopeName = "github.com/metactl/metactl"

// Options configure New.
type Options struct {
	// ServiceVersion is the service.version of the spans' resource.
	ServiceVersion string
	// Getenv reads the environment; nil is os.Getenv.
	Getenv func(string) string
}

// Provider is metactl's tracer provider: on (exporting) or off.
type Provider struct {
	sdk    *sdktrace.TracerProvider
	tracer trace.Tracer
}

// New returns the Provider the environment asks for: off (nil Tracer)
// unless an OTLP endpoint is set, OTEL_SDK_DISABLED is not "true" and
// OTEL_TRACES_EXPORTER is unset or "otlp" ("none" is off too). A protocol
// other than http/protobuf, or another exporter, is an error: metactl
// exports only OTLP over HTTP.
func New(ctx context.Context, opts Options) (*Provider, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return &Provider{}, nil
	}
	switch exporter := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exporter {
	case "", "otlp":
	case "none":
		return &Provider{}, nil
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: metactl exports traces only over OTLP (\"otlp\", or \"none\")", exporter)
	}
	if getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return &Provider{}, nil
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(name)); p != "" {
			if p != "http/protobuf" {
				return nil, fmt.Errorf("%s=%q: metactl exports OTLP over HTTP only (http/protobuf; a collector's port 4318)", name, p)
			}
			break
		}
	}
	client, err := newHTTPClient(getenv)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	exporter, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// Defaults first: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override them.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "metactl"), attribute.String("service.version", opts.ServiceVersion)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	// The sampler is OTEL_TRACES_SAMPLER's (default: parent-based, always
	// on), the batching OTEL_BSP_*'s.
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	// A failed export (the collector down) is logged, once per batch.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { klog.ErrorS(err, "Exporting spans") }))
	return &Provider{sdk: sdk, tracer: sdk.Tracer(ScopeName)}, nil
}

// Tracer returns the tracer of metactl's spans; nil when off.
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return p.tracer
}

// Enabled says whether spans are exported.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// Shutdown exports the spans not yet exported, within ctx, and stops the
// exporter. Nothing to do when off.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}
