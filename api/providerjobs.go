package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/fairq"
	"github.com/searchd/searchd/providerjobs"
)

// Headers of a provider callback: those of Standard Webhooks
// (https://www.standardwebhooks.com/).
const (
	// HeaderDeliveryID carries the provider's id of one delivery, the same
	// on every redelivery: the key a delivery is claimed under, so a
	// redelivery is recognised. It is signed, so a captured body cannot be
	// replayed under a fresh id.
	HeaderDeliveryID = standardwebhooks.HeaderWebhookID
	// HeaderTimestamp carries the time the delivery was signed, in unix
	// seconds. It is signed, and a delivery is accepted only within
	// [CallbackTolerance] of the server's clock, so a captured delivery
	// cannot be replayed later.
	HeaderTimestamp = standardwebhooks.HeaderWebhookTimestamp
	// HeaderSignature carries space-separated signatures, each a version,
	// a comma and the signature. Version v1 is the base64 HMAC-SHA256 of
	// "<webhook-id>.<webhook-timestamp>.<raw body>" under the provider's
	// secret; other versions are ignored, and one matching v1 signature
	// authenticates the delivery (so a provider can rotate its secret).
	HeaderSignature = standardwebhooks.HeaderWebhookSignature
)

// DefaultCallbackMaxBodyBytes is the default limit on a callback body. A
// callback is a job's status and result; anyone can send one, and its body
// is held until its signature is checked, so the limit is its own, well
// below [DefaultMaxBodyBytes].
const DefaultCallbackMaxBodyBytes = 1 << 20

// CallbackTolerance is how far the webhook-timestamp of a callback may be
// from the server's clock, either way: the window in which a captured
// delivery could be re-sent at all. Within it, a re-sent delivery carries
// its delivery id, which the idempotency plane remembers far longer (the
// webhook.* retention), so it is a duplicate. Standard Webhooks' value.
const CallbackTolerance = 5 * time.Minute

// signatureVersion starts every signature this server verifies.
const signatureVersion = "v1"

// Answers of a callback, in its "status" member.
const (
	callbackAccepted = "accepted"
	callbackDropped  = "dropped"
	// callbackQueued: stored in the inbox, applied later by the applier.
	callbackQueued = "queued"
)

// callbackPath returns the path a provider calls back on about job: the
// provider's name and searchd's id of the job, which only the job's
// organization learns (a provider job id may be registered by several
// organizations, each for a job of its own).
func callbackPath(job *providerjobs.Job) string {
	return "/v1/callbacks/" + job.Provider + "/jobs/" + job.ID.String()
}

// providerJobResponse is a job as the API shows it: with the callback path
// the caller hands to the provider.
type providerJobResponse struct {
	*providerjobs.Job
	CallbackPath string `json:"callback_path"`
}

func jobResponse(job *providerjobs.Job) providerJobResponse {
	return providerJobResponse{Job: job, CallbackPath: callbackPath(job)}
}

// answerJob answers job with its callback path, 200.
func answerJob(c echo.Context, job *providerjobs.Job) error { return answerOK(c, jobResponse(job)) }

// providerSecrets validates the provider secrets of [Deps] and returns a
// copy of them, so a caller changing its map later changes nothing here. A
// secret is used as its raw bytes: the HMAC key of the provider's
// signatures.
func providerSecrets(in map[string][]byte) (map[string][]byte, error) {
	out := make(map[string][]byte, len(in))
	for name, secret := range in {
		if err := providerjobs.ValidateProvider(name); err != nil {
			return nil, fmt.Errorf("api: Deps.ProviderSecrets: %w", err)
		}
		if len(secret) == 0 {
			return nil, fmt.Errorf("api: Deps.ProviderSecrets: the secret of provider %q is empty", name)
		}
		out[name] = bytes.Clone(secret)
	}
	return out, nil
}

// registerProviderJobRequest is the body of POST /v1/provider-jobs. The
// struct rules bound the sizes; registerProviderJob checks the shapes.
type registerProviderJobRequest struct {
	RunID         string `json:"run_id" validate:"required,max=100"`
	Provider      string `json:"provider" validate:"required,max=100"`
	ProviderJobID string `json:"provider_job_id" validate:"required,max=255"`
}

