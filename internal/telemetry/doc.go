// Package telemetry is how searchd is observed from outside: Prometheus
// metrics, OpenTelemetry traces and the request id in the log.
//
// The domain packages know nothing of it. They expose small observer
// interfaces (idempotency.Observer, providerjobs.Observer,
// sweeper.Observer) and one [Metrics] value implements them all, so the
// claims, the webhook drops and the sweeps land on the same page the HTTP
// edge serves at GET /metrics. The metrics live on a registry of their own,
// never the process-wide default, so two servers in one process (tests)
// never share or collide on a series.
//
// Tracing is off unless the operator configures an OTLP endpoint;
// cmd/searchd reads the OTEL_* variables and calls [NewTracerProvider]. Off
// means no tracer at all on the pool and no tracing middleware on the
// server, not a no-op tracer doing work nobody reads. On, every request is
// a span and every SQL statement a child span ([PoolTracer]).
//
// [WithRequestID] and [NewLogHandler] put the id of the request a log line
// is about into the line, and the trace and span ids when it is traced, so
// that a problem's request_id finds both its log lines and its trace.
package telemetry
