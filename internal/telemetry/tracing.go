package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// DefaultServiceName is the service.name of searchd's spans when neither
// OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names one.
const DefaultServiceName = "searchd"

// TracingConfig configures [NewTracerProvider].
type TracingConfig struct {
	// EndpointURL is the full URL spans are posted to over OTLP/HTTP
	// (protobuf), such as "http://collector:4318/v1/traces"; its path is
	// used as is. Required.
	EndpointURL string
	// ServiceName is the service.name of every span. Empty keeps the one
	// OTEL_RESOURCE_ATTRIBUTES sets, else [DefaultServiceName].
	ServiceName string
}

// NewTracerProvider returns a tracer provider that batches spans to an
// OTLP/HTTP collector at cfg.EndpointURL. The exporter and the SDK read
// their remaining settings from the process's standard OTEL_* variables
// (headers, timeout, compression, certificates, OTEL_TRACES_SAMPLER,
// OTEL_BSP_*). The caller must Shutdown the provider, which flushes the
// spans still batched. It returns an error when cfg has no endpoint or the
// exporter cannot be built; an unreachable collector is not an error here:
// the export fails later, and spans are dropped, never the requests.
func NewTracerProvider(ctx context.Context, cfg TracingConfig) (*sdktrace.TracerProvider, error) {
	if cfg.EndpointURL == "" {
		return nil, errors.New("telemetry: TracingConfig.EndpointURL is required")
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.EndpointURL))
	if err != nil {
		return nil, fmt.Errorf("telemetry: building the OTLP trace exporter: %w", err)
	}
	res, err := serviceResource(ctx, cfg.ServiceName)
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// serviceResource is the SDK's default resource (which reads
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME) with service.name set to
// name, or to searchd's default when no variable named the service: the
// SDK's own default, "unknown_service:searchd", helps nobody.
func serviceResource(ctx context.Context, name string) (*resource.Resource, error) {
	if name == "" {
		env, err := resource.New(ctx, resource.WithFromEnv())
		if err != nil {
			return nil, fmt.Errorf("telemetry: reading OTEL_RESOURCE_ATTRIBUTES: %w", err)
		}
		if v, ok := env.Set().Value(semconv.ServiceNameKey); ok {
			name = v.AsString()
		}
	}
	res, err := resource.Merge(resource.DefaultWithContext(ctx),
		resource.NewSchemaless(semconv.ServiceName(cmp.Or(name, DefaultServiceName))))
	if err != nil {
		return nil, fmt.Errorf("telemetry: building the trace resource: %w", err)
	}
	return res, nil
}

// Propagator reads and writes the W3C traceparent and baggage headers, the
// default of OTEL_PROPAGATORS. It is used explicitly rather than through
// the process-wide global, which is a no-op until someone sets it.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// PoolTracer returns a pgx tracer that makes a child span of the caller's
// span for every SQL statement, batch, prepare and pool acquire. A
// statement run outside any span (the sweeper, the readiness probe's own
// context) is not traced. The span carries the SQL text, which searchd
// writes with placeholders, never the arguments. Set it as the
// ConnConfig.Tracer of the pool's config; leave the tracer unset when
// tracing is off, so a statement costs nothing extra.
func PoolTracer(tp trace.TracerProvider) pgx.QueryTracer {
	return otelpgx.NewTracer(
		otelpgx.WithTracerProvider(tp),
		// Database metrics are Prometheus's job here (WatchPool); the
		// tracer's own OpenTelemetry metrics would go nowhere.
		otelpgx.WithMeterProvider(noop.NewMeterProvider()),
	)
}
