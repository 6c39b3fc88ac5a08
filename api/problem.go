package api

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-playground/validator/v10"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/idempotency"
)

// Machine-readable problem codes: the "code" member of every error body.
const (
	CodeMissingIdempotencyKey = "missing_idempotency_key"
	CodeInvalidIdempotencyKey = "invalid_idempotency_key"
	CodeMalformedJSON         = "malformed_json"
	CodeValidationFailed      = "validation_failed"
	CodeUnauthorized          = "unauthorized"
	CodeNotFound              = "not_found"
	CodeMethodNotAllowed      = "method_not_allowed"
	CodeInProgress            = "in_progress"
	CodeKeyReused             = "key_reused"
	CodePayloadTooLarge       = "payload_too_large"
	CodeUnsupportedMediaType  = "unsupported_media_type"
	CodeUnavailable           = "unavailable"
	CodeInternal              = "internal"
	CodeAlreadyRegistered     = "already_registered"
	CodeMissingDeliveryID     = "missing_delivery_id"
	CodeInvalidDeliveryID     = "invalid_delivery_id"
	CodeRateLimited           = "rate_limited"
	CodePreconditionFailed    = "precondition_failed"
	// CodeInsufficientScope answers a valid token on a route its role
	// does not open: a runtime credential on a user route, or a user
	// token on the runtime's (403, RFC 6750 §3.1; runtime_auth.go).
	CodeInsufficientScope = "insufficient_scope"
	// CodeRunFinished refuses a status report that would change a Run
	// that finished (409, with current_status and current_version).
	CodeRunFinished = "run_finished"
	// CodeScheduleLimit is the 409 of a new schedule beyond the
	// organization's limit (schedule.ErrTooMany).
	CodeScheduleLimit = "schedule_limit"
	// CodeWebhookEndpointLimit is the 409 of a new webhook endpoint beyond
	// the organization's limit (webhooks.ErrTooMany).
	CodeWebhookEndpointLimit = "webhook_endpoint_limit"
	// CodeTooManyStreams is the 503 of an event stream beyond the
	// server's cap (SEARCHD_EVENT_STREAMS_MAX).
	CodeTooManyStreams = "too_many_streams"
)

// ProblemTypeBase prefixes the "type" URI of every problem; the code
// completes it. It is a URI reference relative to the API (RFC 9457
// §3.1.1), so it resolves to the page searchd itself serves about the
// code: GET /problems/{code}.
const ProblemTypeBase = problemsPath + "/"

// MediaTypeProblem is the Content-Type of every error response (RFC 9457).
const MediaTypeProblem = "application/problem+json"

// inProgressRetryAfter is the most a 409 in_progress asks a client to
// wait: a preparation in flight is usually done well within it.
const inProgressRetryAfter = time.Second

// unavailableRetryAfter is the Retry-After of a 503: long enough for a
// restarted database or a drained pool, short enough not to strand clients.
const unavailableRetryAfter = 5 * time.Second

// Problem is an RFC 9457 problem details body.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
	// RequestID is the request's X-Request-Id, set on every problem, so
	// a report can be matched to the log and the trace.
	RequestID string `json:"request_id,omitempty"`
	// Errors lists the refused fields of a validation_failed problem.
	Errors []FieldError `json:"errors,omitempty"`
	// CurrentVersion is the version a precondition_failed change was
	// judged against: the saved search's version now; for run_finished,
	// the Run's.
	CurrentVersion *int64 `json:"current_version,omitempty"`
	// CurrentStatus is the status a run_finished Run finished with.
	CurrentStatus string `json:"current_status,omitempty"`
}

// apiError is an error the HTTP layer itself decided on: its status, code
// and detail are the answer.
type apiError struct {
	status     int
	code       string
	detail     string
	fields     []FieldError
	retryAfter time.Duration
	// challenge is the WWW-Authenticate of a 401; empty for the bearer
	// token's, [bearerChallenge].
	challenge string
	// currentVersion and etag describe the resource a 412 refused a
	// change to; currentVersion and currentStatus the Run a 409
	// run_finished refused a report for.
	currentVersion *int64
	etag           string
	currentStatus  string
}

// The WWW-Authenticate challenges of a 401: every 401 carries one (RFC 9110
// §11.6.1), naming the scheme that would have been accepted.
const (
	bearerChallenge = `Bearer realm="searchd"`
	// invalidTokenChallenge answers a request that sent a bearer token
	// the server refused (RFC 6750 §3.1).
	invalidTokenChallenge = `Bearer realm="searchd", error="invalid_token"`
	// signatureChallenge answers a provider callback, which is signed
	// (Standard Webhooks), not behind a bearer token: a client told to
	// send a token there would be told wrong.
	signatureChallenge = `Webhook-Signature realm="searchd provider callbacks"`
)

