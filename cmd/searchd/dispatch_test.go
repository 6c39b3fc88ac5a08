package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// runtimeKey is the test runtime's signing key; runtimeSecret its whsec_
// spelling, as SEARCHD_RUNTIME_SECRET takes it.
var (
	runtimeKey    = []byte("the-test-runtime-key-32-bytes-ok")
	runtimeSecret = "whsec_" + base64.StdEncoding.EncodeToString(runtimeKey)
)

func TestDispatchSettingsNameTheSettingAndHideTheSecret(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://searchd@localhost:5432/searchd", "SEARCHD_JWT_SECRET": goodSecret}
	for _, tt := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{envRuntimeURL: "http://runtime:9000/runs"}, nil, envRuntimeSecret + ": is required with " + envRuntimeURL},
		{map[string]string{envRuntimeSecret: runtimeSecret}, nil, envRuntimeSecret + ": is set but " + envRuntimeURL + " is not"},
		{map[string]string{envRuntimeURL: "http://runtime:9000/runs", envRuntimeSecret: "whsec_c2hvcnQ="}, nil,
			envRuntimeSecret + ": dispatch: Config.Secret is a key of 5 bytes; it must be at least 24"},
		{map[string]string{envRuntimeURL: "http://runtime:9000/runs", envRuntimeSecret: "whsec_!!not-base64!!"}, nil,
			envRuntimeSecret + `: starts with "whsec_" but the rest is not standard base64`},
		{map[string]string{envRuntimeSecret: runtimeSecret}, []string{"--runtime-url", "https://user:hunter2-password@runtime/runs"},
			"--runtime-url: holds credentials"},
	} {
		env := maps.Clone(base)
		maps.Copy(env, tt.env)
		h := newHarness(env)
		code := h.run(append([]string{"serve"}, tt.args...)...)
		out := h.stderr.String()
		if code != 2 || !strings.Contains(out, tt.want) {
			t.Errorf("serve %v with %v = %d %q, want 2 saying %q", tt.args, tt.env, code, out, tt.want)
		}
		for _, secret := range []string{runtimeSecret, "hunter2-password", "c2hvcnQ="} {
			if strings.Contains(out, secret) {
				t.Errorf("the message quotes a secret: %q", out)
			}
		}
	}
	// Both set and valid: no problem of theirs.
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	serverFlags(fs)
	cfg, problems := loadSettings(fs, func(k string) string {
		return map[string]string{envRuntimeURL: "https://runtime.internal/runs", envRuntimeSecret: runtimeSecret,
			envDatabaseURL: "postgres://searchd@localhost:5432/searchd", envJWTSecret: goodSecret}[k]
	}, cmdServe)
	if dc := cfg.Dispatch; len(problems) != 0 || dc.URL != "https://runtime.internal/runs" || !bytes.Equal(dc.Secret, runtimeKey) {
		t.Errorf("valid settings = %+v, %v; want the URL and the decoded key", dc, problems)
	}
}

func TestTokenRuntimePrintsARuntimeCredential(t *testing.T) {
	t.Parallel()
	org := uuid.NewString()
	h := newHarness(map[string]string{"SEARCHD_JWT_SECRET": goodSecret})
	if code := h.run("token", "--runtime", "--org", org, "--sub", "runner-1"); code != 0 {
		t.Fatalf("token --runtime = %d, stderr %q", code, h.stderr.String())
	}
	var claims auth.Claims
	if _, err := jwt.NewParser().ParseWithClaims(strings.TrimSpace(h.stdout.String()), &claims,
		func(*jwt.Token) (any, error) { return []byte(goodSecret), nil }); err != nil {
		t.Fatal(err)
	}
	if claims.Role != auth.RoleRuntime || claims.Subject != "runner-1" || claims.OrgID != org {
		t.Errorf("runtime token claims = %+v, want role runtime, sub runner-1, org %s", claims, org)
	}
	for _, args := range [][]string{
		{"token", "--runtime", "--org", org},
		{"token", "--runtime", "--sub", "r"},
		{"token", "--runtime", "--operator", "--org", org, "--sub", "r"},
	} {
		h = newHarness(map[string]string{"SEARCHD_JWT_SECRET": goodSecret})
		if code := h.run(args...); code != 2 {
			t.Errorf("%v = %d %q, want 2", args, code, h.stderr.String())
		}
	}
}

