package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/webhooks"
)

// TestWebhooksPageShowsEndpointsDeliveriesAndAttempts: the page lists
// the organization's endpoints, each delivery with every attempt's
// status and answer, never a secret; another organization sees none of
// it.
func TestWebhooksPageShowsEndpointsDeliveriesAndAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "receiver overloaded", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	store := webhooks.NewStore(b.pool, webhooks.Config{AllowHTTPLoopback: true})
	ep, err := store.Create(ctx, b.world.OrgA, webhooks.CreateParams{URL: srv.URL + "/hooks", Description: "product UI", Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	name := "enrich"
	run, _, err := runs.NewStore(b.pool, runs.Config{}).Admit(ctx, runs.AdmitParams{OrganizationID: b.world.OrgA,
		Kind: runs.KindCapability, StartKey: runs.DirectStartKey(uuid.NewString()), RequestHash: "h", Name: &name,
		Input: json.RawMessage(`{}`), Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := webhooks.NewWorker(store, webhooks.WorkerConfig{})
	l, err := store.LeasePass(ctx, 10, time.Minute)
	if err != nil || len(l) != 1 {
		t.Fatalf("lease = %v, %v", l, err)
	}
	w.Deliver(ctx, l[0])

	body := b.do("GET", "/console/webhooks", b.signIn(t, b.world.OrgA, "alice"), nil, nil).Body.String()
	for _, want := range []string{srv.URL + "/hooks", "product UI", "run.admitted", "503", "receiver overloaded",
		"1 attempt", run.ID.String(), "failing since"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
	if strings.Contains(body, ep.Secret) || strings.Contains(body, "whsec_") {
		t.Error("the page shows a secret")
	}
	other := b.do("GET", "/console/webhooks", b.signIn(t, b.world.OrgB, "eve"), nil, nil)
	if other.Code != http.StatusOK || strings.Contains(other.Body.String(), srv.URL) || strings.Contains(other.Body.String(), run.ID.String()) {
		t.Errorf("org B's page = %d and shows org A's endpoint", other.Code)
	}
}
