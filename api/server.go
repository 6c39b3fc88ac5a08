// Package api is searchd's HTTP edge: JSON routes for saved searches, Run
// starts and reads, provider callbacks, health checks, and the OpenAPI
// document served at GET /openapi.json. See docs/api.md.
//
// The package authenticates callers (bearer tokens via package auth, the
// organization taken from the token alone; service keys; a runtime
// credential, runtime_auth.go; Standard Webhooks signatures on provider
// callbacks, providerjobs.go), validates requests, and renders every
// outcome. Errors are RFC 9457 problem documents; problem.go maps the
// kinds of package errs to statuses in one table. A 500 is a bug, logged
// with the request id.
//
// The package knows no database: stores translate driver errors into
// kinds (internal/dberr) and readiness is a function handed in.
//
// A path id that is not a UUID answers 404 like another organization's id
// (on a callback, an unknown_job drop); a malformed id in a query
// parameter answers 400 validation_failed.
package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/internal/telemetry"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/runs/runstream"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/servicekeys"
	"github.com/searchd/searchd/snapshot"
)

// SavedSearches is the saved-search store; a *savedsearch.Store is one.
type SavedSearches interface {
	Create(ctx context.Context, org uuid.UUID, p savedsearch.CreateParams) (*savedsearch.SavedSearch, error)
	// CreateOnce creates once per Idempotency-Key.
	CreateOnce(ctx context.Context, plane *idempotency.Service, org uuid.UUID, key string, p savedsearch.CreateParams) (ss *savedsearch.SavedSearch, created bool, err error)
	// GetAny reads a live or an archived saved search.
	GetAny(ctx context.Context, org, id uuid.UUID) (*savedsearch.SavedSearch, error)
	ReplaceBaselineIf(ctx context.Context, org, id uuid.UUID, b savedsearch.Baseline, ifMatch func(int64) bool) (*savedsearch.SavedSearch, error)
	ArchiveIf(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool) error
	Get(ctx context.Context, org, id uuid.UUID) (*savedsearch.SavedSearch, error)
	List(ctx context.Context, org uuid.UUID, p savedsearch.ListParams) ([]savedsearch.Summary, string, error)
	Update(ctx context.Context, org, id uuid.UUID, p savedsearch.UpdateParams) (*savedsearch.SavedSearch, error)
	// UpdateFunc applies change to the stored row under its lock.
	UpdateFunc(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool,
		change func(cur *savedsearch.SavedSearch) (savedsearch.UpdateParams, error)) (*savedsearch.SavedSearch, error)
}

// Snapshots is the snapshot store; a *snapshot.Store is one.
type Snapshots interface {
	Get(ctx context.Context, org, id uuid.UUID) (*snapshot.Snapshot, error)
	ListBySavedSearch(ctx context.Context, org, savedSearchID uuid.UUID, p snapshot.ListParams) ([]snapshot.ListItem, string, error)
}

// Runs is the Run store; a *runs.Store is one.
type Runs interface {
	Get(ctx context.Context, org, id uuid.UUID) (*runs.Run, error)
	List(ctx context.Context, org uuid.UUID, p runs.ListParams) ([]runs.ListItem, string, error)
	Report(ctx context.Context, org, id uuid.UUID, r runs.StatusReport) (*runs.Run, bool, error)
	Cancel(ctx context.Context, org, id uuid.UUID, c runs.CancelRequest) (*runs.Run, error)
	// Version and Events make it a runstream.Source.
	Version(ctx context.Context, org, id uuid.UUID) (int64, string, error)
	Events(ctx context.Context, org, id uuid.UUID, after int64) ([]runs.Event, error)
}

// Starter starts Runs; an *admission.Starter is one.
type Starter interface {
	StartSavedSearch(ctx context.Context, p admission.SavedSearchStart) (admission.Result, error)
	StartDirect(ctx context.Context, p admission.DirectStart) (admission.Result, error)
}