// testRuntime records the deliveries it verifies and answers 202.
type testRuntime struct {
	srv *httptest.Server
	mu  sync.Mutex
	ids []string
	bad int
}

func newTestRuntime(t *testing.T) *testRuntime {
	wh, err := standardwebhooks.NewWebhook(runtimeSecret)
	if err != nil {
		t.Fatal(err)
	}
	rt := &testRuntime{}
	rt.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rt.mu.Lock()
		defer rt.mu.Unlock()
		if err := wh.Verify(body, r.Header); err != nil {
			rt.bad++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		rt.ids = append(rt.ids, r.Header.Get("webhook-id"))
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(rt.srv.Close)
	return rt
}

func (rt *testRuntime) got() ([]string, int) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]string(nil), rt.ids...), rt.bad
}

// TestServeDispatchesAdmittedRunsAndTakesTheirStatus: with a runtime
// configured, a direct start reaches the runtime signed with the Run id as
// webhook-id, the Run becomes dispatched, and the runtime's credential
// (searchd token --runtime) reports it succeeded.
func TestServeDispatchesAdmittedRunsAndTakesTheirStatus(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDBURL(t)
	rt := newTestRuntime(t)
	_, base, _ := startServe(t, map[string]string{
		"DATABASE_URL": dbURL, "SEARCHD_JWT_SECRET": goodSecret, "SEARCHD_ADDR": "127.0.0.1:0", "SEARCHD_SWEEP_INTERVAL": "0s",
		envRuntimeURL: rt.srv.URL, envRuntimeSecret: runtimeSecret,
		// An hour: only the wake of the start itself can deliver it in time.
		envDispatchInterval: "1h",
	})
	org := uuid.New()
	tok, _ := auth.SignToken([]byte(goodSecret), org, "alice", time.Now(), time.Hour)
	run := postRun(t, base, tok, "serve-dispatch")
	deadline := time.Now().Add(20 * time.Second)
	for {
		ids, bad := rt.got()
		if len(ids) == 1 && ids[0] == run && bad == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runtime got %v (%d unverified), want the Run %s once, right after the start", ids, bad, run)
		}
		time.Sleep(20 * time.Millisecond)
	}
	h := newHarness(map[string]string{"SEARCHD_JWT_SECRET": goodSecret})
	if code := h.run("token", "--runtime", "--org", org.String(), "--sub", "runner-1"); code != 0 {
		t.Fatal(h.stderr.String())
	}
	rtTok := strings.TrimSpace(h.stdout.String())
	var got struct {
		Status  string `json:"status"`
		Version int    `json:"version"`
	}
	for i, want := range []string{"dispatched", "succeeded"} {
		if i == 1 {
			req, _ := http.NewRequest(http.MethodPut, base+"/v1/runs/"+run+"/status", strings.NewReader(`{"status":"succeeded"}`))
			req.Header.Set("Authorization", "Bearer "+rtTok)
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status report = %d, want 200", res.StatusCode)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			got = struct {
				Status  string `json:"status"`
				Version int    `json:"version"`
			}{}
			getJSON(t, base+"/v1/runs/"+run, tok, &got)
			if got.Status == want {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got.Status != want || got.Version != i+2 {
			t.Errorf("Run = %+v, want %s v%d", got, want, i+2)
		}
	}
	page := getText(t, base+"/metrics")
	if !strings.Contains(page, `searchd_dispatch_attempts_total{outcome="delivered"} 1`+"\n") {
		t.Errorf("metrics lack one delivered attempt")
	}
}

// TestServeWithoutARuntimeLeavesRunsQueued: dispatch is off, said so in
// the log, and a started Run keeps its pending dispatch untouched.
func TestServeWithoutARuntimeLeavesRunsQueued(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDBURL(t)
	h, base, _ := startServe(t, map[string]string{
		"DATABASE_URL": dbURL, "SEARCHD_JWT_SECRET": goodSecret, "SEARCHD_ADDR": "127.0.0.1:0", "SEARCHD_SWEEP_INTERVAL": "0s",
		envDispatchInterval: "10ms",
	})
	if !strings.Contains(h.stderr.String(), "dispatch is off: "+envRuntimeURL+" is not set") {
		t.Errorf("the log does not say dispatch is off:\n%s", h.stderr.String())
	}
	org := uuid.New()
	tok, _ := auth.SignToken([]byte(goodSecret), org, "alice", time.Now(), time.Hour)
	run := postRun(t, base, tok, "no-runtime")
	time.Sleep(500 * time.Millisecond) // fifty intervals, were a dispatcher running
	var got struct {
		Status   string `json:"status"`
		Dispatch struct {
			State    string `json:"state"`
			Attempts int    `json:"attempts"`
		} `json:"dispatch"`
	}
	getJSON(t, base+"/v1/runs/"+run, tok, &got)
	if got.Status != "queued" || got.Dispatch.State != "pending" || got.Dispatch.Attempts != 0 {
		t.Errorf("Run = %+v, want queued with a pending dispatch never attempted", got)
	}
}

