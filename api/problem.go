package api

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-playground/validator/v10"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
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
	// judged against: the saved search's version now.
	CurrentVersion *int64 `json:"current_version,omitempty"`
}

// titles holds the fixed title of each code.
var titles = map[string]string{
	CodeMissingIdempotencyKey: "Idempotency-Key header missing",
	CodeInvalidIdempotencyKey: "Idempotency-Key header invalid",
	CodeMalformedJSON:         "Malformed JSON body",
	CodeValidationFailed:      "Validation failed",
	CodeUnauthorized:          "Unauthorized",
	CodeNotFound:              "Not found",
	CodeMethodNotAllowed:      "Method not allowed",
	CodeInProgress:            "Request in progress",
	CodeKeyReused:             "Idempotency-Key reused",
	CodePayloadTooLarge:       "Payload too large",
	CodeUnsupportedMediaType:  "Unsupported media type",
	CodeUnavailable:           "Service unavailable",
	CodeInternal:              "Internal server error",
	CodeAlreadyRegistered:     "Already registered",
	CodeMissingDeliveryID:     "webhook-id header missing",
	CodeInvalidDeliveryID:     "webhook-id header invalid",
	CodeRateLimited:           "Too many requests in flight",
	CodePreconditionFailed:    "Precondition failed",
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
	// change to.
	currentVersion *int64
	etag           string
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

// errorTable maps the sentinel errors of the domain packages to their
// answer, checked with errors.Is in order. It is the one place a domain
// outcome becomes an HTTP status; a domain error missing here is a 500.
var errorTable = []struct {
	err    error
	status int
	code   string
	detail string
}{
	{savedsearch.ErrNotFound, http.StatusNotFound, CodeNotFound, "no such saved search in your organization"},
	{admission.ErrNotFound, http.StatusNotFound, CodeNotFound, "no such saved search in your organization"},
	{snapshot.ErrNotFound, http.StatusNotFound, CodeNotFound, "no such snapshot in your organization"},
	{runs.ErrNotFound, http.StatusNotFound, CodeNotFound, "no such run in your organization"},
	{admission.ErrKeyReused, http.StatusUnprocessableEntity, CodeKeyReused,
		"this Idempotency-Key was already used for a different request; use a new key"},
	{runs.ErrKeyReused, http.StatusUnprocessableEntity, CodeKeyReused,
		"this Idempotency-Key was already used for a different request; use a new key"},
	{providerjobs.ErrNotFound, http.StatusNotFound, CodeNotFound, "no such provider job in your organization"},
	{providerjobs.ErrRunNotFound, http.StatusNotFound, CodeNotFound, "no such run in your organization"},
	{providerjobs.ErrAlreadyRegistered, http.StatusConflict, CodeAlreadyRegistered,
		"this provider job id is registered already in your organization, for another run; " +
			"a provider job id names one job of an organization"},
}

// problemFor decides the answer to err. It never returns a body that
// quotes err itself unless err is an *apiError, whose detail the API wrote.
func problemFor(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return echoProblem(he)
	}
	if errors.As(err, new(*savedsearch.VersionMismatchError)) {
		return preconditionFailed(err).(*apiError)
	}
	if errors.Is(err, idempotency.ErrClaimInFlight) {
		// Retry-After is a hint of when the answer is likely ready, not
		// the lease: a preparation or a keyed create is one short
		// transaction, done in milliseconds, while the lease is the bound
		// on recovering from a crashed holder. So a retry comes after
		// inProgressRetryAfter, or sooner when the lease passes sooner;
		// a client that can wait asks for Prefer: wait instead.
		retryAfter := inProgressRetryAfter
		var inFlight *idempotency.InFlightError
		if errors.As(err, &inFlight) && inFlight.RetryAfter > 0 {
			retryAfter = min(inFlight.RetryAfter, inProgressRetryAfter)
		}
		return &apiError{status: http.StatusConflict, code: CodeInProgress,
			detail:     "a request with this Idempotency-Key is still being prepared; retry after the Retry-After delay",
			retryAfter: retryAfter}
	}
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			return &apiError{status: row.status, code: row.code, detail: row.detail}
		}
	}
	var keyErr *idempotency.InputError
	if errors.As(err, &keyErr) && keyErr.Field == "key" {
		return &apiError{status: http.StatusBadRequest, code: CodeInvalidIdempotencyKey, detail: errKeyInvalid.Error()}
	}
	if isInvalid(err) {
		// The API checks every body before a store sees it, so this is a
		// rule the store has and the API lacks: still the client's input.
		return validationFailed(domainFields(err)...).(*apiError)
	}
	if isCursorError(err) {
		return validationFailed(FieldError{Field: "cursor", Message: "is not a cursor this API returned"}).(*apiError)
	}
	if isUnavailable(err) {
		return &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable,
			detail: "the service cannot reach its database; retry later", retryAfter: unavailableRetryAfter}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22") {
		// Data exception: a value the request carried that PostgreSQL
		// cannot store. The body checks should have caught it first; this
		// keeps such input from ever becoming a 500.
		return validationFailed(FieldError{Field: "", Message: "holds a value that cannot be stored"}).(*apiError)
	}
	return nil
}