func (e *apiError) Error() string { return e.code + ": " + e.detail }

// unavailable is the 503 unavailable saying detail, with its Retry-After.
func unavailable(detail string) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable, detail: detail, retryAfter: unavailableRetryAfter}
}

// kindAnswer is the answer to a domain error of one kind: its status, and
// the code and detail of an error that carries none of its own.
type kindAnswer struct {
	status int
	code   string
	detail string
}

// kindAnswers is the one table that turns domain outcomes into HTTP
// statuses: each kind of errs has its row, but errs.Internal, which is a
// logged 500 with nothing of the error in its body. The code and detail
// are the error's own (errs.CodeOf, errs.DetailOf), the row's when it
// carries none. The API reads no further into a domain error than that
// and what the error offers for the answer's other members: the version
// and status it was judged against ([judged]), the refused fields and a
// lease's time left.
var kindAnswers = map[errs.Kind]kindAnswer{
	errs.Invalid:    {http.StatusBadRequest, CodeValidationFailed, validationFailedDetail},
	errs.NotFound:   {http.StatusNotFound, CodeNotFound, "no such resource"},
	errs.Conflict:   {http.StatusConflict, CodeAlreadyRegistered, "the name is taken in your organization already"},
	errs.KeyReused:  {http.StatusUnprocessableEntity, CodeKeyReused, "this Idempotency-Key was already used for a different request; use a new key"},
	errs.InProgress: {http.StatusConflict, CodeInProgress, "a request with this Idempotency-Key is still being prepared; retry after the Retry-After delay"},
	errs.PreconditionFailed: {http.StatusPreconditionFailed, CodePreconditionFailed,
		"the resource changed since the version If-Match names; read it again (its ETag) and reapply the change"},
	errs.Unavailable: {http.StatusServiceUnavailable, CodeUnavailable, "the service cannot reach its database; retry later"},
}

// judged is a domain error that names the version of the resource it
// was judged against (a precondition's, a finished Run's): the problem's
// current_version, and for a 412 its ETag; 0 names none. One that names
// the status it was judged against too (a finished Run) gives the
// problem's current_status.
type judged interface {
	error
	CurrentVersion() int64
}

// problemFor decides the answer to err. It never returns a body that
// quotes err itself unless err is an *apiError, whose detail the API
// wrote. Nil means no rule knows err: a 500.
func problemFor(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return echoProblems[he.Code] // nil for anything else: a 500
	}
	kind := errs.KindOf(err)
	row, ok := kindAnswers[kind]
	if !ok {
		return nil
	}
	p := &apiError{status: row.status, code: cmp.Or(errs.CodeOf(err), row.code), detail: cmp.Or(errs.DetailOf(err), row.detail)}
	if j, ok := errors.AsType[judged](err); ok && j.CurrentVersion() > 0 {
		v := j.CurrentVersion()
		p.currentVersion = &v
	}
	if j, ok := errors.AsType[interface {
		judged
		CurrentStatus() string
	}](err); ok {
		p.currentStatus = j.CurrentStatus()
	}
	switch kind {
	case errs.Invalid:
		// The API checks every body before a store sees it, so this is
		// a rule the domain decides (or one the API lacks): still the
		// client's input.
		if p.code == CodeValidationFailed {
			p.fields = invalidFields(err)
		}
	case errs.InProgress:
		// Retry-After is a hint of when the answer is likely ready, not
		// the lease: a preparation or a keyed create is one short
		// transaction, done in milliseconds, while the lease is the bound
		// on recovering from a crashed holder. So a retry comes after
		// inProgressRetryAfter, or sooner when the lease passes sooner;
		// a client that can wait asks for Prefer: wait instead.
		p.retryAfter = inProgressRetryAfter
		var inFlight *idempotency.InFlightError
		if errors.As(err, &inFlight) && inFlight.RetryAfter > 0 {
			p.retryAfter = min(inFlight.RetryAfter, inProgressRetryAfter)
		}
	case errs.PreconditionFailed:
		if p.currentVersion != nil {
			p.etag = etag(*p.currentVersion)
		}
	case errs.Unavailable:
		p.retryAfter = unavailableRetryAfter
	}
	return p
}

