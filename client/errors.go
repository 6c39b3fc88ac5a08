package client

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinels of the API's problem codes. An [*APIError] matches, with
// errors.Is, the sentinel of its code; an answer without a known code (a
// proxy's 503 page, say) matches by its status the sentinels named so.
var (
	// ErrMissingIdempotencyKey: a start without an Idempotency-Key (400).
	ErrMissingIdempotencyKey = sentinel("missing_idempotency_key")
	// ErrInvalidIdempotencyKey: a key the server refuses (400), or one the
	// client refuses before sending it: not 1 to 255 printable ASCII
	// characters, or starting or ending with a space.
	ErrInvalidIdempotencyKey = sentinel("invalid_idempotency_key")
	// ErrMalformedJSON: a body that is not JSON (400).
	ErrMalformedJSON = sentinel("malformed_json")
	// ErrValidation: a field out of its rules (400 validation_failed); the
	// APIError's Errors name the fields.
	ErrValidation = sentinel("validation_failed")
	// ErrUnauthorized: no valid bearer token (401).
	ErrUnauthorized = sentinel("unauthorized")
	// ErrNotFound: no such resource in the caller's organization (404).
	ErrNotFound = sentinel("not_found")
	// ErrMethodNotAllowed (405).
	ErrMethodNotAllowed = sentinel("method_not_allowed")
	// ErrInProgress: another request with the same Idempotency-Key is
	// still being prepared (409); the client retries it until its attempts
	// or the caller's deadline run out.
	ErrInProgress = sentinel(codeInProgress)
	// ErrKeyReused: the Idempotency-Key was used before for a different
	// request (422). Never retried: the key names the other request.
	ErrKeyReused = sentinel("key_reused")
	// ErrAlreadyRegistered: the organization registered the provider job
	// id with that provider already, for another Run (409). Never retried:
	// the id names the other Run's job.
	ErrAlreadyRegistered = sentinel("already_registered")
	// ErrPreconditionFailed: a change made with If-Match (IfVersion) to a
	// saved search at another version (412); the APIError's
	// CurrentVersion says which. Never retried: read it again and reapply.
	ErrPreconditionFailed = sentinel("precondition_failed")
	// ErrPayloadTooLarge (413).
	ErrPayloadTooLarge = sentinel("payload_too_large")
	// ErrUnsupportedMediaType (415).
	ErrUnsupportedMediaType = sentinel("unsupported_media_type")
	// ErrTooManyRequests: 429, from whatever limits the rate in front of
	// searchd.
	ErrTooManyRequests = errors.New("searchd: too many requests")
	// ErrUnavailable: the service cannot serve now (503).
	ErrUnavailable = sentinel("unavailable")
	// ErrInternal: a server bug (500); report the APIError's RequestID.
	ErrInternal = sentinel("internal")
	// ErrInsufficientScope: the token is valid but its role does not open
	// the route (403): a runtime credential on a user route, or a user
	// token on the runtime's.
	ErrInsufficientScope = sentinel("insufficient_scope")
	// ErrRunFinished: a status report that would change a Run that
	// finished (409); the APIError's CurrentStatus and CurrentVersion say
	// how it finished. Never retried: the outcome is final.
	ErrRunFinished = sentinel("run_finished")
)

// codeErrors maps each problem code of the API to its sentinel; sentinel
// fills it.
var codeErrors = map[string]error{}

// sentinel returns the sentinel of code, "searchd: " and the code, and
// files it under code in codeErrors.
func sentinel(code string) error {
	err := errors.New("searchd: " + code)
	codeErrors[code] = err
	return err
}

// statusErrors maps a status to a sentinel for answers whose code is
// missing or unknown: those statuses mean one thing whoever sent them.
var statusErrors = map[int]error{
	http.StatusUnauthorized:          ErrUnauthorized,
	http.StatusNotFound:              ErrNotFound,
	http.StatusMethodNotAllowed:      ErrMethodNotAllowed,
	http.StatusRequestEntityTooLarge: ErrPayloadTooLarge,
	http.StatusUnsupportedMediaType:  ErrUnsupportedMediaType,
	http.StatusTooManyRequests:       ErrTooManyRequests,
	http.StatusServiceUnavailable:    ErrUnavailable,
}

