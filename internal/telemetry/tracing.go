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
	// EndpointURL is the full OTLP/HTTP URL, path included
	// ("http://collector:4318/v1/traces"). Required.
	EndpointURL string
	// ServiceName overrides service.name; empty keeps OTEL_* or
	// [DefaultServiceName].
	ServiceName string
}

// NewTracerProvider returns a provider batching spans to cfg.EndpointURL;
// other settings come from the standard OTEL_* variables. The caller must
// Shutdown it to flush. It returns an error when the endpoint is missing
// or the exporter cannot be built; an unreachable collector only drops
// spans later.
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

// serviceResource is the SDK's default resource with service.name set to
// name, or to [DefaultServiceName] instead of "unknown_service:searchd".
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

// Propagator handles the W3C traceparent and baggage headers. It is used
// directly because the global propagator is a no-op until set.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// PoolTracer returns a pgx tracer making a child span for each statement,
// batch, prepare and acquire under an existing span. Spans carry the SQL
// text, never the arguments. Leave it unset when tracing is off.
func PoolTracer(tp trace.TracerProvider) pgx.QueryTracer {
	return otelpgx.NewTracer(
		otelpgx.WithTracerProvider(tp),
		// Database metrics are Prometheus's job here (WatchPool); the
		// tracer's own OpenTelemetry metrics would go nowhere.
		otelpgx.WithMeterProvider(noop.NewMeterProvider()),
	)
}