// ProviderJobs registers and reads provider jobs and receives their
// callbacks; a *providerjobs.Service is one.
type ProviderJobs interface {
	Register(ctx context.Context, org uuid.UUID, p providerjobs.RegisterParams) (job *providerjobs.Job, created bool, err error)
	Get(ctx context.Context, org, id uuid.UUID) (*providerjobs.Job, error)
	RegisterOnce(ctx context.Context, org uuid.UUID, key string, p providerjobs.RegisterParams) (job *providerjobs.Job, created, replayed bool, err error)
	ListDrops(ctx context.Context, org, id uuid.UUID) ([]providerjobs.Drop, error)
	Receive(ctx context.Context, d providerjobs.Delivery) (providerjobs.Outcome, error)
}

// Deps are what a [Server] is built from.
type Deps struct {
	// The domain services. Required.
	SavedSearches SavedSearches
	Snapshots     Snapshots
	Runs          Runs
	Starter       Starter
	ProviderJobs  ProviderJobs
	// Dispatches reads each Run's hand-off to the runtime. Required.
	Dispatches Dispatches
	// Schedules serves schedules and occurrences; nil disables them.
	Schedules Schedules
	// ServiceKeys verifies and manages service keys; nil disables the
	// routes and refuses every key.
	ServiceKeys ServiceKeys
	// Webhooks serves webhook endpoints and deliveries; nil disables them.
	Webhooks Webhooks
	// ProviderSecrets maps provider names (providerjobs.ValidateProvider)
	// to their non-empty Standard Webhooks signing secrets, raw bytes. An
	// unlisted provider's callback answers 401.
	ProviderSecrets map[string][]byte
	// Verifier verifies bearer tokens (an *auth.Verifier). Required.
	Verifier Verifier
	// Logger receives the access log and errors; nil discards them.
	Logger *slog.Logger
	// Metrics is served at GET /metrics; share it with the other
	// observers. Nil makes a private one.
	Metrics *telemetry.Metrics
	// TracerProvider, when set, traces every request; nil adds nothing.
	TracerProvider trace.TracerProvider
	// Now is the clock for callback timestamps; nil is time.Now.
	Now func() time.Time
	// MaxBodyBytes limits request bodies; zero is [DefaultMaxBodyBytes].
	MaxBodyBytes int64
	// CallbackMaxBodyBytes limits an unauthenticated callback body, which
	// is buffered until its signature is checked. Zero is
	// [DefaultCallbackMaxBodyBytes] capped at MaxBodyBytes; more than
	// MaxBodyBytes is an error.
	CallbackMaxBodyBytes int64
	// CallbackBodyBudget bounds the bytes all unverified callback bodies
	// hold together; a body over budget answers 503 unread. Bodies over
	// 64 KiB share three quarters of it. Zero is
	// [DefaultCallbackBodyBudget]; it must be at least twice the callback
	// limit.
	CallbackBodyBudget int64
	// CallbackBodyTimeout bounds a callback body's arrival after its
	// headers (else 503). Zero is [DefaultCallbackBodyTimeout].
	CallbackBodyTimeout time.Duration
	// BodyTimeout bounds a request body's arrival after its headers
	// (else 503); bodies are read before taking a seat. Zero is
	// [DefaultBodyTimeout].
	BodyTimeout time.Duration
	// MaxPreferWait caps the Prefer: wait=N a saved-search start honours,
	// in whole seconds up to [PreferWaitLimit]. Zero ignores it; set it
	// only when Starter can wait (admission.Config.Hub).
	MaxPreferWait time.Duration
	// Plane is the idempotency service keyed saved-search creates claim
	// on; share the Starter's. Nil answers every keyed create 500.
	Plane *idempotency.Service
	// CORSOrigins are the browser origins (scheme://host[:port]) allowed
	// to call the API; "*" allows all, empty none.
	CORSOrigins []string
	// Ready is the /readyz check; nil means ready. Required.
	Ready func(ctx context.Context) error
	// Seats is the process's seat queue, shared with the console:
	// each /v1 request takes a seat charged to its organization, each
	// signed callback one charged to its provider. Required.
	Seats *seatq.Queue
	// Streams serves Run event streams; share it with the console and
	// close it on shutdown. Nil makes a default one.
	Streams *runstream.Hub
}