// codeInProgress is the one 409 that is retried.
const codeInProgress = "in_progress"

// APIError is an answer other than 2xx: the RFC 9457 problem document the
// server sent, or what could be made of a body that is not one.
type APIError struct {
	// Status is the HTTP status.
	Status int
	// Code is the problem's machine code, such as "not_found"; empty when
	// the body was not a problem document.
	Code string
	// Title and Detail are the problem's human texts. For a body that is
	// not a problem document, Title is the status text and Detail the start
	// of the body.
	Title, Detail string
	// Errors names the refused fields of a validation_failed problem.
	Errors []FieldError
	// RequestID is the server's id of the request (the body's request_id,
	// else the X-Request-Id header), to match a report with its log.
	RequestID string
	// RetryAfter is the delay the Retry-After header asked for; zero when
	// absent or unreadable.
	RetryAfter time.Duration
	// CurrentVersion is the version a precondition_failed change was
	// judged against, or of the Run a run_finished report was refused
	// for; zero otherwise.
	CurrentVersion int64
	// CurrentStatus is the status a run_finished Run finished with; empty
	// otherwise.
	CurrentStatus string
}

// Error returns the status, the code and the detail, with the refused
// fields and the request id when there are any.
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("searchd: ")
	b.WriteString(strconv.Itoa(e.Status))
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if msg := cmp.Or(e.Detail, e.Title); msg != "" {
		b.WriteString(": " + msg)
	}
	for i, f := range e.Errors {
		sep := "; "
		if i == 0 {
			sep = " ("
		}
		b.WriteString(sep + cmp.Or(f.Field, "body") + " " + f.Message)
		if i == len(e.Errors)-1 {
			b.WriteString(")")
		}
	}
	if e.RequestID != "" && e.Status >= 500 {
		b.WriteString(" [request_id " + e.RequestID + "]")
	}
	return b.String()
}

// Is reports whether target is the sentinel of e's code or, when the code
// is missing or unknown, of e's status.
func (e *APIError) Is(target error) bool {
	if s, ok := codeErrors[e.Code]; ok {
		return s == target
	}
	s, ok := statusErrors[e.Status]
	return ok && s == target
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// maxDetail bounds the Detail made of a body that is not a problem.
const maxDetail = 200

// newAPIError makes the error of an answer with status and header whose
// body is body.
func newAPIError(status int, header http.Header, body []byte) *APIError {
	e := &APIError{
		Status:     status,
		RequestID:  header.Get("X-Request-Id"),
		RetryAfter: parseRetryAfter(header.Get("Retry-After"), time.Now()),
	}
	var p struct {
		Title     string       `json:"title"`
		Detail    string       `json:"detail"`
		Code      string       `json:"code"`
		RequestID string       `json:"request_id"`
		Errors    []FieldError `json:"errors"`
		Current   int64        `json:"current_version"`
		Status    string       `json:"current_status"`
	}
	if json.Unmarshal(body, &p) == nil && p.Code != "" {
		e.Code, e.Title, e.Detail, e.Errors = p.Code, p.Title, p.Detail, p.Errors
		e.CurrentVersion, e.CurrentStatus = p.Current, p.Status
		e.RequestID = cmp.Or(p.RequestID, e.RequestID)
		return e
	}
	e.Title = http.StatusText(status)
	detail := bytes.TrimSpace(body)
	if len(detail) > maxDetail {
		detail = append(detail[:maxDetail:maxDetail], "..."...)
	}
	e.Detail = string(detail)
	return e
}

// parseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3): whole
// seconds, or an HTTP date, which counts from now. It returns zero for an
// empty, negative, past or unreadable value.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		// Beyond this the value is nonsense; cap it rather than overflow.
		return time.Duration(min(secs, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// transportError is an attempt that got no HTTP answer.
type transportError struct {
	method, path string
	err          error
	// attemptTimedOut is set when the attempt's own timeout ended it while
	// the caller's context was still live.
	attemptTimedOut bool
}

func (e *transportError) Error() string {
	msg := fmt.Sprintf("searchd client: %s %s: %v", e.method, e.path, e.err)
	if e.attemptTimedOut {
		msg += " (attempt timed out)"
	}
	return msg
}

func (e *transportError) Unwrap() error { return e.err }
