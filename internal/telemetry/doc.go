// Package telemetry exposes searchd to monitoring: Prometheus metrics,
// OpenTelemetry traces and request ids in the log.
//
// Domain packages define small observer interfaces and one [Metrics]
// implements them all, on its own registry (never the global one, so two
// servers in a test process never collide). Tracing is off unless an OTLP
// endpoint is configured; off means no tracer at all, not a no-op one.
// [NewLogHandler] adds the request, trace and span ids to log lines, so a
// problem's request_id finds both its logs and its trace.
package telemetry
