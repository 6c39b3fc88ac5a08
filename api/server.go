// Package api is the HTTP edge of searchd: JSON over HTTP with echo, the
// routes of the saved-search surface, Run starts and reads, health checks
// and the OpenAPI document that describes them (openapi.json, served at
// GET /openapi.json).
//
// The package decides what the domain packages cannot: who the caller is
// (a bearer token that package auth verifies; the organization comes from
// the token and from nowhere else; a runtime reports Run status with a
// runtime credential of its own, see runtime_auth.go; a provider callback
// is authenticated by a Standard Webhooks signature over its delivery id,
// timestamp and body instead, see providerjobs.go), what a well-formed request is
// (the Idempotency-Key header, JSON bodies, field rules), and how every
// outcome reads on the wire. Errors are RFC 9457 problem documents with a
// machine code; the one table that turns domain errors into statuses is in
// problem.go, keyed by the kinds of package errs, and the code and detail
// of a domain error are the ones it carries. No input of any shape is
// meant to produce a 500: a 500 is a bug, logged with the request id the
// response carries.
//
// The package knows no database: the stores translate their driver's
// errors into kinds (internal/dberr), keyed creates run their transaction
// in their domain package, and readiness is a function the binary hands in
// (Deps.Ready, internal/readiness). Request bodies are the package's own
// types; the domain packages decide the rules of what they carry, and the
// handlers turn a domain refusal into the fields of a validation_failed.
//
// Identifiers in paths are UUIDs; a provider callback's path also names
// the provider. A path id that is not a UUID names no resource, so it
// answers 404 not_found like an id of another organization (on a callback,
// which is always acknowledged, it drops as unknown_job); a malformed id in
// a query parameter answers 400 validation_failed, because there the
// client sent a filter, not a name.
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
	"github.com/searchd/searchd/internal/fairq"
	"github.com/searchd/searchd/internal/telemetry"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/runs/runstream"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/servicekeys"
	"github.com/searchd/searchd/snapshot"
)

// SavedSearches is what the API needs of the saved-search store; a
// *savedsearch.Store has it.
type SavedSearches interface {
	Create(ctx context.Context, org uuid.UUID, p savedsearch.CreateParams) (*savedsearch.SavedSearch, error)
	// CreateOnce creates once per Idempotency-Key, claimed on plane.
	CreateOnce(ctx context.Context, plane *idempotency.Service, org uuid.UUID, key string, p savedsearch.CreateParams) (ss *savedsearch.SavedSearch, created bool, err error)
	// GetAny reads a live or an archived saved search.
	GetAny(ctx context.Context, org, id uuid.UUID) (*savedsearch.SavedSearch, error)
	ReplaceBaselineIf(ctx context.Context, org, id uuid.UUID, b savedsearch.Baseline, ifMatch func(int64) bool) (*savedsearch.SavedSearch, error)
	ArchiveIf(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool) error
	Get(ctx context.Context, org, id uuid.UUID) (*savedsearch.SavedSearch, error)
	List(ctx context.Context, org uuid.UUID, p savedsearch.ListParams) ([]savedsearch.Summary, string, error)
	Update(ctx context.Context, org, id uuid.UUID, p savedsearch.UpdateParams) (*savedsearch.SavedSearch, error)
	// UpdateFunc applies the change computed from the saved search as
	// stored, under its row lock (a merge patch).
	UpdateFunc(ctx context.Context, org, id uuid.UUID, ifMatch func(int64) bool,
		change func(cur *savedsearch.SavedSearch) (savedsearch.UpdateParams, error)) (*savedsearch.SavedSearch, error)
}

// Snapshots is what the API needs of the snapshot store; a *snapshot.Store
// has it.
type Snapshots interface {
	Get(ctx context.Context, org, id uuid.UUID) (*snapshot.Snapshot, error)
	ListBySavedSearch(ctx context.Context, org, savedSearchID uuid.UUID, p snapshot.ListParams) ([]snapshot.ListItem, string, error)
}

