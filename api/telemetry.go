package api

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/telemetry"
)

// Span attributes searchd adds to the span of a request.
const (
	// AttrRequestID is the request's X-Request-Id, so a problem's
	// request_id finds its trace.
	AttrRequestID = "searchd.request_id"
	// AttrClaimOutcome is a saved-search start's claim outcome: claimed,
	// completed, processing or conflict.
	AttrClaimOutcome = "searchd.claim.outcome"
	// AttrReplayed is true on a start answered from an earlier admission.
	AttrReplayed = "searchd.replayed"
)

// unmatchedRoute labels unmatched requests; labels are never raw paths,
// which would grow series without bound.
const unmatchedRoute = "unmatched"

// The start routes, whose spans traceStart marks.
const (
	startRoute       = "/v1/saved-searches/:id/start"
	directStartRoute = "/v1/runs"
)

// initTelemetry sets up metrics, tracing and logging before the routes.
func (s *Server) initTelemetry() {
	s.d.Logger = slog.New(telemetry.NewLogHandler(s.d.Logger.Handler()))
	if s.d.Metrics == nil {
		s.d.Metrics = telemetry.NewMetrics()
	}
	if s.d.TracerProvider != nil {
		s.traceHTTP = otelhttp.NewMiddleware("searchd",
			otelhttp.WithTracerProvider(s.d.TracerProvider),
			otelhttp.WithPropagators(telemetry.Propagator()),
			// The request metrics are Prometheus's (measure); otelhttp's
			// own would go nowhere.
			otelhttp.WithMeterProvider(noop.NewMeterProvider()))
	}
}

// routeSet returns the route patterns e serves, without echo's own
// catch-alls.
func routeSet(e *echo.Echo) map[string]bool {
	set := map[string]bool{}
	for _, r := range e.Routes() {
		if !strings.HasPrefix(r.Method, "echo_") {
			set[r.Path] = true
		}
	}
	return set
}

// routeLabel names the route of c: the pattern echo matched, or
// [unmatchedRoute].
func (s *Server) routeLabel(c echo.Context) string {
	if p := c.Path(); s.knownRoutes[p] {
		return p
	}
	return unmatchedRoute
}

// methodLabel bounds the method label to the standard methods.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// measure counts and times requests; outside accessLog, it sees the
// rendered status.
func (s *Server) measure(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		s.d.Metrics.ObserveRequest(s.routeLabel(c), methodLabel(c.Request().Method), c.Response().Status, time.Since(start))
		return err
	}
}

// trace makes a span per request, named after the route, when tracing
// is on.
func (s *Server) trace(next echo.HandlerFunc) echo.HandlerFunc {
	if s.traceHTTP == nil {
		return next
	}
	return func(c echo.Context) (err error) {
		h := s.traceHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c.SetRequest(r)
			c.SetResponse(echo.NewResponse(w, c.Echo()))
			span := trace.SpanFromContext(r.Context())
			if route := s.routeLabel(c); route != unmatchedRoute {
				span.SetName(r.Method + " " + route)
				span.SetAttributes(semconv.HTTPRoute(route))
			}
			span.SetAttributes(attribute.String(AttrRequestID, telemetry.RequestID(r.Context())))
			err = next(c)
		}))
		h.ServeHTTP(c.Response(), c.Request())
		return err
	}
}

// traceStart marks a start's span with the outcome its answer shows (a
// replay reads completed even without reaching the claim).
func (s *Server) traceStart(next echo.HandlerFunc) echo.HandlerFunc {
	if s.traceHTTP == nil {
		return next
	}
	return func(c echo.Context) error {
		err := next(c)
		route := c.Path()
		if c.Request().Method != http.MethodPost || (route != startRoute && route != directStartRoute) {
			return err
		}
		span := trace.SpanFromContext(c.Request().Context())
		if !span.IsRecording() {
			return err
		}
		replayed := err == nil && c.Response().Header().Get(HeaderIdempotentReplayed) == "true"
		var outcome idempotency.Kind
		switch {
		case err == nil && c.Response().Status == http.StatusCreated:
			outcome = idempotency.KindClaimed
		case replayed:
			outcome = idempotency.KindCompleted
			span.SetAttributes(attribute.Bool(AttrReplayed, true))
		case errs.Is(err, errs.InProgress):
			outcome = idempotency.KindProcessing
		case errs.Is(err, errs.KeyReused):
			outcome = idempotency.KindConflict
		}
		if outcome != 0 && route == startRoute {
			span.SetAttributes(attribute.String(AttrClaimOutcome, outcome.String()))
		}
		return err
	}
}