// Server is the HTTP API. It is safe for concurrent use.
type Server struct {
	echo *echo.Echo
	// d is New's Deps with defaults filled in.
	d              Deps
	callbackBodies *bodyBudget // callbackbody.go
	requestBodies  *bodyBudget // admission.go
	docs           []byte      // GET /docs, rendered once
	// traceHTTP (nil when tracing is off) and knownRoutes belong to
	// telemetry.go.
	traceHTTP   func(http.Handler) http.Handler
	knownRoutes map[string]bool
}

// New returns the API server built on d, or an error naming the first
// missing or invalid dependency.
func New(d Deps) (*Server, error) {
	maxBody := cmp.Or(d.MaxBodyBytes, DefaultMaxBodyBytes)
	callbackMax := cmp.Or(d.CallbackMaxBodyBytes, min(DefaultCallbackMaxBodyBytes, maxBody))
	budget := cmp.Or(d.CallbackBodyBudget, DefaultCallbackBodyBudget)
	switch {
	case d.Ready == nil:
		return nil, errors.New("api: Deps.Ready is required")
	case d.SavedSearches == nil, d.Snapshots == nil, d.Runs == nil, d.Starter == nil, d.ProviderJobs == nil, d.Dispatches == nil:
		return nil, errors.New("api: Deps.SavedSearches, Snapshots, Runs, Starter, ProviderJobs and Dispatches are required")
	case d.Verifier == nil:
		return nil, errors.New("api: Deps.Verifier is required")
	case d.Seats == nil:
		return nil, errors.New("api: Deps.Seats is required")
	case d.MaxBodyBytes < 0:
		return nil, errors.New("api: Deps.MaxBodyBytes is negative")
	case d.CallbackMaxBodyBytes < 0:
		return nil, errors.New("api: Deps.CallbackMaxBodyBytes is negative")
	case d.CallbackMaxBodyBytes > maxBody:
		return nil, fmt.Errorf("api: Deps.CallbackMaxBodyBytes is %d; it must be at most MaxBodyBytes (%d)",
			d.CallbackMaxBodyBytes, maxBody)
	case d.CallbackBodyBudget < 0 || d.CallbackBodyTimeout < 0 || d.BodyTimeout < 0:
		return nil, errors.New("api: Deps.CallbackBodyBudget, CallbackBodyTimeout or BodyTimeout is negative")
	case d.MaxPreferWait < 0 || d.MaxPreferWait > PreferWaitLimit || d.MaxPreferWait%time.Second != 0:
		return nil, fmt.Errorf("api: Deps.MaxPreferWait is %s; it must be whole seconds from 0s to %s", d.MaxPreferWait, PreferWaitLimit)
	}
	secrets, err := providerSecrets(d.ProviderSecrets)
	if err == nil {
		err = ValidateCORSOrigins(d.CORSOrigins)
	}
	if err == nil && budget < 2*callbackMax {
		err = fmt.Errorf("api: Deps.CallbackBodyBudget is %d; it must be at least twice the callback limit (%d)",
			budget, 2*callbackMax)
	}
	var docs []byte
	if err == nil {
		docs, err = renderedDocs()
	}
	if err != nil {
		return nil, err
	}
	d.ProviderSecrets, d.MaxBodyBytes, d.CallbackMaxBodyBytes = secrets, maxBody, callbackMax
	d.CallbackBodyTimeout = cmp.Or(d.CallbackBodyTimeout, DefaultCallbackBodyTimeout)
	d.BodyTimeout = cmp.Or(d.BodyTimeout, DefaultBodyTimeout)
	d.Logger = cmp.Or(d.Logger, slog.New(slog.DiscardHandler))
	if d.Streams == nil {
		if d.Streams, err = runstream.New(runstream.Config{}, d.Runs, d.Logger); err != nil {
			return nil, err
		}
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	// Request bodies wait for budget as long as for a seat; callback
	// bodies are refused at once, since providers redeliver.
	s := &Server{d: d, callbackBodies: newBodyBudget(budget, 0, callbackRefusals),
		requestBodies: newBodyBudget(max(DefaultBodyBudget, 2*(maxBody+1)), d.Seats.MaxWait(), requestRefusals), docs: docs}
	s.initTelemetry()
	s.echo = s.routes()
	s.knownRoutes = routeSet(s.echo)
	return s, nil
}

// Handler returns the http.Handler that serves the API.
func (s *Server) Handler() http.Handler { return s.echo }

func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(s.requestID, s.trace, s.measure, s.accessLog, s.recoverPanic, s.cors(), s.traceStart)

	// get registers a GET route and its HEAD.
	get := func(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
		e.GET(path, h, m...)
		e.HEAD(path, h, m...)
	}
	get("/healthz", s.healthz)
	get("/readyz", s.readyz)
	get("/openapi.json", serveOpenAPI)
	get(docsPath, s.serveDocs)
	// Unauthenticated: labels name no organization, key or body.
	get("/metrics", echo.WrapHandler(s.d.Metrics.Handler()))
	get(problemsPath, s.serveProblemIndex)
	get(problemsPath+"/:code", s.serveProblemPage)
	// Providers authenticate by signature, not bearer token.
	e.POST("/v1/callbacks/:provider/jobs/:job_id", s.receiveCallback)

	// Authenticate per route, not per group: an echo group answers a
	// wrong method with 404 instead of 405 with Allow. Then limit takes a
	// fair-queue seat (admission.go).
	read, write, limit := s.open(servicekeys.ScopeRead), s.open(servicekeys.ScopeStartsWrite), s.admit
	e.POST("/v1/saved-searches", s.createSavedSearch, write, limit)
	get("/v1/saved-searches", s.listSavedSearches, read, limit)
	get("/v1/saved-searches/:id", withID(s.getSavedSearch), read, limit)
	e.PATCH("/v1/saved-searches/:id", withID(s.updateSavedSearch), write, limit)
	e.DELETE("/v1/saved-searches/:id", changeByID(removal(s.d.SavedSearches.ArchiveIf), ifMatch, answerNoContent), write, noBody, limit)
	e.PUT("/v1/saved-searches/:id/baseline", withID(s.replaceBaseline), write, limit)
	e.POST("/v1/saved-searches/:id/start", withID(s.startSavedSearch), write, limit)
	get("/v1/saved-searches/:id/snapshots", withID(s.listSnapshots), read, limit)
	e.POST("/v1/runs", s.startDirect, write, limit)
	get("/v1/runs", s.listRuns, read, limit)
	get("/v1/runs/:id", withID(s.getRun), read, limit)
	e.POST("/v1/runs/:id/cancel", withID(s.cancelRun), write, limit)
	// A stream takes a seat for its first read only (events.go).
	get("/v1/runs/:id/events", withID(s.streamRunEvents), read, noBody)
	e.PUT("/v1/runs/:id/status", withID(s.reportRunStatus), s.open(servicekeys.ScopeRunsReport), limit)
	get("/v1/snapshots/:id", readByID(s.d.Snapshots.Get, answerOK), read, limit)
	e.POST("/v1/provider-jobs", s.registerProviderJob, write, limit)
	get("/v1/provider-jobs/:id", readByID(s.d.ProviderJobs.Get, answerJob), read, limit)
	get("/v1/provider-jobs/:id/drops", readByID(s.d.ProviderJobs.ListDrops, answerItems), read, limit)
	if s.d.Schedules != nil {
		get("/v1/saved-searches/:id/schedule", readByID(s.d.Schedules.Get, answerSchedule), read, limit)
		e.PUT("/v1/saved-searches/:id/schedule", withID(s.setSchedule), write, limit)
		e.DELETE("/v1/saved-searches/:id/schedule", changeByID(removal(s.d.Schedules.Remove), scheduleIfMatch, answerNoContent), write, noBody, limit)
		e.POST("/v1/saved-searches/:id/schedule/pause", changeByID(s.d.Schedules.Pause, scheduleIfMatch, answerSchedule), write, noBody, limit)
		e.POST("/v1/saved-searches/:id/schedule/resume", changeByID(s.d.Schedules.Resume, scheduleIfMatch, answerSchedule), write, noBody, limit)
		get("/v1/saved-searches/:id/occurrences", withID(s.listOccurrences), read, limit)
	}
	admin := s.openAdmin()
	if s.d.ServiceKeys != nil {
		e.POST("/v1/service-keys", s.createServiceKey, admin, limit)
		get("/v1/service-keys", s.listServiceKeys, admin, limit)
		e.DELETE("/v1/service-keys/:id", withID(s.revokeServiceKey), admin, noBody, limit)
	}
	if s.d.Webhooks != nil {
		e.POST("/v1/webhook-endpoints", s.createWebhookEndpoint, admin, limit)
		get("/v1/webhook-endpoints", s.listWebhookEndpoints, admin, limit)
		get("/v1/webhook-endpoints/:id", readByID(s.d.Webhooks.Get, answerOK), admin, limit)
		e.PATCH("/v1/webhook-endpoints/:id", withID(s.updateWebhookEndpoint), admin, limit)
		e.DELETE("/v1/webhook-endpoints/:id", s.deleteWebhookEndpoint, admin, noBody, limit)
		get("/v1/webhook-endpoints/:id/deliveries", withID(s.listWebhookDeliveries), admin, limit)
	}
	return e
}