// Runs is what the API needs of the Run store; a *runs.Store has it.
type Runs interface {
	Get(ctx context.Context, org, id uuid.UUID) (*runs.Run, error)
	List(ctx context.Context, org uuid.UUID, p runs.ListParams) ([]runs.ListItem, string, error)
	// Report applies a runtime's status report.
	Report(ctx context.Context, org, id uuid.UUID, r runs.StatusReport) (*runs.Run, bool, error)
	// Cancel cancels a Run, or asks its runtime to.
	Cancel(ctx context.Context, org, id uuid.UUID, c runs.CancelRequest) (*runs.Run, error)
	// Version and Events are what a Run's event stream reads
	// (runstream.Source).
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
	// RegisterOnce registers once per Idempotency-Key.
	RegisterOnce(ctx context.Context, org uuid.UUID, key string, p providerjobs.RegisterParams) (job *providerjobs.Job, created, replayed bool, err error)
	// ListDrops reads the dropped deliveries of a job.
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
	// Dispatches reads each Run's hand-off to the runtime, which GET
	// /v1/runs/{id} shows. Required.
	Dispatches Dispatches
	// Schedules serves the schedules of saved searches and their
	// occurrences; nil serves none of those routes.
	Schedules Schedules
	// ServiceKeys verifies service keys (bearer tokens sdk_...) and
	// serves their management (/v1/service-keys); nil serves none of
	// those routes and refuses every service key.
	ServiceKeys ServiceKeys
	// Webhooks serves the organization's webhook endpoints and their
	// deliveries; nil serves none of those routes.
	Webhooks Webhooks
	// ProviderSecrets maps each provider name to the secret its callbacks
	// are signed with (Standard Webhooks v1: HMAC-SHA256 over the delivery
	// id, timestamp and body), used as these raw bytes. Names must pass
	// providerjobs.ValidateProvider and secrets must not be empty. A
	// callback from a provider missing here answers 401; nil allows none.
	ProviderSecrets map[string][]byte
	// Verifier verifies bearer tokens (an *auth.Verifier: HS256 tokens
	// of the server's secret, a provider's access tokens, or both).
	// Required.
	Verifier Verifier
	// Logger receives the access log and the errors; nil discards them.
	// Every line about a request carries its request_id.
	Logger *slog.Logger
	// Metrics counts every request and is served at GET /metrics; share
	// it with the plane's and the provider jobs' observers so their
	// counts are on the same page (and watch the pool there: the API has
	// none). Nil makes a private one with the HTTP metrics and the Go and
	// process collectors.
	Metrics *telemetry.Metrics
	// TracerProvider, when set, makes a span of every request, named
	// after its route, with the claim outcome on a start's. Nil (the
	// default) traces nothing and adds nothing to a request.
	TracerProvider trace.TracerProvider
	// Now is the clock tokens expire by and callback timestamps are
	// checked against ([CallbackTolerance]); nil is time.Now.
	Now func() time.Time
	// MaxBodyBytes limits request bodies; zero is [DefaultMaxBodyBytes].
	MaxBodyBytes int64
	// CallbackMaxBodyBytes limits the body of a provider callback, which
	// anyone can send: it is buffered (to be parsed and stored once its
	// signature holds), so its limit is its own and small. Zero is
	// [DefaultCallbackMaxBodyBytes], or MaxBodyBytes when that is lower;
	// more than MaxBodyBytes is an error.
	CallbackMaxBodyBytes int64
	// CallbackBodyBudget bounds the bytes that callback bodies awaiting
	// their signature check hold together (a body is charged its buffer
	// before a byte is read); a body it cannot take answers 503
	// unavailable with Retry-After at once, unread. Bodies over 64 KiB
	// share three quarters of it, so small deliveries still get in while
	// large ones hold the rest. Zero is [DefaultCallbackBodyBudget]; it
	// must be at least twice the callback limit.
	CallbackBodyBudget int64
	// CallbackBodyTimeout is how long a callback body may take to arrive,
	// from the end of its headers; a slower one answers 503 unavailable
	// and gives its share of the budget back. Zero is
	// [DefaultCallbackBodyTimeout].
	CallbackBodyTimeout time.Duration
	// BodyTimeout is how long a request body may take to arrive, from the
	// end of its headers: the body is read whole before the request takes
	// a seat, so a slow sender holds none; a slower one answers 503
	// unavailable. Zero is [DefaultBodyTimeout].
	BodyTimeout time.Duration
	// MaxPreferWait is the longest Prefer: wait=N a saved-search start
	// honours, in whole seconds, at most [PreferWaitLimit]; a longer
	// N is cut to it. Zero (the default) ignores the preference: set it
	// only when Starter can wait (admission.Config.Hub).
	MaxPreferWait time.Duration
	// Plane is the idempotency plane keyed saved-search creates claim
	// their Idempotency-Key on; give the same plane as the Starter's so
	// its observer counts every claim. Nil answers every keyed create 500.
	Plane *idempotency.Service
	// CORSOrigins are the origins (scheme://host[:port]) a browser page
	// may call the API from: their preflights are answered without a
	// token and their answers carry Access-Control-Allow-Origin and expose
	// the headers a UI reads. Empty (the default) allows no other origin;
	// "*" allows every origin.
	CORSOrigins []string
	// Ready is the readiness check of /readyz: it returns nil when the
	// service can take traffic (the binary's is readiness.Checker.Ready:
	// the database answers and its schema is current). Required.
	Ready func(ctx context.Context) error
	// Admission is the process's admission queue (package fairq), shared
	// with the console: every /v1 request takes a seat in it, charged to
	// its organization, and every signed provider callback one charged to
	// its provider, before it touches the database. Required.
	Admission *fairq.Queue
	// Streams bounds and serves the Runs' event streams (GET
	// /v1/runs/{id}/events); share it with the console's, and close it
	// when the server shuts down (runstream.Hub.Close), so the drain
	// does not wait for streams. Nil makes one of runstream's defaults
	// on Runs, which [Server.Streams] returns.
	Streams *runstream.Hub
}

