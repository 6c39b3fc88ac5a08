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
	// CodeInsufficientScope is the 403 of a valid token on a route its
	// role or scope does not open (RFC 6750 §3.1).
	CodeInsufficientScope = "insufficient_scope"
	// CodeRunFinished is the 409 of a report changing a finished Run.
	CodeRunFinished = "run_finished"
	// CodeScheduleLimit is the 409 of schedule.ErrTooMany.
	CodeScheduleLimit = "schedule_limit"
	// CodeWebhookEndpointLimit is the 409 of webhooks.ErrTooMany.
	CodeWebhookEndpointLimit = "webhook_endpoint_limit"
	// CodeTooManyStreams is the 503 of runstream.ErrFull.
	CodeTooManyStreams = "too_many_streams"
)

// ProblemTypeBase prefixes every problem's relative "type" URI, which
// resolves to GET /problems/{code}.
const ProblemTypeBase = problemsPath + "/"

// MediaTypeProblem is the Content-Type of every error response (RFC 9457).
const MediaTypeProblem = "application/problem+json"

// inProgressRetryAfter is the longest Retry-After of a 409 in_progress.
const inProgressRetryAfter = time.Second

// unavailableRetryAfter is the Retry-After of a 503.
const unavailableRetryAfter = 5 * time.Second

// Problem is an RFC 9457 problem details body.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
	// RequestID is the X-Request-Id, matching the log and trace.
	RequestID string `json:"request_id,omitempty"`
	// Errors lists the refused fields of a validation_failed problem.
	Errors []FieldError `json:"errors,omitempty"`
	// CurrentVersion is the version a precondition_failed or
	// run_finished refusal was judged against.
	CurrentVersion *int64 `json:"current_version,omitempty"`
	// CurrentStatus is the status a run_finished Run finished with.
	CurrentStatus string `json:"current_status,omitempty"`
}

// apiError is an answer the HTTP layer decided itself.
type apiError struct {
	status     int
	code       string
	detail     string
	fields     []FieldError
	retryAfter time.Duration
	// challenge is a 401's WWW-Authenticate; empty is [bearerChallenge].
	challenge string
	// currentVersion, currentStatus and etag describe the refusing
	// resource of a 412 or run_finished.
	currentVersion *int64
	etag           string
	currentStatus  string
}

// WWW-Authenticate challenges; every 401 carries one (RFC 9110 §11.6.1).
const (
	bearerChallenge = `Bearer realm="searchd"`
	// invalidTokenChallenge answers a refused bearer token (RFC 6750 §3.1).
	invalidTokenChallenge = `Bearer realm="searchd", error="invalid_token"`
	// signatureChallenge answers a callback, which is signed, not bearer.
	signatureChallenge = `Webhook-Signature realm="searchd provider callbacks"`
)

func (e *apiError) Error() string { return e.code + ": " + e.detail }

// unavailable is the 503 unavailable saying detail, with its Retry-After.
func unavailable(detail string) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable, detail: detail, retryAfter: unavailableRetryAfter}
}

// kindAnswers maps every errs kind but errs.Internal (a logged 500) to
// its status and default code and detail. An error's own code and
// detail (errs.CodeOf, errs.DetailOf) win over the row's.
var kindAnswers = map[errs.Kind]apiError{
	errs.Invalid:  {status: http.StatusBadRequest, code: CodeValidationFailed, detail: validationFailedDetail},
	errs.NotFound: {status: http.StatusNotFound, code: CodeNotFound, detail: "no such resource"},
	errs.Conflict: {status: http.StatusConflict, code: CodeAlreadyRegistered, detail: "the name is taken in your organization already"},
	errs.KeyReused: {status: http.StatusUnprocessableEntity, code: CodeKeyReused,
		detail: "this Idempotency-Key was already used for a different request; use a new key"},
	errs.InProgress: {status: http.StatusConflict, code: CodeInProgress,
		detail: "a request with this Idempotency-Key is still being prepared; retry after the Retry-After delay"},
	errs.PreconditionFailed: {status: http.StatusPreconditionFailed, code: CodePreconditionFailed,
		detail: "the resource changed since the version If-Match names; read it again (its ETag) and reapply the change"},
	errs.Unavailable: {status: http.StatusServiceUnavailable, code: CodeUnavailable, detail: "the service cannot reach its database; retry later"},
}

// judged is a domain error naming the version (0: none), and optionally
// the status, it was judged against: the problem's current_version and
// current_status, and a 412's ETag.
type judged interface {
	error
	CurrentVersion() int64
}

// problemFor decides the answer to err, never quoting err unless it is an
// *apiError. Nil means a 500.
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
	p, ok := kindAnswers[kind]
	if !ok {
		return nil
	}
	p.code, p.detail = cmp.Or(errs.CodeOf(err), p.code), cmp.Or(errs.DetailOf(err), p.detail)
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
		// A domain rule the API's checks lack: still the client's input.
		if p.code == CodeValidationFailed {
			p.fields = invalidFields(err)
		}
	case errs.InProgress:
		// Hint when the answer is likely ready, not the whole lease,
		// which only bounds recovery from a crashed holder.
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
	return &p
}

// invalidFields names an [errs.Invalid] error's fields: the domain's
// (errs.FieldsOf), a wrapped validator's (Go names made snake_case), or
// the whole input.
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

// echoProblems answer the errors of echo's router, the only echo errors
// this server meets (it uses no binder, body limit or auth of echo's).
var echoProblems = map[int]*apiError{
	http.StatusNotFound: errNoSuchPath,
	http.StatusMethodNotAllowed: {status: http.StatusMethodNotAllowed, code: CodeMethodNotAllowed,
		detail: "this resource does not support the request method"},
}

// handleError renders every error as a problem; an unrecognised one is
// logged and answered 500 with nothing of it in the body.
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
		s.d.Logger.LogAttrs(context.WithoutCancel(c.Request().Context()), slog.LevelWarn, p.code,
			slog.String("request_id", reqID), slog.String("error", err.Error()))
	}
	s.writeProblem(c, p, reqID)
}

func (s *Server) writeProblem(c echo.Context, p *apiError, reqID string) {
	body := Problem{
		Type:           ProblemTypeBase + p.code,
		Title:          problemDocByCode[p.code].Title,
		Status:         p.status,
		Detail:         p.detail,
		Code:           p.code,
		Errors:         p.fields,
		CurrentVersion: p.currentVersion,
		CurrentStatus:  p.currentStatus,
		// Log every problem, not only 500s.
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
