package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/savedsearch"
)

func TestServeHTTPCancelsWhatTheGraceDidNotFinishAndLetsItAnswer(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	_, cancel, stopped, answered := serveOne(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // nothing but the cancellation ends it
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "cancelled")
	}, grace)
	began := time.Now()
	cancel()
	select {
	case err := <-stopped:
		if err == nil || !strings.Contains(err.Error(), "cut off") || !strings.Contains(err.Error(), "1 cancelled") {
			t.Errorf("serveHTTP = %v, want the request cancelled after the grace", err)
		}
		if d := time.Since(began); d < grace || d > grace+3*time.Second {
			t.Errorf("serveHTTP returned %s after the signal, want just after the %s grace", d, grace)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serveHTTP did not stop")
	}
	// The request saw its context end while its connection was open, and
	// its answer reached the client.
	if got := <-answered; got != "cancelled" {
		t.Errorf("the cancelled request answered %q, want its own answer", got)
	}
}

// TestShutdownReleasesTheClaimOfAStartCutOffInsideItsFreeze runs serve in
// process and shuts it down (the signal's path: its context ends) while a
// start is blocked inside its freeze and another waits for it on
// Prefer: wait. The grace is too short for either; both are cancelled, the
// claim is released rather than left processing, and both get an answer.
func TestShutdownReleasesTheClaimOfAStartCutOffInsideItsFreeze(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL, pool := newDB(t)
	org := uuid.New()
	ss, err := savedsearch.NewStore(pool).Create(ctx, org, savedsearch.CreateParams{
		Name: "cut off", Brief: savedsearch.Brief{Query: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	// The freeze reads the saved search, but cannot insert its snapshot
	// (the foreign key share-locks this row) while the test holds it.
	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `SELECT 1 FROM agent.saved_searches WHERE organization_id = $1 AND id = $2 FOR UPDATE`,
		org, ss.ID); err != nil {
		t.Fatal(err)
	}

	const grace = 500 * time.Millisecond
	h := newHarness(map[string]string{
		"DATABASE_URL":           dbURL,
		"SEARCHD_JWT_SECRET":     goodSecret,
		"SEARCHD_ADDR":           "127.0.0.1:0",
		"SEARCHD_SHUTDOWN_GRACE": grace.String(),
	})
	addr, signal := h.start(t, "serve")
	token, err := auth.SignToken([]byte(goodSecret), org, "tester", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		status  int
		header  http.Header
		problem api.Problem
		err     error
	}
	start := func(prefer string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			hr, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/saved-searches/"+ss.ID.String()+"/start", nil)
			hr.Header.Set("Authorization", "Bearer "+token)
			hr.Header.Set("Idempotency-Key", "cut-off")
			if prefer != "" {
				hr.Header.Set("Prefer", prefer)
			}
			res, err := http.DefaultClient.Do(hr)
			if err != nil {
				ch <- answer{err: err}
				return
			}
			defer res.Body.Close()
			a := answer{status: res.StatusCode, header: res.Header}
			a.err = json.NewDecoder(res.Body).Decode(&a.problem)
			ch <- a
		}()
		return ch
	}
	claimStatus := func() string {
		var status string
		err := pool.QueryRow(ctx, `SELECT coalesce((SELECT status FROM agent.idempotency_keys
			WHERE organization_id = $1 AND key = 'cut-off'), 'gone')`, org).Scan(&status)
		if err != nil {
			t.Fatal(err)
		}
		return status
	}

	holder := start("")
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		blocked, err := pgtest.LockWaits(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		if blocked > 0 && claimStatus() == string(idempotency.StatusProcessing) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the start never blocked inside its freeze (claim %s)", claimStatus())
		}
	}
	waiter := start("wait=30")
	time.Sleep(300 * time.Millisecond)
	select {
	case a := <-waiter:
		t.Fatalf("the waiter answered %d before the shutdown, want it waiting: serve must honour Prefer: wait", a.status)
	default:
	}

	began := time.Now()
	if code := signal(); code != 1 || !strings.Contains(h.stderr.String(), "cut off") {
		t.Errorf("serve exited %d, want 1 and the requests reported cut off: %s", code, h.stderr.String())
	}
	if d := time.Since(began); d > grace+5*time.Second {
		t.Errorf("serve took %s to exit, want its %s grace and a short margin", d, grace)
	}
	// The claim was released by the cancelled freeze, not left processing
	// for its 30 s lease: a retry runs at once.
	if status := claimStatus(); status != "gone" {
		t.Errorf("after the shutdown the claim is %s, want it released", status)
	}
	if a := <-holder; a.err != nil || a.status != http.StatusServiceUnavailable || a.problem.Code != api.CodeUnavailable ||
		a.header.Get("Retry-After") == "" {
		t.Errorf("the cut-off start answered %d %+v (%v), want 503 unavailable with Retry-After", a.status, a.problem, a.err)
	}
	if a := <-waiter; a.err != nil || a.status != http.StatusConflict || a.problem.Code != api.CodeInProgress ||
		a.header.Get("Preference-Applied") != "wait=30" {
		t.Errorf("the waiter answered %d %+v (%v), want 409 in_progress with its preference applied", a.status, a.problem, a.err)
	}
}

// TestShutdownEndsTheEventStreams: a Run's event stream lasts until its Run
// finishes, so a shutdown that waited for it would wait out its grace and
// cut it off. The streams end when the signal comes instead: serve exits
// at once and cleanly, and the client's stream ends (it reconnects with
// Last-Event-ID to another replica).
func TestShutdownEndsTheEventStreams(t *testing.T) {
	t.Parallel()
	dbURL, _ := newDB(t)
	const grace = 20 * time.Second
	h := newHarness(map[string]string{
		"DATABASE_URL":           dbURL,
		"SEARCHD_JWT_SECRET":     goodSecret,
		"SEARCHD_ADDR":           "127.0.0.1:0",
		"SEARCHD_SHUTDOWN_GRACE": grace.String(),
	})
	addr, signal := h.start(t, "serve")
	token, err := auth.SignToken([]byte(goodSecret), uuid.New(), "tester", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, body string) *http.Response {
		t.Helper()
		hr, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		if body == "" {
			hr.Body = nil
		}
		hr.Header.Set("Authorization", "Bearer "+token)
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("Idempotency-Key", "stream-at-shutdown")
		res, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := do(http.MethodPost, "/v1/runs", `{"kind":"definition","name":"watched"}`)
	var started struct {
		Run struct{ ID uuid.UUID } `json:"run"`
	}
	if err := json.NewDecoder(res.Body).Decode(&started); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("start = %d (%v)", res.StatusCode, err)
	}
	res.Body.Close()
	stream := do(http.MethodGet, "/v1/runs/"+started.Run.ID.String()+"/events", "")
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET events = %d", stream.StatusCode)
	}
	buf := make([]byte, 4096)
	if n, err := stream.Body.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "retry:") {
		t.Fatalf("the stream began %q (%v), want its retry: line", buf[:n], err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, stream.Body)
		read <- err
	}()

	began := time.Now()
	if code := signal(); code != 0 || strings.Contains(h.stderr.String(), "cut off") {
		t.Errorf("serve exited %d, want 0 with nothing cut off: %s", code, h.stderr.String())
	}
	if d := time.Since(began); d > grace/2 {
		t.Errorf("serve took %s to exit, want it not to wait for the stream (grace %s)", d, grace)
	}
	select {
	case err := <-read:
		if err != nil {
			t.Errorf("the stream ended with %v, want its end", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the stream did not end with the server")
	}
}