// Server is the HTTP API. It is safe for concurrent use.
type Server struct {
	echo *echo.Echo
	// d is what New was given, with its defaults filled in (Logger, Now,
	// Metrics, the body limits and timeout) and ProviderSecrets copied.
	d Deps
	// callbackBodies bounds the callback bodies awaiting their signature
	// (callbackbody.go).
	callbackBodies *bodyBudget
	// requestBodies bounds the request bodies read ahead of their seats
	// and held while served (admission.go).
	requestBodies *bodyBudget
	// docs is the page GET /docs serves, rendered once per process.
	docs []byte
	// traceHTTP (nil when tracing is off) and knownRoutes (the route
	// patterns, which bound the route label) are telemetry.go's.
	traceHTTP   func(http.Handler) http.Handler
	knownRoutes map[string]bool
}

// New returns the API server built on d. It returns an error naming the
// first dependency that is missing or invalid.
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
	case d.Admission == nil:
		return nil, errors.New("api: Deps.Admission is required")
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
	// A request body the budget cannot take waits for it as long as a
	// request waits for a seat: an honest batch of large bodies is queued,
	// not refused. A callback's is refused at once; its provider
	// redelivers.
	s := &Server{d: d, callbackBodies: newBodyBudget(budget, 0),
		requestBodies: newBodyBudget(max(DefaultBodyBudget, 2*(maxBody+1)), d.Admission.MaxWait()), docs: docs}
	s.initTelemetry()
	s.echo = s.routes()
	s.knownRoutes = routeSet(s.echo)
	return s, nil
}

// Streams returns the hub of the Runs' event streams: Deps.Streams, or the
// one New made.
func (s *Server) Streams() *runstream.Hub { return s.d.Streams }

// Handler returns the http.Handler that serves the API.
func (s *Server) Handler() http.Handler { return s.echo }