// requestID gives every request a fresh id for X-Request-Id, problems and
// logs; a client-sent id is never trusted.
func (s *Server) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := uuid.NewString()
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		r := c.Request()
		c.SetRequest(r.WithContext(telemetry.WithRequestID(r.Context(), id)))
		return next(c)
	}
}

// accessLog logs one line per request after any error is rendered, so
// the status is the one the client saw.
func (s *Server) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			s.handleError(err, c)
		}
		ctx, h := c.Request().Context(), s.d.Logger.Handler()
		if !h.Enabled(ctx, slog.LevelInfo) {
			return nil
		}
		// Build the record directly: Logger.LogAttrs would walk the stack
		// for a source nobody needs, once per request.
		res := c.Response()
		r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
		r.AddAttrs(
			slog.String("request_id", res.Header().Get(echo.HeaderXRequestID)),
			slog.String("method", c.Request().Method),
			slog.String("route", c.Path()),
			slog.Int("status", res.Status),
			slog.Int64("bytes", res.Size),
			slog.Duration("duration", time.Since(start)))
		_ = h.Handle(ctx, r)
		return nil
	}
}

// recoverPanic turns a handler's panic into a logged 500.
func (s *Server) recoverPanic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return next(c)
	}
}

// healthz answers 200 while the process serves HTTP at all.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyTimeout bounds the readiness check, so a hung database answers 503.
const readyTimeout = 3 * time.Second

// readyz answers 200 when Deps.Ready passes, else 503.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), readyTimeout)
	defer cancel()
	if err := s.d.Ready(ctx); err != nil {
		s.d.Logger.LogAttrs(ctx, slog.LevelWarn, "not ready",
			slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)),
			slog.String("error", err.Error()))
		return unavailable("the service is not ready: its database is unreachable or its schema is not current")
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
