package goclient_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/client"
	"github.com/searchd/searchd/webhooks"
)

// TestRunEventVerifierReadsWhatTheWorkerSends signs a delivery as
// webhooks.Worker does (webhooks.Body, webhooks.MessageID, the endpoint's
// secret) and reads it back; a delivery signed with another secret, a
// changed body, or a body under another event's webhook-id is refused.
func TestRunEventVerifierReadsWhatTheWorkerSends(t *testing.T) {
	t.Parallel()
	secret := webhooks.NewSecret()
	ref := "s3://results/1"
	ev := webhooks.Event{RunID: uuid.New(), Seq: 4, Type: "run.succeeded", Status: "succeeded",
		OccurredAt: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC), ResultRef: &ref}
	body, err := webhooks.Body(webhooks.Leased{RunID: ev.RunID, Seq: ev.Seq, Event: ev})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(secret, id string, body []byte) http.Header {
		t.Helper()
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		sig, err := wh.Sign(id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set(standardwebhooks.HeaderWebhookID, id)
		h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
		h.Set(standardwebhooks.HeaderWebhookSignature, sig)
		return h
	}
	v, err := client.NewRunEventVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	id := webhooks.MessageID(ev.RunID, ev.Seq)
	m, err := v.Verify(sign(secret, id, body), body)
	if err != nil {
		t.Fatalf("Verify = %v", err)
	}
	if m.Type != "run.succeeded" || m.Data.RunID != ev.RunID.String() || m.Data.Seq != 4 || m.Data.Status != "succeeded" ||
		m.Data.ResultRef == nil || *m.Data.ResultRef != ref || !m.Data.OccurredAt.Equal(ev.OccurredAt) {
		t.Errorf("Verify = %+v, want the event %+v", m, ev)
	}

	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-3] ^= 1
	for name, d := range map[string]struct {
		h    http.Header
		body []byte
	}{
		"another secret":            {sign(webhooks.NewSecret(), id, body), body},
		"a changed body":            {sign(secret, id, body), tampered},
		"another event's id":        {sign(secret, webhooks.MessageID(ev.RunID, 3), body), body},
		"no headers":                {http.Header{}, body},
		"a signed body of no event": {sign(secret, id, []byte(`[]`)), []byte(`[]`)},
	} {
		if _, err := v.Verify(d.h, d.body); !errors.Is(err, client.ErrBadRunEvent) {
			t.Errorf("%s: Verify = %v, want ErrBadRunEvent", name, err)
		}
	}
	for _, bad := range []string{"", "whsec_!!!"} {
		if _, err := client.NewRunEventVerifier(bad); err == nil {
			t.Errorf("NewRunEventVerifier(%q) = nil error", bad)
		}
	}
}