// TestServeWithDispatchOffCountsAndWarnsOfPendingRuns is issue 35.6: with
// SEARCHD_RUNTIME_URL unset, serve warns at start that dispatch is off;
// after three starts /metrics counts the three pending dispatches and says
// this process does not dispatch; and the log repeats a WARN naming the
// count and the settings to set, every WarnEvery (shortened here), while
// they wait.
func TestServeWithDispatchOffCountsAndWarnsOfPendingRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(map[string]string{
		"DATABASE_URL": pgtest.NewDBURL(t), "SEARCHD_JWT_SECRET": goodSecret, "SEARCHD_ADDR": "127.0.0.1:0", "SEARCHD_SWEEP_INTERVAL": "0s",
	})
	h.app.backlogWatch = dispatch.WatchConfig{Interval: 20 * time.Millisecond, WarnEvery: 200 * time.Millisecond}
	addr, _ := h.start(t, "serve")
	base := "http://" + addr
	startWarn := `"level":"WARN","msg":"dispatch is off: ` + envRuntimeURL + ` is not set, so admitted Runs stay queued with their dispatch pending ` +
		`until a replica with a runtime delivers them; set ` + envRuntimeURL + ` and ` + envRuntimeSecret + ` on this replica`
	if !strings.Contains(h.stderr.String(), startWarn) {
		t.Errorf("no WARN at start that dispatch is off:\n%s", h.stderr.String())
	}
	tok, _ := auth.SignToken([]byte(goodSecret), uuid.New(), "alice", time.Now(), time.Hour)
	for i := range 3 {
		postRun(t, base, tok, fmt.Sprintf("dispatch-off-%d", i))
	}
	var page string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if page = getText(t, base+"/metrics"); strings.Contains(page, "\nsearchd_dispatch_pending 3\n") {
			break
		}
	}
	for _, want := range []string{"\nsearchd_dispatch_pending 3\n", "\nsearchd_dispatch_enabled 0\n", "\nsearchd_dispatch_failed 0\n"} {
		if !strings.Contains(page, want) {
			t.Errorf("/metrics lacks %q:\n%s", strings.TrimSpace(want), grepLines(page, "searchd_dispatch_"))
		}
	}
	if strings.Contains(page, "\nsearchd_dispatch_oldest_pending_seconds 0\n") || !strings.Contains(page, "\nsearchd_dispatch_oldest_pending_seconds ") {
		t.Errorf("/metrics does not age the oldest pending Run:\n%s", grepLines(page, "searchd_dispatch_"))
	}
	// The repeated warning: twice at least, each naming the three Runs.
	const repeated = `"level":"WARN","msg":"dispatch is off on this replica and Runs are waiting for it: they stay queued until a replica ` +
		`with a runtime delivers them; set ` + envRuntimeURL + ` and ` + envRuntimeSecret + ` on this replica to deliver them (docs/runtime.md)","pending":3,`
	for deadline := time.Now().Add(20 * time.Second); strings.Count(h.stderr.String(), repeated) < 2 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(h.stderr.String(), repeated); n < 2 {
		t.Errorf("%d warnings of the three pending Runs within 20 s, want 2 or more:\n%s", n, h.stderr.String())
	}
}