func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(s.requestID, s.trace, s.measure, s.accessLog, s.recoverPanic, s.cors(), s.traceStart)

	// get registers a GET route and its HEAD (RFC 9110 §9.3.2: the same
	// answer without the body, which net/http discards).
	get := func(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
		e.GET(path, h, m...)
		e.HEAD(path, h, m...)
	}
	get("/healthz", s.healthz)
	get("/readyz", s.readyz)
	get("/openapi.json", serveOpenAPI)
	get(docsPath, s.serveDocs)
	// Unauthenticated, like the health checks: the page names routes,
	// scopes and providers, never an organization, a key or a body.
	get("/metrics", echo.WrapHandler(s.d.Metrics.Handler()))
	get(problemsPath, s.serveProblemIndex)
	get(problemsPath+"/:code", s.serveProblemPage)
	// Outside the bearer token: a provider authenticates by the signature
	// of its body.
	e.POST("/v1/callbacks/:provider/jobs/:job_id", s.receiveCallback)

	// The /v1 routes authenticate route by route rather than through a
	// group middleware: echo answers a group's unmatched methods with its
	// catch-all 404, where a known path with a wrong method is a 405 with
	// Allow. Each authenticates and names who it opens to
	// (runtime_auth.go): an organization's user token and a service key of
	// the scope given, the runtime, or the key admin; then it takes a seat
	// in the admission queue under its organization (admission.go).
	read, write, limit := s.open(servicekeys.ScopeRead), s.open(servicekeys.ScopeStartsWrite), s.admit
	e.POST("/v1/saved-searches", s.createSavedSearch, write, limit)
	get("/v1/saved-searches", s.listSavedSearches, read, limit)
	get("/v1/saved-searches/:id", s.getSavedSearch, read, limit)
	e.PATCH("/v1/saved-searches/:id", s.updateSavedSearch, write, limit)
	// Archive: If-Match makes it conditional on the version.
	e.DELETE("/v1/saved-searches/:id", changeByID(removal(s.d.SavedSearches.ArchiveIf), ifMatch, answerNoContent), write, noBody, limit)
	e.PUT("/v1/saved-searches/:id/baseline", s.replaceBaseline, write, limit)
	e.POST("/v1/saved-searches/:id/start", s.startSavedSearch, write, limit)
	get("/v1/saved-searches/:id/snapshots", s.listSnapshots, read, limit)
	e.POST("/v1/runs", s.startDirect, write, limit)
	get("/v1/runs", s.listRuns, read, limit)
	get("/v1/runs/:id", s.getRun, read, limit)
	e.POST("/v1/runs/:id/cancel", s.cancelRun, write, limit)
	// A stream takes its seat for its first read only (events.go), and
	// takes no body: it would sit unread while the stream lasts.
	get("/v1/runs/:id/events", s.streamRunEvents, read, noBody)
	// The runtime's route: a runtime credential or a runs:report key.
	e.PUT("/v1/runs/:id/status", s.reportRunStatus, s.openRuntime(), limit)
	get("/v1/snapshots/:id", readByID(s.d.Snapshots.Get, answerOK), read, limit)
	e.POST("/v1/provider-jobs", s.registerProviderJob, write, limit)
	get("/v1/provider-jobs/:id", readByID(s.d.ProviderJobs.Get, answerJob), read, limit)
	get("/v1/provider-jobs/:id/drops", readByID(s.d.ProviderJobs.ListDrops, answerDrops), read, limit)
	if s.d.Schedules != nil {
		get("/v1/saved-searches/:id/schedule", readByID(s.d.Schedules.Get, answerScheduleOK), read, limit)
		e.PUT("/v1/saved-searches/:id/schedule", s.setSchedule, write, limit)
		// A schedule's occurrences stay when it is removed. Pause and
		// resume are sets, so a repeat changes nothing.
		e.DELETE("/v1/saved-searches/:id/schedule", changeByID(removal(s.d.Schedules.Remove), scheduleIfMatch, answerNoContent), write, noBody, limit)
		e.POST("/v1/saved-searches/:id/schedule/pause", changeByID(s.d.Schedules.Pause, scheduleIfMatch, answerScheduleOK), write, noBody, limit)
		e.POST("/v1/saved-searches/:id/schedule/resume", changeByID(s.d.Schedules.Resume, scheduleIfMatch, answerScheduleOK), write, noBody, limit)
		get("/v1/saved-searches/:id/occurrences", s.listOccurrences, read, limit)
	}
	// The organization's administration: its service keys and its webhook
	// endpoints (whose secrets the answers carry).
	admin := s.openAdmin()
	if s.d.ServiceKeys != nil {
		e.POST("/v1/service-keys", s.createServiceKey, admin, limit)
		get("/v1/service-keys", s.listServiceKeys, admin, limit)
		e.DELETE("/v1/service-keys/:id", s.revokeServiceKey, admin, noBody, limit)
	}
	if s.d.Webhooks != nil {
		e.POST("/v1/webhook-endpoints", s.createWebhookEndpoint, admin, limit)
		get("/v1/webhook-endpoints", s.listWebhookEndpoints, admin, limit)
		get("/v1/webhook-endpoints/:id", readByID(s.d.Webhooks.Get, answerOK), admin, limit)
		e.PATCH("/v1/webhook-endpoints/:id", s.updateWebhookEndpoint, admin, limit)
		e.DELETE("/v1/webhook-endpoints/:id", s.deleteWebhookEndpoint, admin, noBody, limit)
		get("/v1/webhook-endpoints/:id/deliveries", s.listWebhookDeliveries, admin, limit)
	}
	return e
}

// requestID gives every request a fresh id, sent back in X-Request-Id, put
// in every problem and, through the request's context, in every log line
// about the request. A client-sent id is not trusted into the log.
func (s *Server) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := uuid.NewString()
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		r := c.Request()
		c.SetRequest(r.WithContext(telemetry.WithRequestID(r.Context(), id)))
		return next(c)
	}
}

// accessLog logs one line per request, after the error handler has
// rendered any error, so the status is the one the client saw.
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
		// The record is made here rather than by Logger.LogAttrs, which
		// walks the stack for the caller's program counter on every line:
		// an access line has no source worth naming, and one is written
		// per request.
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

// recoverPanic turns a panic in a handler into an error, which becomes a
// logged 500, instead of a dropped connection.
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

// readyTimeout bounds the readiness check, so a hung database answers 503
// rather than hanging the prober.
const readyTimeout = 3 * time.Second

// readyz answers 200 when the database is reachable and its schema is at
// the newest migration, else 503 unavailable.
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
