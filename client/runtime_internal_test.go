package client

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

var (
	runtimeKey    = []byte("runtime-secret-of-the-test-32-by")
	runtimeSecret = "whsec_" + base64.StdEncoding.EncodeToString(runtimeKey)
)

const dispatchBody = `{"type":"run.admitted","timestamp":"2026-12-01T09:31:12.5Z","data":{"run":{"id":"0f8e4a2c-6b1d-4e3f-9a57-c2d8e1f0b4a6",` +
	`"organization_id":"d0d0d0d0-0000-4000-8000-000000000001","kind":"saved_search","saved_search_id":"5b0c7f43-9a1e-4c2b-8f63-0d4a3e2b1c9d",` +
	`"snapshot_id":"9c3b9997-92eb-4949-852b-a9916ff82864","name":"n","options":{"max_results":10},"input":null,` +
	`"created_by":"alice","created_at":"2026-12-01T09:31:12.5Z","idempotency_key":"k"},"snapshot":{"id":"9c3b9997-92eb-4949-852b-a9916ff82864",` +
	`"saved_search_id":"5b0c7f43-9a1e-4c2b-8f63-0d4a3e2b1c9d","saved_search_version":3,"brief":{"query":"q","filters":{"big":12345678901234567890}},` +
	`"baseline":{"items":["a"],"cursor":null},"content_hash":"x","created_by":null,"created_at":"2026-12-01T09:31:12.5Z"},` +
	`"status_url":"/v1/runs/0f8e4a2c-6b1d-4e3f-9a57-c2d8e1f0b4a6/status"}}`

// signed returns the headers searchd sends with body: signed with key at
// at under id.
func signed(t *testing.T, key []byte, id string, at time.Time, body string) http.Header {
	t.Helper()
	wh, _ := standardwebhooks.NewWebhookRaw(key)
	sig, err := wh.Sign(id, at, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	h.Set("webhook-signature", sig)
	return h
}

func TestVerifyDispatch(t *testing.T) {
	t.Parallel()
	id := "0f8e4a2c-6b1d-4e3f-9a57-c2d8e1f0b4a6"
	d, err := VerifyDispatch(runtimeSecret, signed(t, runtimeKey, id, time.Now(), dispatchBody), []byte(dispatchBody))
	if err != nil {
		t.Fatal(err)
	}
	if d.Data.Run.ID != id || d.Data.Snapshot == nil || d.Data.Snapshot.SavedSearchVersion != 3 ||
		d.Data.Snapshot.Brief.Filters["big"] != json.Number("12345678901234567890") || d.Data.StatusURL != "/v1/runs/"+id+"/status" {
		t.Errorf("VerifyDispatch = %+v", d)
	}
	// The raw key works too.
	if _, err := VerifyDispatch(string(runtimeKey), signed(t, runtimeKey, id, time.Now(), dispatchBody), []byte(dispatchBody)); err != nil {
		t.Errorf("VerifyDispatch(raw key) = %v", err)
	}
	for name, tc := range map[string]struct {
		header http.Header
		body   string
	}{
		"another secret":         {signed(t, []byte("another-secret-of-32-bytes-long!"), id, time.Now(), dispatchBody), dispatchBody},
		"a changed body":         {signed(t, runtimeKey, id, time.Now(), dispatchBody), strings.Replace(dispatchBody, `"q"`, `"Q"`, 1)},
		"an old timestamp":       {signed(t, runtimeKey, id, time.Now().Add(-DispatchTolerance-time.Minute), dispatchBody), dispatchBody},
		"another webhook-id":     {signed(t, runtimeKey, "00000000-0000-4000-8000-000000000000", time.Now(), dispatchBody), dispatchBody},
		"no signature":           {http.Header{"Webhook-Id": {id}}, dispatchBody},
		"not a dispatch, signed": {signed(t, runtimeKey, id, time.Now(), `{"type":"other"}`), `{"type":"other"}`},
	} {
		if _, err := VerifyDispatch(runtimeSecret, tc.header, []byte(tc.body)); !errors.Is(err, ErrBadDispatch) {
			t.Errorf("%s: VerifyDispatch = %v, want ErrBadDispatch", name, err)
		}
	}
	if _, err := NewDispatchVerifier("whsec_!!"); err == nil {
		t.Error("a whsec_ secret that is not base64 was accepted")
	}
}
