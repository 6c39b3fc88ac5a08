package client

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The runtime's side of a dispatch. searchd POSTs every admitted Run to
// the runtime as a Standard Webhooks message signed with
// SEARCHD_RUNTIME_SECRET; the runtime verifies it ([VerifyDispatch]),
// deduplicates by its webhook-id (the Run id: every redelivery carries the
// same id and body), answers 2xx once the Run is safely its own, and
// reports the Run's status ([Client.ReportRunStatus]) with a runtime
// credential.

// DispatchTolerance is how far a dispatch's webhook-timestamp may be from
// the verifier's clock: the Standard Webhooks default, which refuses a
// replay of an old, captured message.
const DispatchTolerance = 5 * time.Minute

// ErrBadDispatch reports a dispatch that does not verify: a missing or
// malformed header, a signature made with another secret or over another
// body, a timestamp outside DispatchTolerance, or a body that is not a
// dispatch of the Run its webhook-id names. Answer it 4xx (searchd records
// the answer and stops; it never sends another body under that id).
var ErrBadDispatch = errors.New("searchd: the dispatch does not verify")

// DispatchVerifier checks the dispatches of one runtime secret. It is safe
// for concurrent use.
type DispatchVerifier struct {
	wh *standardwebhooks.Webhook
}

// NewDispatchVerifier returns a verifier for secret, as
// SEARCHD_RUNTIME_SECRET holds it: "whsec_" and the base64 of the key, or
// the raw key. It returns an error for an empty secret or a whsec_ secret
// that is not base64.
func NewDispatchVerifier(secret string) (*DispatchVerifier, error) {
	key := []byte(secret)
	if enc, ok := strings.CutPrefix(secret, "whsec_"); ok {
		var err error
		if key, err = base64.StdEncoding.DecodeString(enc); err != nil {
			return nil, errors.New("client: a whsec_ runtime secret must be followed by standard base64")
		}
	}
	if len(key) == 0 {
		return nil, errors.New("client: the runtime secret is empty")
	}
	wh, err := standardwebhooks.NewWebhookRaw(key)
	if err != nil {
		return nil, err
	}
	return &DispatchVerifier{wh: wh}, nil
}

// Verify checks the signature of a dispatch (header and body as received,
// the body unmodified) and decodes it. The returned dispatch's Run ID is
// its webhook-id: deduplicate by it. It returns an error wrapping
// [ErrBadDispatch] for anything that does not verify.
func (v *DispatchVerifier) Verify(header http.Header, body []byte) (*RunDispatch, error) {
	if err := v.wh.Verify(body, header); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadDispatch, err)
	}
	var d RunDispatch
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: the body is not a dispatch: %w", ErrBadDispatch, err)
	}
	if id := header.Get(standardwebhooks.HeaderWebhookID); d.Type != "run.admitted" || d.Data.Run.ID != id {
		return nil, fmt.Errorf("%w: a %q message of Run %q under webhook-id %q", ErrBadDispatch, d.Type, d.Data.Run.ID, id)
	}
	return &d, nil
}

// IsCancel reports whether a message searchd POSTed is a cancel request
// (to verify with [DispatchVerifier.VerifyCancel]) rather than a dispatch,
// by its webhook-id; a header is no proof: verify either.
func IsCancel(header http.Header) bool {
	return strings.HasPrefix(header.Get(standardwebhooks.HeaderWebhookID), "cancel_")
}

// VerifyCancel checks the signature of a cancel request and decodes it, as
// [DispatchVerifier.Verify] does a dispatch. Stop the Run (or do not start
// it), then report it cancelled ([Client.ReportRunStatus]); deduplicate by
// the webhook-id. It returns an error wrapping [ErrBadDispatch] for
// anything that does not verify.
func (v *DispatchVerifier) VerifyCancel(header http.Header, body []byte) (*RunCancel, error) {
	if err := v.wh.Verify(body, header); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadDispatch, err)
	}
	var c RunCancel
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("%w: the body is not a cancel request: %w", ErrBadDispatch, err)
	}
	if id := header.Get(standardwebhooks.HeaderWebhookID); c.Type != "run.cancel_requested" || "cancel_"+c.Data.Run.ID != id {
		return nil, fmt.Errorf("%w: a %q message of Run %q under webhook-id %q", ErrBadDispatch, c.Type, c.Data.Run.ID, id)
	}
	return &c, nil
}

// VerifyDispatch is [NewDispatchVerifier] and [DispatchVerifier.Verify] in
// one call, for a runtime that verifies a dispatch now and then.
func VerifyDispatch(secret string, header http.Header, body []byte) (*RunDispatch, error) {
	v, err := NewDispatchVerifier(secret)
	if err != nil {
		return nil, err
	}
	return v.Verify(header, body)
}
