package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/providerjobs"
)

// Headers of a provider callback.
const (
	// HeaderDeliveryID carries the provider's id of one delivery: the key
	// a delivery is claimed under, so a redelivery is recognised.
	HeaderDeliveryID = "X-Delivery-Id"
	// HeaderSignature carries "sha256=" and the hex HMAC-SHA256 of the raw
	// body under the provider's secret.
	HeaderSignature = "X-Signature"
)

// signaturePrefix starts every X-Signature value.
const signaturePrefix = "sha256="

// Answers of a callback, in its "status" member.
const (
	callbackAccepted = "accepted"
	callbackDropped  = "dropped"
)

// copySecrets validates the provider secrets of [Deps] and returns a copy,
// so a caller changing its map later changes nothing here.
func copySecrets(in map[string][]byte) (map[string][]byte, error) {
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
// organization. The provider must be one this server holds a callback
// secret for: a job whose callbacks could never be authenticated would
// never move, and nothing would say why.
func (s *Server) registerProviderJob(c echo.Context) error {
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
	} else if _, ok := s.providerSecrets[req.Provider]; !ok {
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
	job, err := s.providerJobs.Register(c.Request().Context(), principal(c).OrganizationID, providerjobs.RegisterParams{
		RunID:         runID,
		Provider:      req.Provider,
		ProviderJobID: req.ProviderJobID,
	})
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/v1/provider-jobs/"+job.ID.String())
	return c.JSON(http.StatusCreated, job)
}

func (s *Server) getProviderJob(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	job, err := s.providerJobs.Get(c.Request().Context(), principal(c).OrganizationID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, job)
}

// callbackAnswer is the body of every callback a provider signed: accepted,
// or dropped with its reason. Both are acknowledgements.
type callbackAnswer struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

var (
	errBadSignature = &apiError{status: http.StatusUnauthorized, code: CodeUnauthorized,
		detail: "a valid X-Signature header is required: sha256= and the hex HMAC-SHA256 of the raw body under the provider's secret"}
	errDeliveryIDMissing = &apiError{status: http.StatusBadRequest, code: CodeMissingDeliveryID,
		detail: "the X-Delivery-Id header is required: without it a redelivery cannot be recognised"}
	errDeliveryIDInvalid = &apiError{status: http.StatusBadRequest, code: CodeInvalidDeliveryID,
		detail: "the X-Delivery-Id header must be one value of 1 to 255 bytes of UTF-8 without control characters"}
)

// receiveCallback takes a provider's callback about one of its jobs. It is
// not behind the bearer token: the provider authenticates by signing the
// raw body with its secret. The checks run in this order, and only a
// delivery that passes the signature can leave a trace:
//
//   - an unknown provider, or an X-Signature that is missing, not one
//     sha256=<64 hex digits>, or not the HMAC of the body: 401 unauthorized,
//     and nothing is recorded. The body is read (with the size limit, 413
//     payload_too_large beyond it) before it is verified and verified
//     before it is parsed, with a constant-time comparison;
//   - a missing X-Delivery-Id: 400 missing_delivery_id; one that cannot be
//     a claim key: 400 invalid_delivery_id. A delivery without an id
//     cannot be told from its redeliveries, so it cannot be applied safely;
//   - a body that is not a JSON object: 400 malformed_json; one whose
//     job_id, status or result have the wrong shape: 400
//     validation_failed. Members beyond those three are ignored, so a
//     provider may add some without breaking its deliveries. The
//     Content-Type is not checked: the signature, not the label,
//     vouches for the bytes;
//   - then the delivery is processed (see package providerjobs), and the
//     answer is 200 {"status": "accepted"} or 200 {"status": "dropped",
//     "reason": ...}. A duplicate is not an error to the provider, and a
//     5xx would make it retry a delivery that was handled. A database
//     that cannot be reached answers 503 unavailable with Retry-After, so
//     the provider redelivers; nothing was applied then.
func (s *Server) receiveCallback(c echo.Context) error {
	provider := pathParam(c, "provider")
	secret, known := s.providerSecrets[provider]
	if !known {
		return errBadSignature
	}
	sig, ok := signatureHeader(c.Request().Header)
	if !ok {
		return errBadSignature
	}
	body, err := s.readRawBody(c)
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	if !hmac.Equal(mac.Sum(nil), sig) {
		return errBadSignature
	}
	deliveryID, err := deliveryIDHeader(c.Request().Header)
	if err != nil {
		return err
	}
	update, err := parseCallbackBody(body)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	out, err := s.providerJobs.Receive(ctx, providerjobs.Delivery{
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
	s.logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelInfo, "callback dropped",
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

// signatureHeader returns the MAC an X-Signature header carries. It
// reports false unless there is exactly one header, "sha256=" followed by
// 64 hex digits.
func signatureHeader(h http.Header) ([]byte, bool) {
	values := h.Values(HeaderSignature)
	if len(values) != 1 {
		return nil, false
	}
	digits, ok := strings.CutPrefix(strings.TrimSpace(values[0]), signaturePrefix)
	if !ok || len(digits) != 2*sha256.Size {
		return nil, false
	}
	sig, err := hex.DecodeString(digits)
	if err != nil {
		return nil, false
	}
	return sig, true
}

// deliveryIDHeader returns the X-Delivery-Id of h, or errDeliveryIDMissing
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

// readRawBody reads the whole body of c, refusing one longer than the
// limit while reading, so an oversized body is never held in memory whole.
func (s *Server) readRawBody(c echo.Context) ([]byte, error) {
	r := c.Request()
	if r.ContentLength > s.maxBodyBytes {
		return nil, s.tooLarge()
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	buf, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, s.maxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, s.tooLarge()
	case err != nil:
		return nil, &apiError{status: http.StatusBadRequest, code: CodeMalformedJSON,
			detail: "the request body could not be read"}
	}
	return buf, nil
}

// parseCallbackBody reads a verified callback body: a JSON object with
// job_id (a string), status (running, succeeded or failed) and result (an
// object; absent or null for none). Member names match exactly; other
// members are ignored. The whole body must still pass the checks every
// body of this API does (UTF-8, one value, no duplicate names, no NUL, a
// bounded depth), because result is stored as jsonb.
func parseCallbackBody(buf []byte) (providerjobs.Update, error) {
	if len(bytes.TrimSpace(buf)) == 0 {
		return providerjobs.Update{}, &apiError{status: http.StatusBadRequest, code: CodeMalformedJSON,
			detail: "the request body is empty; a callback is a JSON object"}
	}
	if err := checkJSON(buf, reflect.TypeFor[map[string]any]()); err != nil {
		return providerjobs.Update{}, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(buf, &members); err != nil {
		return providerjobs.Update{}, &apiError{status: http.StatusBadRequest, code: CodeMalformedJSON,
			detail: "the request body is not valid JSON"}
	}
	var u providerjobs.Update
	var fields []FieldError
	if err := stringMember(members, "job_id", &u.JobID); err != nil {
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