// registerProviderJob registers a job for a Run of the caller's
// organization: 201 with the job and its callback_path, which the caller
// hands to the provider. The provider must be one this server holds a
// callback secret for: a job whose callbacks could never be authenticated
// would never move, and nothing would say why.
//
// A registration is safe to retry: the same provider job id registered
// again by the organization for the same Run answers 200 with the job as
// it is now (Location names it too); for another Run, 409
// already_registered, with nothing written: a provider's job id names one
// job of an organization. Another organization's jobs play no part: it may
// register the same id, gets its own job (201), and no answer tells either
// whether the other holds it. A body that fails the checks is 400
// validation_failed; a Run the organization does not have is 404.
func (s *Server) registerProviderJob(c echo.Context) error {
	key, hasKey, err := s.optionalKey(c)
	if err != nil {
		return err
	}
	var req registerProviderJobRequest
	if err := s.decodeBody(c, &req, bodyMandatory); err != nil {
		return err
	}
	var fields []FieldError
	runID, err := uuid.Parse(req.RunID)
	if err != nil || runID == uuid.Nil {
		fields = append(fields, FieldError{Field: "run_id", Message: "must be a UUID"})
	}
	if providerjobs.ValidateProvider(req.Provider) != nil {
		fields = append(fields, FieldError{Field: "provider",
			Message: "must be a lower-case dotted identifier: letters a-z, digits, '_' and '-', with dots between them"})
	} else if _, ok := s.d.ProviderSecrets[req.Provider]; !ok {
		fields = append(fields, FieldError{Field: "provider",
			Message: "is not a provider this server holds a callback secret for"})
	}
	if providerjobs.ValidateJobID(req.ProviderJobID) != nil {
		fields = append(fields, FieldError{Field: "provider_job_id",
			Message: "must be 1 to 255 characters without control characters"})
	}
	if len(fields) > 0 {
		return validationFailed(fields...)
	}
	org := principal(c).OrganizationID
	params := providerjobs.RegisterParams{RunID: runID, Provider: req.Provider, ProviderJobID: req.ProviderJobID}
	var (
		job               *providerjobs.Job
		created, replayed bool
	)
	if hasKey {
		// On the plane: the first request with the key registers (201, or
		// 200 when the job was registered for the Run before, as without
		// a key); a repeat answers the job it registered, 200 with
		// Idempotent-Replayed, whatever has been registered since.
		job, created, replayed, err = s.d.ProviderJobs.RegisterOnce(c.Request().Context(), org, key, params)
	} else {
		job, created, err = s.d.ProviderJobs.Register(c.Request().Context(), org, params)
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/provider-jobs/"+job.ID.String())
	return c.JSON(keyedStatus(c, created, replayed), jobResponse(job))
}

// answerDrops answers the deliveries of a job that were dropped
// (duplicate, hash_mismatch, job_mismatch), newest first: the audit the
// drops table keeps, readable by the job's organization alone.
func answerDrops(c echo.Context, drops []providerjobs.Drop) error {
	return answerOK(c, struct {
		Items []providerjobs.Drop `json:"items"`
	}{drops})
}

// callbackAnswer is the body of every callback a provider signed: accepted,
// or dropped with its reason. Both are acknowledgements.
type callbackAnswer struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

var (
	errBadSignature = &apiError{status: http.StatusUnauthorized, code: CodeUnauthorized, challenge: signatureChallenge,
		detail: "a valid webhook-signature header is required (Standard Webhooks): v1, a comma and the base64 " +
			"HMAC-SHA256 of \"<webhook-id>.<webhook-timestamp>.<raw body>\" under the provider's secret"}
	errBadTimestamp = &apiError{status: http.StatusUnauthorized, code: CodeUnauthorized, challenge: signatureChallenge,
		detail: "a webhook-timestamp header is required: one value, the time the delivery was signed in unix seconds"}
	errStaleTimestamp = &apiError{status: http.StatusUnauthorized, code: CodeUnauthorized, challenge: signatureChallenge,
		detail: "the webhook-timestamp is more than 5 minutes from the server's clock: a delivery is accepted only " +
			"within 5 minutes of its signing, so sign every attempt afresh (same webhook-id, new timestamp)"}
	errDeliveryIDMissing = &apiError{status: http.StatusBadRequest, code: CodeMissingDeliveryID,
		detail: "the webhook-id header is required: without it a redelivery cannot be recognised"}
	errDeliveryIDInvalid = &apiError{status: http.StatusBadRequest, code: CodeInvalidDeliveryID,
		detail: "the webhook-id header must be one value of 1 to 255 bytes of UTF-8 without control characters"}
)

// receiveCallback takes a provider's callback about one of its jobs, on
// the path its registration's callback_path names. It is not behind the
// bearer token: the provider authenticates with Standard Webhooks
// signatures. The checks run in this order, and only a delivery that
// passes the signature can leave a trace; every refusal below records
// nothing. Everything up to the body is decided on the path and the
// headers alone, before a byte of the body is read: anyone can send a
// callback, so refusing a stranger costs no memory or work in proportion
// to what the stranger sends.
//
//   - an unknown provider; a webhook-signature that is missing, repeated,
//     or holds no well-formed v1 signature (v1, a comma, the base64 of 32
//     bytes); a webhook-timestamp that is missing, repeated or not unix
//     seconds: 401 unauthorized;
//   - a webhook-timestamp more than [CallbackTolerance] from the server's
//     clock, either way: 401 unauthorized, with a detail that says so. A
//     captured delivery cannot be re-sent after the window, and within it
//     its delivery id makes it a duplicate;
//   - a missing webhook-id: 400 missing_delivery_id; a repeated one, or
//     one that cannot be a claim key: 400 invalid_delivery_id. A delivery
//     without an id cannot be told from its redeliveries, so it cannot be
//     applied safely; and the id is checked before the signature because
//     the signature covers it;
//   - the body is read with the callback's own limit
//     (Deps.CallbackMaxBodyBytes): a declared length beyond it is refused
//     before a byte is read, and a body of unknown length after the
//     limit and one byte, 413 payload_too_large. The HMAC is computed as
//     the body streams in, and the body is parsed only if one v1
//     signature equals it, compared in constant time; else 401
//     unauthorized;
//   - a body that is not a JSON object: 400 malformed_json; one whose
//     job_id, status or result have the wrong shape: 400
//     validation_failed. Members beyond those three are ignored, so a
//     provider may add some without breaking its deliveries. The
//     Content-Type is not checked: the signature, not the label,
//     vouches for the bytes;
//   - then it takes a seat in the admission queue, charged to the
//     provider (package fairq): refused one, it answers 429 rate_limited
//     with Retry-After, having stored nothing, and the provider redelivers;
//   - then the delivery is processed (see package providerjobs): it is
//     landed in the inbox and committed before any answer, then applied.
//     The path's job_id names the job (searchd's id of it), and the
//     body's job_id must be the provider's id registered for it. The
//     answer is 200 {"status": "accepted"}, 200 {"status": "queued"}
//     (stored, and applied once by the applier) or 200 {"status":
//     "dropped", "reason": ...} (a path naming no job of the provider
//     drops as unknown_job, a body naming another provider job id as
//     job_mismatch, neither stored in the inbox). Every 200 means the delivery is durable. A
//     duplicate is not an error to the provider, and a 5xx would make it
//     retry a delivery that was handled. A database that cannot be
//     reached answers 503 unavailable with Retry-After, so the provider
//     redelivers; nothing was stored then.
func (s *Server) receiveCallback(c echo.Context) error {
	provider := pathParam(c, "provider")
	secret, known := s.d.ProviderSecrets[provider]
	if !known {
		return errBadSignature
	}
	h := c.Request().Header
	sig, ok := signatureHeader(h)
	if !ok {
		return errBadSignature
	}
	ts, err := s.timestampHeader(h)
	if err != nil {
		return err
	}
	deliveryID, err := deliveryIDHeader(h)
	if err != nil {
		return err
	}
	body, err := s.readSignedBody(c, secret, deliveryID, ts, sig)
	if err != nil {
		return err
	}
	update, err := parseCallbackBody(body)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	// A seat, charged to the provider's flow, once the signature holds:
	// a forged callback never takes one, and a flood of genuine ones
	// waits its turn beside the organizations' requests.
	seat, err := s.acquire(ctx, fairq.Flow{Kind: fairq.KindProvider, Name: provider}, 1)
	if err != nil {
		return err
	}
	defer seat.Release()
	out, err := s.d.ProviderJobs.Receive(ctx, providerjobs.Delivery{
		Provider:   provider,
		JobID:      pathParam(c, "job_id"),
		DeliveryID: deliveryID,
		Body:       body,
		Update:     update,
	})
	if err != nil {
		return err
	}
	if out.Accepted {
		return c.JSON(http.StatusOK, callbackAnswer{Status: callbackAccepted})
	}
	if out.Queued {
		return c.JSON(http.StatusOK, callbackAnswer{Status: callbackQueued})
	}
	s.d.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelInfo, "callback dropped",
		slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)),
		slog.String("provider", provider),
		slog.String("delivery_id", deliveryID),
		slog.String("reason", string(out.Reason)))
	return c.JSON(http.StatusOK, callbackAnswer{Status: callbackDropped, Reason: string(out.Reason)})
}

