//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/auth"
)

// webhookTimeout is the replicas' SEARCHD_WEBHOOK_TIMEOUT: a delivery's
// lease is it plus 5 s.
const webhookTimeout = 2 * time.Second

// TestWebhooksAcrossKill: a product's endpoint receives every Run event
// across kill -9 of the replica delivering them. r1 alone runs (r2 and
// r3 stopped) while 30 Runs are started; the endpoint holds r1's
// deliveries unanswered; r1 is killed; r2 and r3 continue and take the
// held deliveries over once their lease passes. The endpoint, which
// verifies every signature and drops what it saw by webhook-id, ends with
// every admission event, some received twice under the same id and body.
func TestWebhooksAcrossKill(t *testing.T) {
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	h := setup(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	var (
		mu       sync.Mutex
		wh       *standardwebhooks.Webhook
		seen     = map[string]string{} // webhook-id -> body
		requests int
		bad      []string
		hold     = make(chan struct{})
		held     atomic.Int64
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get("webhook-id")
		mu.Lock()
		requests++
		if err := wh.Verify(body, r.Header); err != nil {
			bad = append(bad, id+": "+err.Error())
		} else if prev, ok := seen[id]; ok && prev != string(body) {
			bad = append(bad, id+" came with two bodies")
		} else {
			seen[id] = string(body)
		}
		release := hold
		mu.Unlock()
		held.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	r1, r2, r3 := h.replicas[0], h.replicas[1], h.replicas[2]
	for _, r := range h.replicas {
		r.Kill()
		r.env = append(r.env, "SEARCHD_WEBHOOK_TIMEOUT="+webhookTimeout.String(),
			"SEARCHD_WEBHOOK_MAX_BACKOFF=5s", "SEARCHD_WEBHOOK_ALLOW_HTTP_LOOPBACK=true")
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	org, tok := orgToken(t)
	// Endpoints are an admin's: their answers carry the secret.
	admin, err := auth.SignAdminToken([]byte(jwtSecret), org, "e2e-admin", time.Now(), 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+r1.addr+"/v1/webhook-endpoints",
		bytes.NewReader([]byte(`{"url":"http://`+ln.Addr().String()+`/hooks"}`)))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var ep struct{ Secret string }
	_ = json.NewDecoder(res.Body).Decode(&ep)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("creating the endpoint: %d", res.StatusCode)
	}
	mu.Lock()
	wh, err = standardwebhooks.NewWebhook(ep.Secret)
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}

	for _, r := range []*replica{r2, r3} {
		if err := r.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	const n = 30
	startMany(ctx, t, tok, []*replica{r1}, "hooked", n)
	deadline := time.Now().Add(30 * time.Second)
	for held.Load() < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("the endpoint holds %d of r1's deliveries after 30 s, want 8", held.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	r1.Kill()
	killed := time.Now()
	heldByR1 := held.Load()
	for _, r := range []*replica{r2, r3} {
		if err := r.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	close(hold)
	mu.Unlock()

	for {
		var pending int
		if err := h.db.QueryRow(ctx, `SELECT count(*) FROM agent.webhook_deliveries WHERE organization_id = $1
			AND state = 'pending'`, org).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			break
		}
		if time.Since(killed) > 2*time.Minute {
			t.Fatalf("%d deliveries still pending 2 minutes after the kill", pending)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var ids []string
	rows, err := h.db.Query(ctx, `SELECT 'run_' || id || '_1' FROM agent.runs WHERE organization_id = $1`, org)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	var cutShort int
	if err := h.db.QueryRow(ctx, `SELECT count(*) FROM agent.webhook_delivery_attempts
		WHERE organization_id = $1 AND outcome = 'in_flight'`, org).Scan(&cutShort); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var got []string
	for id := range seen {
		got = append(got, id)
	}
	slices.Sort(got)
	slices.Sort(ids)
	if len(ids) != n || !slices.Equal(got, ids) {
		t.Errorf("the endpoint saw %d events, want the %d admissions: %v", len(got), len(ids), got)
	}
	if len(bad) > 0 {
		t.Errorf("bad deliveries: %v", bad)
	}
	if cutShort == 0 || requests <= n {
		t.Errorf("%d attempts cut short and %d requests for %d events: the kill interrupted nothing", cutShort, requests, n)
	}
	t.Log(fmt.Sprintf("webhooks, r1 killed with %d deliveries held: every one of %d events delivered %s after the kill, "+
		"%d requests, %d attempts left cut short", heldByR1, n, time.Since(killed).Round(time.Millisecond), requests, cutShort))
}