// invalidFields names the refused fields of an [errs.Invalid] error: those
// the domain named (errs.FieldsOf: a cursor, a size limit, a stored value),
// those of a validator it wrapped, or the input as a whole. A validator
// speaks Go field names, which become the JSON names by the snake_case
// convention every request type follows.
func invalidFields(err error) []FieldError {
	if named := errs.FieldsOf(err); len(named) > 0 {
		fields := make([]FieldError, 0, min(len(named), maxFieldErrors))
		for _, f := range named[:min(len(named), maxFieldErrors)] {
			fields = append(fields, FieldError{Field: f.Name, Message: f.Message})
		}
		return fields
	}
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		return []FieldError{{Field: "", Message: "is invalid"}}
	}
	return ruleFields(verrs, snakePath)
}

// snakePath turns a Go field path ("Brief.Query", "Baseline.Items[3]",
// "MaxResults") into its JSON form ("brief.query", "baseline.items[3]",
// "max_results").
func snakePath(path string) string {
	var b strings.Builder
	for i, r := range path {
		if r >= 'A' && r <= 'Z' {
			if i > 0 && path[i-1] != '.' {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// echoProblems answer the errors echo raises itself (no route, wrong
// method), by status.
var echoProblems = map[int]*apiError{
	http.StatusNotFound: {status: http.StatusNotFound, code: CodeNotFound, detail: "no such resource"},
	http.StatusMethodNotAllowed: {status: http.StatusMethodNotAllowed, code: CodeMethodNotAllowed,
		detail: "this resource does not support the request method"},
	http.StatusRequestEntityTooLarge: {status: http.StatusRequestEntityTooLarge, code: CodePayloadTooLarge,
		detail: "the request body is too large"},
	http.StatusUnsupportedMediaType: {status: http.StatusUnsupportedMediaType, code: CodeUnsupportedMediaType,
		detail: "the request body must be JSON"},
	http.StatusUnauthorized: {status: http.StatusUnauthorized, code: CodeUnauthorized,
		detail: "a valid bearer token is required"},
}

// handleError is the echo HTTPErrorHandler: it renders every error as a
// problem. An error no rule recognises is logged with the request id and
// answered 500 with nothing of the error in the body.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := problemFor(err)
	reqID := c.Response().Header().Get(echo.HeaderXRequestID)
	if p == nil {
		if errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil {
			// The client went away; nobody reads the answer.
			s.d.Logger.LogAttrs(c.Request().Context(), slog.LevelDebug, "request canceled by client",
				slog.String("request_id", reqID))
			p = unavailable("the request was canceled")
		} else {
			s.d.Logger.LogAttrs(context.WithoutCancel(c.Request().Context()), slog.LevelError, "internal error",
				slog.String("request_id", reqID),
				slog.String("method", c.Request().Method),
				slog.String("route", c.Path()),
				slog.String("error", err.Error()))
			p = &apiError{status: http.StatusInternalServerError, code: CodeInternal,
				detail: "the server failed to answer; report the request_id if it persists"}
		}
	} else if p.status == http.StatusServiceUnavailable || errs.Is(err, errs.Invalid) {
		// Worth a look: a database in trouble, or a domain rule the API's
		// own checks do not know yet.
		s.d.Logger.LogAttrs(context.WithoutCancel(c.Request().Context()), slog.LevelWarn, p.code,
			slog.String("request_id", reqID), slog.String("error", err.Error()))
	}
	s.writeProblem(c, p, reqID)
}

func (s *Server) writeProblem(c echo.Context, p *apiError, reqID string) {
	body := Problem{
		Type:           ProblemTypeBase + p.code,
		Title:          titles[p.code],
		Status:         p.status,
		Detail:         p.detail,
		Code:           p.code,
		Errors:         p.fields,
		CurrentVersion: p.currentVersion,
		CurrentStatus:  p.currentStatus,
		// Every problem, not only a 500: a client's 409 or 422 is worth
		// finding in the log too.
		RequestID: reqID,
	}
	h := c.Response().Header()
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(idempotency.RetryAfterSeconds(p.retryAfter)))
	}
	if p.status == http.StatusUnauthorized {
		h.Set(echo.HeaderWWWAuthenticate, cmp.Or(p.challenge, bearerChallenge))
	} else if p.challenge != "" {
		h.Set(echo.HeaderWWWAuthenticate, p.challenge) // a 403 insufficient_scope
	}
	if p.etag != "" {
		h.Set(HeaderETag, p.etag)
	}
	h.Set(echo.HeaderContentType, MediaTypeProblem)
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(p.status)
		return
	}
	_ = c.JSON(p.status, body)
}