// pathParam returns the path parameter name, unescaped. Echo matches on the
// escaped path when the path holds an escape its decoded form would lose
// (an encoded slash, "%2F"), and then hands the parameter out escaped.
func pathParam(c echo.Context, name string) string {
	v := c.Param(name)
	if c.Request().URL.RawPath == "" {
		return v
	}
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// signatureHeader returns the one webhook-signature of h, trimmed, or
// false unless it holds a well-formed v1 signature ([HeaderSignature]);
// entries of other versions are ignored.
func signatureHeader(h http.Header) (string, bool) {
	values := h.Values(HeaderSignature)
	if len(values) != 1 {
		return "", false
	}
	v := strings.TrimSpace(values[0])
	for entry := range strings.SplitSeq(v, " ") {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != signatureVersion {
			continue
		}
		if mac, err := base64.StdEncoding.Strict().DecodeString(sig); err == nil && len(mac) == sha256.Size {
			return v, true
		}
	}
	return "", false
}

// timestampHeader returns the webhook-timestamp of h, or errBadTimestamp
// unless there is exactly one, a non-negative count of unix seconds in
// decimal without a sign or leading zeros (the text is signed, so it must
// read back as itself), or errStaleTimestamp when it is more than
// [CallbackTolerance] from the server's clock.
func (s *Server) timestampHeader(h http.Header) (string, error) {
	values := h.Values(HeaderTimestamp)
	if len(values) != 1 {
		return "", errBadTimestamp
	}
	v := strings.TrimSpace(values[0])
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil || secs < 0 || strconv.FormatInt(secs, 10) != v {
		return "", errBadTimestamp
	}
	now := s.d.Now()
	// Compared in seconds: a time.Duration cannot hold every int64 of
	// seconds, and an absurd timestamp must not overflow into the window.
	limit := int64(CallbackTolerance / time.Second)
	if d := now.Unix() - secs; d > limit || d < -limit {
		return "", errStaleTimestamp
	}
	return v, nil
}

// deliveryIDHeader returns the webhook-id of h, or errDeliveryIDMissing
// or errDeliveryIDInvalid. The id becomes a claim key, so the plane's rule
// for keys decides what is valid.
func deliveryIDHeader(h http.Header) (string, error) {
	values := h.Values(HeaderDeliveryID)
	switch {
	case len(values) == 0, len(values) == 1 && strings.TrimSpace(values[0]) == "":
		return "", errDeliveryIDMissing
	case len(values) > 1:
		return "", errDeliveryIDInvalid
	}
	id := strings.TrimSpace(values[0])
	if idempotency.ValidateKey(id) != nil {
		return "", errDeliveryIDInvalid
	}
	return id, nil
}

// readSignedBody returns the callback body of c when one v1 signature of
// sig is its HMAC under secret ([HeaderSignature]), fed as the body is
// read; else the 413 of the callback limit (a declared length over it
// before reading) or errBadSignature.
//
// This is Standard Webhooks' verification, done here rather than by the
// reference library, whose Verify takes the whole body and copies it
// again into the signed message: streamed, the only buffer is the body
// itself, sized by its declared length, which the limit bounds, charged to
// the budget of bodies awaiting their signature and bounded in time (see
// readCallbackBody: 503 when either is spent).
func (s *Server) readSignedBody(c echo.Context, secret []byte, deliveryID, ts, sig string) ([]byte, error) {
	r := c.Request()
	if r.ContentLength > s.d.CallbackMaxBodyBytes {
		return nil, tooLarge("callback", s.d.CallbackMaxBodyBytes)
	}
	mac := hmac.New(sha256.New, secret)
	_, _ = io.WriteString(mac, deliveryID+"."+ts+".")
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		var charged int64
		var err error
		if body, charged, err = s.readCallbackBody(c, mac); err != nil {
			return nil, err
		}
		// Checked, the body is the provider's or refused: either way it
		// no longer awaits its signature.
		defer s.callbackBodies.give(charged)
	}
	if !signatureMatches(sig, mac.Sum(nil)) {
		return nil, errBadSignature
	}
	return body, nil
}

