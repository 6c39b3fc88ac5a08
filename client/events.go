package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// ErrBadRunEvent reports a Run event message that does not verify: its
// signature, its timestamp (more than [DispatchTolerance] away), or a
// body that is not a Run event of its webhook-id.
var ErrBadRunEvent = errors.New("searchd: the Run event does not verify")

// RunEventVerifier checks the deliveries of one webhook endpoint
// (docs/webhooks.md): their Standard Webhooks signature with the
// endpoint's secret, and their body.
type RunEventVerifier struct {
	wh *standardwebhooks.Webhook
}

// NewRunEventVerifier returns a verifier of the endpoint whose secret
// (whsec_ and standard base64, as POST /v1/webhook-endpoints answered it)
// is secret. It fails for a secret that is empty or not of that form.
func NewRunEventVerifier(secret string) (*RunEventVerifier, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil || secret == "" {
		return nil, errors.New("client: a webhook endpoint's secret is whsec_ and standard base64")
	}
	return &RunEventVerifier{wh: wh}, nil
}

// Verify checks a delivery's headers and body and returns its message.
// The same event may arrive more than once (delivery is at least once):
// its webhook-id, run_{run_id}_{seq}, is the same every time.
//
// Errors wrap [ErrBadRunEvent]: answer such a delivery 400, and do
// nothing else.
func (v *RunEventVerifier) Verify(header http.Header, body []byte) (*RunEventMessage, error) {
	if err := v.wh.Verify(body, header); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRunEvent, err)
	}
	var m RunEventMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("%w: the body is not a Run event: %w", ErrBadRunEvent, err)
	}
	want := fmt.Sprintf("run_%s_%d", m.Data.RunID, m.Data.Seq)
	if id := header.Get(standardwebhooks.HeaderWebhookID); id != want || m.Type != m.Data.Type {
		return nil, fmt.Errorf("%w: a %q event of Run %q seq %d under webhook-id %q", ErrBadRunEvent, m.Type, m.Data.RunID, m.Data.Seq, id)
	}
	return &m, nil
}
