package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/searchd/searchd/internal/telemetry"
)

// The standard OpenTelemetry variables searchd reads itself, to decide
// whether to trace and where to. The exporter and the SDK read the others
// from the process environment: OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
// _COMPRESSION, _CERTIFICATE (and their TRACES_ forms),
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_*.
const (
	envOTelSDKDisabled    = "OTEL_SDK_DISABLED"
	envOTelTracesExporter = "OTEL_TRACES_EXPORTER"
	envOTelEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envOTelTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envOTelProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envOTelTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envOTelServiceName    = "OTEL_SERVICE_NAME"
)

// otlpTracesPath is what OTLP/HTTP appends to OTEL_EXPORTER_OTLP_ENDPOINT
// for traces; OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as is.
const otlpTracesPath = "/v1/traces"

// traceFlushTimeout bounds the flush of the spans still batched at exit.
const traceFlushTimeout = 5 * time.Second

// observability is what serve and dev observe the service with.
type observability struct {
	// metrics is shared by the API, the plane, the provider jobs, the
	// seat queue and the background loops; never nil.
	metrics *telemetry.Metrics
	// tracer is nil when tracing is off.
	tracer *sdktrace.TracerProvider
}

// newObservability builds the metrics and, when the OTEL_* variables ask
// for it, the tracer provider. A variable set to something searchd cannot
// do is a usage error naming it.
func newObservability(ctx context.Context, getenv func(string) string) (observability, error) {
	o := observability{metrics: telemetry.NewMetrics()}
	cfg, on, err := tracingConfig(getenv)
	if err != nil || !on {
		return o, err
	}
	o.tracer, err = telemetry.NewTracerProvider(ctx, cfg)
	return o, err
}

// tracingConfig reads the OTEL_* variables. Tracing is on when an OTLP
// endpoint is set, unless OTEL_SDK_DISABLED is true or
// OTEL_TRACES_EXPORTER is none.
func tracingConfig(getenv func(string) string) (telemetry.TracingConfig, bool, error) {
	var cfg telemetry.TracingConfig
	if strings.EqualFold(strings.TrimSpace(getenv(envOTelSDKDisabled)), "true") {
		return cfg, false, nil
	}
	switch exp := strings.TrimSpace(getenv(envOTelTracesExporter)); exp {
	case "none":
		return cfg, false, nil
	case "", "otlp":
	default:
		return cfg, false, usagef("%s: %q is not an exporter searchd has: use otlp or none", envOTelTracesExporter, exp)
	}
	name, endpoint := firstSet(getenv, envOTelTracesEndpoint, envOTelEndpoint)
	switch {
	case endpoint == "":
		return cfg, false, nil
	case name == envOTelEndpoint:
		endpoint = strings.TrimSuffix(endpoint, "/") + otlpTracesPath
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cfg, false, usagef("%s: %q is not an http:// or https:// URL", name, getenv(name))
	}
	protoName, proto := firstSet(getenv, envOTelTracesProtocol, envOTelProtocol)
	if p := cmp.Or(proto, "http/protobuf"); p != "http/protobuf" {
		return cfg, false, usagef("%s: %q is not supported: searchd exports traces over http/protobuf", protoName, p)
	}
	cfg.EndpointURL = endpoint
	cfg.ServiceName = getenv(envOTelServiceName)
	return cfg, true, nil
}

// firstSet returns the first of the variables names that is set, and its
// value; the last name and "" when none is.
func firstSet(getenv func(string) string, names ...string) (name, value string) {
	for _, name = range names {
		if value = getenv(name); value != "" {
			break
		}
	}
	return name, value
}

// tracerProvider returns the tracer provider, or nil (not a nil pointer in
// an interface) when tracing is off.
func (o observability) tracerProvider() trace.TracerProvider {
	if o.tracer == nil {
		return nil
	}
	return o.tracer
}

// openPool opens the pool of serve and dev (see the function openPool)
// observed: a span per SQL statement when tracing is on, and the pool's
// statistics on the metrics page.
func (o observability) openPool(ctx context.Context, cfg serverConfig) (*pgxpool.Pool, error) {
	pool, err := openPool(ctx, cfg, func(pc *pgxpool.Config) {
		if o.tracer != nil {
			pc.ConnConfig.Tracer = telemetry.PoolTracer(o.tracer)
		}
	})
	if err != nil {
		return nil, err
	}
	if err := o.metrics.WatchPool(pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("watching the database pool: %w", err)
	}
	return pool, nil
}

// shutdown flushes the spans still batched, within traceFlushTimeout.
func (o observability) shutdown(logger *slog.Logger) {
	if o.tracer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
	defer cancel()
	if err := o.tracer.Shutdown(ctx); err != nil {
		logger.Warn("flushing traces", slog.String("error", err.Error()))
	}
}