// signatureMatches reports whether one v1 entry of the webhook-signature
// sig is the standard base64 of mac, compared in constant time.
func signatureMatches(sig string, mac []byte) bool {
	var want [44]byte // base64 of an HMAC-SHA256
	base64.StdEncoding.Encode(want[:], mac)
	matched := false
	for entry := range strings.SplitSeq(sig, " ") {
		version, got, ok := strings.Cut(entry, ",")
		// Every entry is compared, so the time taken says nothing about
		// which one matched.
		if ok && version == signatureVersion && hmac.Equal([]byte(got), want[:]) {
			matched = true
		}
	}
	return matched
}

// parseCallbackBody reads a verified callback body: a JSON object with
// job_id (a string), status (running, succeeded or failed) and result (an
// object; absent or null for none). Member names match exactly; other
// members are ignored. The whole body must still pass the checks every
// body of this API does (UTF-8, one value, no duplicate names, no NUL, a
// bounded depth), because result is stored as jsonb.
func parseCallbackBody(buf []byte) (providerjobs.Update, error) {
	if len(bytes.TrimSpace(buf)) == 0 {
		return providerjobs.Update{}, malformedJSON("the request body is empty; a callback is a JSON object")
	}
	var members map[string]json.RawMessage // each value checked as free-form (readFree)
	if err := decodeJSON(buf, &members); err != nil {
		return providerjobs.Update{}, err
	}
	var u providerjobs.Update
	var fields []FieldError
	if err := stringMember(members, "job_id", &u.ProviderJobID); err != nil {
		fields = append(fields, *err)
	}
	var status string
	if err := stringMember(members, "status", &status); err != nil {
		fields = append(fields, *err)
	}
	u.Status = providerjobs.Status(status)
	if status != "" && u.Status != providerjobs.StatusRunning && !u.Status.Terminal() {
		fields = append(fields, FieldError{Field: "status", Message: "must be one of: running, succeeded, failed"})
	}
	switch raw := bytes.TrimSpace(members["result"]); {
	case len(raw) == 0, string(raw) == "null":
	case raw[0] == '{':
		u.Result = json.RawMessage(raw)
	default:
		fields = append(fields, FieldError{Field: "result", Message: "must be an object"})
	}
	if len(fields) > 0 {
		return providerjobs.Update{}, validationFailed(fields...)
	}
	return u, nil
}

// stringMember decodes the required, non-empty string member name of m
// into dst, or names what is wrong with it.
func stringMember(m map[string]json.RawMessage, name string, dst *string) *FieldError {
	raw, ok := m[name]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return &FieldError{Field: name, Message: "is required"}
	}
	if json.Unmarshal(raw, dst) != nil {
		return &FieldError{Field: name, Message: "must be a string"}
	}
	if *dst == "" {
		return &FieldError{Field: name, Message: "is required"}
	}
	return nil
}
