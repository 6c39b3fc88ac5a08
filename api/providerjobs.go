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
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/providerjobs"
)

// Headers of a provider callback (https://www.standardwebhooks.com/).
const (
	// HeaderDeliveryID is the delivery's id, the same on redeliveries and
	// signed; deliveries are claimed under it.
	HeaderDeliveryID = standardwebhooks.HeaderWebhookID
	// HeaderTimestamp is the signing time in unix seconds, accepted
	// within [CallbackTolerance].
	HeaderTimestamp = standardwebhooks.HeaderWebhookTimestamp
	// HeaderSignature holds space-separated "v1,<base64 HMAC-SHA256 of
	// id.timestamp.body>" entries; one match authenticates, so secrets can
	// rotate. Other versions are ignored.
	HeaderSignature = standardwebhooks.HeaderWebhookSignature
)

// DefaultCallbackMaxBodyBytes is the default callback body limit, well
// below [DefaultMaxBodyBytes] since the body is buffered unverified.
const DefaultCallbackMaxBodyBytes = 1 << 20

// CallbackTolerance is how far a webhook-timestamp may be from the
// server's clock, either way. Within it, a replay is caught as a duplicate
// delivery id.
const CallbackTolerance = 5 * time.Minute

// signatureVersion starts every signature this server verifies.
const signatureVersion = "v1"

// providerJobResponse is a job with its callback path, named by
// searchd's job id because several organizations may register one
// provider job id.
type providerJobResponse struct {
	*providerjobs.Job
	CallbackPath string `json:"callback_path"`
}

func jobResponse(job *providerjobs.Job) providerJobResponse {
	return providerJobResponse{Job: job, CallbackPath: "/v1/callbacks/" + job.Provider + "/jobs/" + job.ID.String()}
}

// answerJob answers 200 with job and its callback path.
func answerJob(c echo.Context, job *providerjobs.Job) error { return answerOK(c, jobResponse(job)) }

// providerSecrets validates Deps.ProviderSecrets and returns a copy.
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

// registerProviderJobRequest is the body of POST /v1/provider-jobs.
type registerProviderJobRequest struct {
	RunID         string `json:"run_id" validate:"required,max=100"`
	Provider      string `json:"provider" validate:"required,max=100"`
	ProviderJobID string `json:"provider_job_id" validate:"required,max=255"`
}

// registerProviderJob answers 201 with the job and its callback_path. The
// provider must have a configured secret, or its callbacks could never be
// verified. Re-registering the same id for the same Run answers 200; for
// another Run, 409 already_registered. Other organizations' jobs are
// invisible. Bad input is 400 validation_failed; an unknown Run 404.
func (s *Server) registerProviderJob(c echo.Context) error {
	key, hasKey, err := s.optionalKey(c)
	if err != nil {
		return err
	}
	req, err := decodeBody[registerProviderJobRequest](c, bodyMandatory)
	if err != nil {
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
		// A repeat of the key replays its first answer's job.
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

// callbackAnswer is the body of every signed callback's 200; Status is
// accepted, queued (stored in the inbox, applied later) or dropped.
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

// receiveCallback handles a provider's signed callback. Headers are
// checked before any body byte is read, so a stranger costs nothing, and
// no refusal records anything. In order:
//
//   - unknown provider, bad webhook-signature or webhook-timestamp: 401;
//     a timestamp outside [CallbackTolerance]: 401 saying so;
//   - missing webhook-id: 400 missing_delivery_id; repeated or not a
//     valid claim key: 400 invalid_delivery_id;
//   - body over Deps.CallbackMaxBodyBytes: 413; no matching v1 signature
//     (HMAC computed while streaming, compared in constant time): 401;
//   - not a JSON object: 400 malformed_json; bad job_id, status or
//     result: 400 validation_failed (other members are ignored);
//   - no fair-queue seat for the provider: 429 with Retry-After;
//   - otherwise 200 accepted, queued or dropped with a reason: every 200
//     means durable, since a 5xx would make the provider retry a handled
//     delivery. An unreachable database answers 503 with nothing stored.
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
	// Only a verified callback takes a seat, charged to its provider.
	seat, err := s.acquire(ctx, seatq.Flow{Kind: seatq.KindProvider, Name: provider}, 1)
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
		return c.JSON(http.StatusOK, callbackAnswer{Status: "accepted"})
	}
	if out.Queued {
		return c.JSON(http.StatusOK, callbackAnswer{Status: "queued"})
	}
	s.d.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelInfo, "callback dropped",
		slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)),
		slog.String("provider", provider),
		slog.String("delivery_id", deliveryID),
		slog.String("reason", string(out.Reason)))
	return c.JSON(http.StatusOK, callbackAnswer{Status: "dropped", Reason: string(out.Reason)})
}

// pathParam returns the path parameter name unescaped: echo hands it out
// escaped when the path holds an escape such as "%2F".
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

// signatureHeader returns h's single webhook-signature, trimmed, or false
// unless it holds a well-formed v1 entry.
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

// timestampHeader returns h's single webhook-timestamp: canonical decimal
// unix seconds (the text is signed), else errBadTimestamp; outside
// [CallbackTolerance], errStaleTimestamp.
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
	// Compare in seconds so an absurd timestamp cannot overflow a Duration.
	limit := int64(CallbackTolerance / time.Second)
	if d := s.d.Now().Unix() - secs; d > limit || d < -limit {
		return "", errStaleTimestamp
	}
	return v, nil
}

// deliveryIDHeader returns h's webhook-id, which must be a valid claim
// key, or errDeliveryIDMissing or errDeliveryIDInvalid.
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

// readSignedBody returns c's body when a v1 entry of sig matches its
// HMAC, else a 413 or errBadSignature. It streams the HMAC rather than
// using the reference library, which copies the whole body again.
func (s *Server) readSignedBody(c echo.Context, secret []byte, deliveryID, ts, sig string) ([]byte, error) {
	r := c.Request()
	mac := hmac.New(sha256.New, secret)
	_, _ = io.WriteString(mac, deliveryID+"."+ts+".")
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		var charged int64
		var err error
		if body, charged, err = s.callbackBodies.read(c, s.d.CallbackMaxBodyBytes, 0, s.d.CallbackBodyTimeout, mac); err != nil {
			return nil, err
		}
		defer s.callbackBodies.give(charged)
	}
	if !signatureMatches(sig, mac.Sum(nil)) {
		return nil, errBadSignature
	}
	return body, nil
}

// signatureMatches reports whether a v1 entry of sig is base64(mac).
func signatureMatches(sig string, mac []byte) bool {
	var want [44]byte // base64 of an HMAC-SHA256
	base64.StdEncoding.Encode(want[:], mac)
	matched := false
	for entry := range strings.SplitSeq(sig, " ") {
		version, got, ok := strings.Cut(entry, ",")
		// Compare every entry, so timing does not reveal which matched.
		if ok && version == signatureVersion && hmac.Equal([]byte(got), want[:]) {
			matched = true
		}
	}
	return matched
}

// parseCallbackBody reads a verified body's job_id, status and optional
// result object, by exact names. The body still passes the API's usual
// JSON checks, since result is stored as jsonb.
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

// stringMember decodes the required non-empty string m[name] into dst.
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