// grepLines returns the lines of page that contain s.
func grepLines(page, s string) string {
	var out []string
	for l := range strings.Lines(page) {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// TestRunsDispatchListAndRetry: an operator lists the failed dispatches and
// retries one with a reason; a pending one is refused.
func TestRunsDispatchListAndRetry(t *testing.T) {
	t.Parallel()
	dbURL, pool := newDB(t)
	org := uuid.New()
	var failed, pending uuid.UUID
	for _, id := range []*uuid.UUID{&failed, &pending} {
		*id = uuid.New()
		if _, err := pool.Exec(context.Background(), `
			WITH r AS (INSERT INTO agent.runs (id, organization_id, kind, start_key, request_hash, name, created_at, retain_until)
				VALUES ($1::uuid, $2::uuid, 'capability', 'direct:' || $1::text, 'h', 'n', now(), now() + interval '1 day') RETURNING id)
			INSERT INTO agent.run_dispatches (run_id, organization_id, next_attempt_at, created_at) SELECT id, $2, now(), now() FROM r`,
			*id, org); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(context.Background(), `UPDATE agent.run_dispatches SET state = 'failed', failed_at = now(),
		attempts = 1, last_status_code = 422, last_error = '422 Unprocessable Entity unknown kind' WHERE run_id = $1`, failed); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": dbURL, "USER": "olga"}
	h := newHarness(env)
	if code := h.run("runs", "dispatch", "list"); code != 0 || !strings.Contains(h.stdout.String(), failed.String()) ||
		strings.Contains(h.stdout.String(), pending.String()) || !strings.Contains(h.stdout.String(), "[422] 422 Unprocessable Entity unknown kind") {
		t.Errorf("dispatch list = %d:\n%s\nwant the failed dispatch alone, with its answer", code, h.stdout.String())
	}
	h = newHarness(env)
	if code := h.run("runs", "dispatch", "list", "--state", "pending", "--json"); code != 0 {
		t.Fatalf("dispatch list --state pending = %d %s", code, h.stderr.String())
	}
	var listed []dispatchJSON
	if err := json.Unmarshal([]byte(h.stdout.String()), &listed); err != nil || len(listed) != 1 || listed[0].RunID != pending {
		t.Errorf("pending list = %s (%v), want the pending dispatch", h.stdout.String(), err)
	}
	h = newHarness(env)
	if code := h.run("runs", "dispatch", "retry", "--run", pending.String(), "--reason", "why not"); code != 1 ||
		!strings.Contains(h.stderr.String(), "only a failed dispatch can be retried: it is pending") {
		t.Errorf("retry of a pending dispatch = %d %q, want 1, refused", code, h.stderr.String())
	}
	h = newHarness(env)
	if code := h.run("runs", "dispatch", "retry", "--run", failed.String()); code != 2 || !strings.Contains(h.stderr.String(), "--reason: is required") {
		t.Errorf("retry without --reason = %d %q, want 2 naming --reason", code, h.stderr.String())
	}
	h = newHarness(env)
	if code := h.run("runs", "dispatch", "retry", "--run", failed.String(), "--org", org.String(), "--reason", "the runtime knows the kind now"); code != 0 ||
		!strings.Contains(h.stdout.String(), "is pending, due now") || !strings.Contains(h.stderr.String(), "the runtime knows the kind now") {
		t.Fatalf("retry = %d\nstdout %s\nstderr %s", code, h.stdout.String(), h.stderr.String())
	}
	var state, actor, reason string
	var code int
	if err := pool.QueryRow(context.Background(), `SELECT d.state, t.actor, t.reason, t.previous_status_code
		FROM agent.run_dispatches d JOIN agent.run_dispatch_retries t ON t.run_id = d.run_id WHERE d.run_id = $1`, failed).
		Scan(&state, &actor, &reason, &code); err != nil || state != "pending" || actor != "olga" || reason != "the runtime knows the kind now" || code != 422 {
		t.Errorf("after the retry: %s, by %s for %q (previous %d), %v; want pending, recorded by olga with the reason and the 422", state, actor, reason, code, err)
	}
}

// post sends body to url as JSON with the bearer token tok and the
// Idempotency-Key key; the caller closes the answer's body.
func post(t *testing.T, url, tok, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// postRun starts a direct Run with key and returns its id.
func postRun(t *testing.T, base, tok, key string) string {
	t.Helper()
	res := post(t, base+"/v1/runs", tok, key, `{"kind":"capability","name":"enrich"}`)
	defer res.Body.Close()
	var started struct {
		Run struct {
			ID string `json:"id"`
		} `json:"run"`
	}
	if err := json.NewDecoder(res.Body).Decode(&started); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("start = %d, %v", res.StatusCode, err)
	}
	return started.Run.ID
}

func getJSON(t *testing.T, url, tok string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d, %v", url, res.StatusCode, err)
	}
}

func getText(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}