// isInvalid reports whether err is a domain package's refusal of input.
func isInvalid(err error) bool {
	return errors.Is(err, savedsearch.ErrInvalid) || errors.Is(err, admission.ErrInvalid) ||
		errors.Is(err, runs.ErrInvalid) || errors.Is(err, providerjobs.ErrInvalid)
}

// domainFields names the fields of validator errors a domain package
// wrapped. Its validator speaks Go field names, which become the JSON names
// by the snake_case convention every request type follows.
func domainFields(err error) []FieldError {
	var limits *savedsearch.LimitError
	if errors.As(err, &limits) {
		fields := make([]FieldError, 0, min(len(limits.Fields), maxFieldErrors))
		for _, f := range limits.Fields[:min(len(limits.Fields), maxFieldErrors)] {
			fields = append(fields, FieldError{Field: f.Field, Message: f.Message})
		}
		return fields
	}
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		return []FieldError{{Field: "", Message: "is invalid"}}
	}
	fields := make([]FieldError, 0, min(len(verrs), maxFieldErrors))
	for _, fe := range verrs[:min(len(verrs), maxFieldErrors)] {
		_, path, _ := strings.Cut(fe.Namespace(), ".")
		fields = append(fields, FieldError{Field: snakePath(path), Message: ruleMessage(fe)})
	}
	return fields
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

// isCursorError reports whether err is a domain package's invalid cursor.
func isCursorError(err error) bool {
	return errors.Is(err, savedsearch.ErrInvalidCursor) || errors.Is(err, runs.ErrInvalidCursor) ||
		errors.Is(err, snapshot.ErrInvalidCursor)
}

// isUnavailable reports whether err says the database could not be used
// now, so that the same request may succeed later: no connection, a lost
// connection, a timeout, a server shutting down or refusing connections, or
// a transaction the server aborted for a conflict the caller did not retry.
func isUnavailable(err error) bool {
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "53"), // insufficient resources
			strings.HasPrefix(pgErr.Code, "57"), // operator intervention: shutdown, cancel, timeout
			pgErr.Code == "25P03",               // idle_in_transaction_session_timeout: the session was ended
			pgErr.Code == "40001",               // serialization_failure
			pgErr.Code == "40P01",               // deadlock_detected
			pgErr.Code == "55P03":               // lock_not_available
			return true
		}
		return false
	case errors.As(err, &connectErr),
		pgconn.SafeToRetry(err),
		pgconn.Timeout(err),
		errors.Is(err, pgconn.ErrConnClosed),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF),
		errors.As(err, &netErr):
		return true
	}
	return false
}

// echoProblem maps the errors echo raises itself (no route, wrong method).
func echoProblem(he *echo.HTTPError) *apiError {
	switch he.Code {
	case http.StatusNotFound:
		return &apiError{status: http.StatusNotFound, code: CodeNotFound, detail: "no such resource"}
	case http.StatusMethodNotAllowed:
		return &apiError{status: http.StatusMethodNotAllowed, code: CodeMethodNotAllowed,
			detail: "this resource does not support the request method"}
	case http.StatusRequestEntityTooLarge:
		return &apiError{status: he.Code, code: CodePayloadTooLarge, detail: "the request body is too large"}
	case http.StatusUnsupportedMediaType:
		return &apiError{status: he.Code, code: CodeUnsupportedMediaType, detail: "the request body must be JSON"}
	case http.StatusUnauthorized:
		return &apiError{status: he.Code, code: CodeUnauthorized, detail: "a valid bearer token is required"}
	}
	return nil // anything else echo raises is not expected: a 500
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
			s.logger.LogAttrs(c.Request().Context(), slog.LevelDebug, "request canceled by client",
				slog.String("request_id", reqID))
			p = &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable,
				detail: "the request was canceled", retryAfter: unavailableRetryAfter}
		} else {
			s.logger.LogAttrs(context.WithoutCancel(c.Request().Context()), slog.LevelError, "internal error",
				slog.String("request_id", reqID),
				slog.String("method", c.Request().Method),
				slog.String("route", c.Path()),
				slog.String("error", err.Error()))
			p = &apiError{status: http.StatusInternalServerError, code: CodeInternal,
				detail: "the server failed to answer; report the request_id if it persists"}
		}
	} else if p.status == http.StatusServiceUnavailable || isInvalid(err) {
		// Worth a look: a database in trouble, or a domain rule the API's
		// own checks do not know yet.
		s.logger.LogAttrs(context.WithoutCancel(c.Request().Context()), slog.LevelWarn, p.code,
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
		// Every problem, not only a 500: a client's 409 or 422 is worth
		// finding in the log too.
		RequestID: reqID,
	}
	h := c.Response().Header()
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfterSeconds(p.retryAfter)))
	}
	if p.status == http.StatusUnauthorized {
		h.Set(echo.HeaderWWWAuthenticate, cmp.Or(p.challenge, bearerChallenge))
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

// retryAfterSeconds rounds d up to whole seconds, at least 1: a client told
// to retry after 0 seconds would meet the same live lease.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
