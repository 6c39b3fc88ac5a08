package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// seen is one request a fake server received.
type seen struct {
	method, path, query string
	key, auth, agent    string
	prefer, ifMatch     string
	body                string
}

// fake is a scripted server: the nth request is answered by the nth step,
// the requests past the script by the last step.
type fake struct {
	mu    sync.Mutex
	steps []http.HandlerFunc
	seen  []seen
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	n := len(f.seen)
	f.seen = append(f.seen, seen{
		method: r.Method, path: r.URL.EscapedPath(), query: r.URL.RawQuery,
		key: r.Header.Get("Idempotency-Key"), auth: r.Header.Get("Authorization"),
		agent: r.Header.Get("User-Agent"), body: string(body),
		prefer: r.Header.Get("Prefer"), ifMatch: r.Header.Get("If-Match"),
	})
	step := f.steps[min(n, len(f.steps)-1)]
	f.mu.Unlock()
	step(w, r)
}

func (f *fake) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.seen...)
}

// serve starts a fake server answering with steps.
func serve(t *testing.T, steps ...http.HandlerFunc) (*fake, *httptest.Server) {
	t.Helper()
	f := &fake{steps: steps}
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	return f, ts
}

// waits records the waits a client asked for instead of spending them.
type waits struct {
	mu  sync.Mutex
	all []time.Duration
	// hook, when set, runs on each wait.
	hook func(n int)
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.all = append(w.all, d)
	n := len(w.all)
	w.mu.Unlock()
	if w.hook != nil {
		w.hook(n)
	}
	return ctx.Err()
}

func (w *waits) list() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.all...)
}

// newTestClient returns a client of baseURL whose waits are recorded, not
// spent.
func newTestClient(t *testing.T, baseURL string, p RetryPolicy) (*Client, *waits) {
	t.Helper()
	c, err := New(baseURL, Options{Token: "tok", Retry: p})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	w := &waits{}
	c.sleep = w.sleep
	return c, w
}

// problem answers a problem document with status and code, and the
// Retry-After header when retryAfter is set.
func problem(status int, code, retryAfter string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("X-Request-Id", "req-1")
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"https://searchd.dev/problems/%[1]s","title":"T","status":%[2]d,"detail":"D","code":"%[1]s"}`, code, status)
	}
}

const runJSON = `{"id":"8c0b9a8e-7b2c-4d0f-9d38-3f6d2f1f2a11","organization_id":"0b7e2d5c-8f07-4b6f-a3a5-77d8d0e1f9c2",` +
	`"kind":"saved_search","saved_search_id":"5f9f1c55-3a0e-4e6b-9b9c-2b7f6b0c1d22","snapshot_id":"6a1d2c33-4b5e-4f6a-8b7c-9d0e1f2a3b44",` +
	`"name":"n","status":"queued","options":{"max_results":100,"note":""},"input":null,` +
	`"created_at":"2025-01-02T03:04:05Z","retain_until":"2026-02-02T03:04:05Z"}`

// started answers a start: 201, or 200 replayed.
func started(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if status == http.StatusOK {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, `{"run":`+runJSON+`,"snapshot":null}`)
	}
}

const providerJobJSON = `{"id":"3e0c7a1b-2d4f-4a6b-8c9d-0e1f2a3b4c55","organization_id":"0b7e2d5c-8f07-4b6f-a3a5-77d8d0e1f9c2",` +
	`"run_id":"8c0b9a8e-7b2c-4d0f-9d38-3f6d2f1f2a11","provider":"acme","provider_job_id":"acme-1","status":"pending",` +
	`"result":null,"version":1,"created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:05Z",` +
	`"callback_path":"/v1/callbacks/acme/jobs/3e0c7a1b-2d4f-4a6b-8c9d-0e1f2a3b4c55"}`

// registered answers a provider job registration: 201 for the one that
// created the job, 200 for a repeat.
func registered(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, providerJobJSON)
	}
}

// registerParams is a registration for the fakes.
var registerParams = RegisterProviderJobParams{RunID: "8c0b9a8e-7b2c-4d0f-9d38-3f6d2f1f2a11", Provider: "acme", ProviderJobID: "acme-1"}

func runOK(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, runJSON)
}

func savedSearchCreated(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, `{"id":"5f9f1c55-3a0e-4e6b-9b9c-2b7f6b0c1d22","organization_id":"0b7e2d5c-8f07-4b6f-a3a5-77d8d0e1f9c2",`+
		`"name":"n","brief":{"query":"q"},"baseline":{"items":[],"cursor":null},"version":1,`+
		`"created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:05Z"}`)
}

// hangUp closes the connection without an answer, after the request
// reached the server: the ambiguous failure.
func hangUp(w http.ResponseWriter, r *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

func TestStartRetriesInProgressWithTheSameKeyAndBody(t *testing.T) {
	t.Parallel()
	f, ts := serve(t, problem(http.StatusConflict, "in_progress", "2"), problem(http.StatusConflict, "in_progress", "1"), started(http.StatusCreated))
	c, w := newTestClient(t, ts.URL, RetryPolicy{})

	res, err := c.StartSavedSearch(context.Background(), "5f9f1c55-3a0e-4e6b-9b9c-2b7f6b0c1d22", StartOptions{MaxResults: 7, Note: "n"})
	if err != nil {
		t.Fatalf("StartSavedSearch: %v", err)
	}
	reqs := f.requests()
	if len(reqs) != 3 {
		t.Fatalf("server saw %d requests, want 3", len(reqs))
	}
	if _, err := uuid.Parse(reqs[0].key); err != nil {
		t.Errorf("minted key %q is not a UUID", reqs[0].key)
	}
	for i, r := range reqs {
		if r.key != reqs[0].key || r.body != `{"max_results":7,"note":"n"}` {
			t.Errorf("attempt %d sent key %q body %q, want key %q and the same body every time", i+1, r.key, r.body, reqs[0].key)
		}
		if r.method != http.MethodPost || r.path != "/v1/saved-searches/5f9f1c55-3a0e-4e6b-9b9c-2b7f6b0c1d22/start" {
			t.Errorf("attempt %d was %s %s", i+1, r.method, r.path)
		}
	}
	// Retry-After wins over a backoff that cannot reach it (100 ms, 200 ms).
	if got := w.list(); len(got) != 2 || got[0] != 2*time.Second || got[1] != time.Second {
		t.Errorf("waits = %v, want [2s 1s] from Retry-After", got)
	}
	if !res.Created || res.Replayed || res.Attempts != 3 || res.IdempotencyKey != reqs[0].key || res.Run.ID == "" || res.Snapshot != nil {
		t.Errorf("result = %+v, want created on attempt 3 with the sent key", res)
	}
}

func TestGivenKeyIsSentOnEveryAttempt(t *testing.T) {
	t.Parallel()
	f, ts := serve(t, problem(http.StatusServiceUnavailable, "unavailable", "5"), started(http.StatusOK))
	c, _ := newTestClient(t, ts.URL, RetryPolicy{})

	res, err := c.StartRun(context.Background(), DirectStart{Kind: KindCapability, Name: "x", Input: map[string]int{"a": 1}},
		WithIdempotencyKey(`order 42 "retry"`))
	if err != nil {
		t.Fatalf("StartRun: %v", err)
	}
	for i, r := range f.requests() {
		if r.key != `order 42 "retry"` || r.body != `{"input":{"a":1},"kind":"capability","name":"x"}` {
			t.Errorf("attempt %d sent key %q body %s", i+1, r.key, r.body)
		}
	}
	if res.Created || !res.Replayed || res.Attempts != 2 {
		t.Errorf("result created=%v replayed=%v attempts=%d, want a replay on attempt 2", res.Created, res.Replayed, res.Attempts)
	}
}

func TestTransientFailuresOfSafeRequestsAreRetried(t *testing.T) {
	t.Parallel()
	httpDate := time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name  string
		first http.HandlerFunc
		// wantWait is the least wait before the retry.
		wantWait time.Duration
	}{
		{"503 with Retry-After seconds", problem(http.StatusServiceUnavailable, "unavailable", "1"), time.Second},
		{"429 with Retry-After date", problem(http.StatusTooManyRequests, "rate_limited", httpDate), time.Second},
		{"502 from a gateway", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
		}, 0},
		{"504 from a gateway", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusGatewayTimeout) }, 0},
		{"connection closed before the answer", hangUp, 0},
	}
	// Each call's retry repeats its request to the letter: a start with its
	// key; a registration, which carries no key, with its body (the
	// provider job id keys it, so the repeat finds the job).
	calls := []struct {
		name    string
		request string // method and path
		answer  http.HandlerFunc
		call    func(t *testing.T, c *Client)
	}{
		{"read", "GET /v1/runs/8c0b9a8e-7b2c-4d0f-9d38-3f6d2f1f2a11", runOK, func(t *testing.T, c *Client) {
			if run, err := c.GetRun(context.Background(), "8c0b9a8e-7b2c-4d0f-9d38-3f6d2f1f2a11"); err != nil || run.Status != "queued" {
				t.Fatalf("GetRun = %+v, %v; want the run", run, err)
			}
		}},
		{"start", "POST /v1/saved-searches/s/start", started(http.StatusOK), func(t *testing.T, c *Client) {
			if _, err := c.StartSavedSearch(context.Background(), "s", StartOptions{}); err != nil {
				t.Fatalf("StartSavedSearch: %v", err)
			}
		}},
		{"provider job registration", "POST /v1/provider-jobs", registered(http.StatusOK), func(t *testing.T, c *Client) {
			res, err := c.RegisterProviderJob(context.Background(), registerParams)
			if err != nil || res.Created || res.Attempts != 2 || res.Job.ProviderJobID != "acme-1" {
				t.Fatalf("RegisterProviderJob = %+v, %v; want the job answered 200 on attempt 2, not created", res, err)
			}
		}},
		{"provider job read", "GET /v1/provider-jobs/3e0c7a1b-2d4f-4a6b-8c9d-0e1f2a3b4c55", registered(http.StatusOK), func(t *testing.T, c *Client) {
			if job, err := c.GetProviderJob(context.Background(), "3e0c7a1b-2d4f-4a6b-8c9d-0e1f2a3b4c55"); err != nil || job.Status != "pending" {
				t.Fatalf("GetProviderJob = %+v, %v; want the job", job, err)
			}
		}},
	}
	for _, tt := range tests {
		for _, call := range calls {
			t.Run(tt.name+"/"+call.name, func(t *testing.T) {
				t.Parallel()
				f, ts := serve(t, tt.first, call.answer)
				c, w := newTestClient(t, ts.URL, RetryPolicy{})
				call.call(t, c)
				if reqs := f.requests(); len(reqs) != 2 || reqs[0] != reqs[1] || reqs[1].method+" "+reqs[1].path != call.request {
					t.Errorf("requests = %+v, want the same %s twice", reqs, call.request)
				}
				if got := w.list(); len(got) != 1 || got[0] < tt.wantWait {
					t.Errorf("waits = %v, want one of at least %s", got, tt.wantWait)
				}
			})
		}
	}
}

func TestFinalAnswersAreNotRetried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		code   string
		want   error
	}{
		{http.StatusBadRequest, "validation_failed", ErrValidation},
		{http.StatusBadRequest, "invalid_idempotency_key", ErrInvalidIdempotencyKey},
		{http.StatusUnauthorized, "unauthorized", ErrUnauthorized},
		{http.StatusNotFound, "not_found", ErrNotFound},
		{http.StatusMethodNotAllowed, "method_not_allowed", ErrMethodNotAllowed},
		{http.StatusConflict, "already_registered", ErrAlreadyRegistered},
		{http.StatusRequestEntityTooLarge, "payload_too_large", ErrPayloadTooLarge},
		{http.StatusUnsupportedMediaType, "unsupported_media_type", ErrUnsupportedMediaType},
		{http.StatusUnprocessableEntity, "key_reused", ErrKeyReused},
		{http.StatusInternalServerError, "internal", ErrInternal},
	}
	calls := []struct {
		name string
		call func(c *Client) error
		// then answers the attempt a wrong retry would make.
		then http.HandlerFunc
	}{
		{"StartSavedSearch", func(c *Client) error {
			_, err := c.StartSavedSearch(context.Background(), "s", StartOptions{})
			return err
		}, started(http.StatusCreated)},
		{"RegisterProviderJob", func(c *Client) error {
			_, err := c.RegisterProviderJob(context.Background(), registerParams)
			return err
		}, registered(http.StatusCreated)},
	}
	for _, tt := range tests {
		for _, call := range calls {
			t.Run(fmt.Sprintf("%d %s/%s", tt.status, tt.code, call.name), func(t *testing.T) {
				t.Parallel()
				// Retry-After is present to show it does not make a final
				// answer retryable.
				f, ts := serve(t, problem(tt.status, tt.code, "1"), call.then)
				c, w := newTestClient(t, ts.URL, RetryPolicy{})
				err := call.call(c)
				var ae *APIError
				if !errors.As(err, &ae) || ae.Status != tt.status || ae.Code != tt.code {
					t.Fatalf("%s error = %v, want an APIError %d %s", call.name, err, tt.status, tt.code)
				}
				if !errors.Is(err, tt.want) {
					t.Errorf("errors.Is(%v, %v) = false", err, tt.want)
				}
				if n := len(f.requests()); n != 1 || len(w.list()) != 0 {
					t.Errorf("made %d requests and %d waits, want 1 and none", n, len(w.list()))
				}
			})
		}
	}
}

func TestWritesWithoutKeyAreNotRetriedOnceSent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		first http.HandlerFunc
	}{
		{"503", problem(http.StatusServiceUnavailable, "unavailable", "1")},
		{"429", problem(http.StatusTooManyRequests, "rate_limited", "1")},
		{"connection closed before the answer", hangUp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, ts := serve(t, tt.first, savedSearchCreated)
			c, _ := newTestClient(t, ts.URL, RetryPolicy{})
			name := "n"
			if _, err := c.UpdateSavedSearch(context.Background(), "5f9f1c55-3a0e-4e6b-9b9c-2b7f6b0c1d22", UpdateSavedSearchParams{Name: &name}); err == nil {
				t.Fatal("UpdateSavedSearch succeeded, want the first failure")
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("UpdateSavedSearch made %d requests, want 1: it may have been applied", n)
			}
		})
	}
}

// TestCreatesCarryAKeyAndRetryWithIt: a saved-search create sends an
// Idempotency-Key and repeats it on every retry after an ambiguous
// failure, so the server creates once; a given key is sent as it is.
func TestCreatesCarryAKeyAndRetryWithIt(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		first http.HandlerFunc
	}{
		{"503", problem(http.StatusServiceUnavailable, "unavailable", "1")},
		{"in progress", problem(http.StatusConflict, "in_progress", "1")},
		{"connection closed before the answer", hangUp},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, ts := serve(t, tt.first, savedSearchCreated)
			c, _ := newTestClient(t, ts.URL, RetryPolicy{})
			if _, err := c.CreateSavedSearch(context.Background(), CreateSavedSearchParams{Name: "n", Brief: Brief{Query: "q"}}); err != nil {
				t.Fatalf("CreateSavedSearch: %v", err)
			}
			reqs := f.requests()
			if len(reqs) != 2 || reqs[0].key == "" || reqs[0].key != reqs[1].key {
				t.Errorf("requests %+v, want two with one Idempotency-Key", reqs)
			}
		})
	}
	f, ts := serve(t, savedSearchCreated)
	c, _ := newTestClient(t, ts.URL, RetryPolicy{})
	if _, err := c.CreateSavedSearch(context.Background(), CreateSavedSearchParams{Name: "n", Brief: Brief{Query: "q"}},
		WithIdempotencyKey("create-42")); err != nil {
		t.Fatal(err)
	}
	if got := f.requests()[0].key; got != "create-42" {
		t.Errorf("key = %q, want create-42", got)
	}
}

// refusedUntilWait returns the URL of a port that refuses connections
// until the client's first wait, when a server with h starts on it.
func refusedUntilWait(t *testing.T, h http.Handler) (string, func(n int)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var once sync.Once
	return "http://" + addr, func(int) {
		once.Do(func() {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Errorf("listening again on %s: %v", addr, err)
				return
			}
			ts := httptest.NewUnstartedServer(h)
			ts.Listener.Close()
			ts.Listener = ln
			ts.Start()
			t.Cleanup(ts.Close)
		})
	}
}

func TestConnectionRefusedIsRetried(t *testing.T) {
	t.Parallel()
	t.Run("start", func(t *testing.T) {
		t.Parallel()
		f := &fake{steps: []http.HandlerFunc{started(http.StatusCreated)}}
		base, up := refusedUntilWait(t, f)
		c, w := newTestClient(t, base, RetryPolicy{})
		w.hook = up
		res, err := c.StartSavedSearch(context.Background(), "s", StartOptions{})
		if err != nil {
			t.Fatalf("StartSavedSearch: %v", err)
		}
		if n := len(f.requests()); n != 1 || res.Attempts != 2 || !res.Created {
			t.Errorf("server saw %d requests, result %+v; want 1 request, created on attempt 2", n, res)
		}
	})
	// A refused connection proves the request never left, so even a write
	// without a key is retried.
	t.Run("create", func(t *testing.T) {
		t.Parallel()
		f := &fake{steps: []http.HandlerFunc{savedSearchCreated}}
		base, up := refusedUntilWait(t, f)
		c, w := newTestClient(t, base, RetryPolicy{})
		w.hook = up
		ss, err := c.CreateSavedSearch(context.Background(), CreateSavedSearchParams{Name: "n", Brief: Brief{Query: "q"}})
		if err != nil {
			t.Fatalf("CreateSavedSearch: %v", err)
		}
		if n := len(f.requests()); n != 1 || ss.Version != 1 {
			t.Errorf("server saw %d requests and answered %+v, want 1 and version 1", n, ss)
		}
	})
}

func TestRetryAfterPastTheDeadlineReturnsTheAnswerAtOnce(t *testing.T) {
	t.Parallel()
	f, ts := serve(t, problem(http.StatusConflict, "in_progress", "10"), started(http.StatusCreated))
	c, err := New(ts.URL, Options{Token: "tok"}) // real waits
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.StartSavedSearch(ctx, "s", StartOptions{})
	if !errors.Is(err, ErrInProgress) {
		t.Fatalf("StartSavedSearch error = %v, want ErrInProgress", err)
	}
	var ae *APIError
	if !errors.As(err, &ae) || ae.RetryAfter != 10*time.Second {
		t.Errorf("error = %#v, want its RetryAfter of 10s", err)
	}
	// Returned without waiting for the deadline: the context is still live.
	if ctx.Err() != nil || len(f.requests()) != 1 {
		t.Errorf("returned with context %v after %d requests, want a live context and 1 request", ctx.Err(), len(f.requests()))
	}
}

func TestCanceledWaitReturnsContextAndLastError(t *testing.T) {
	t.Parallel()
	f, ts := serve(t, problem(http.StatusServiceUnavailable, "unavailable", "1"))
	c, w := newTestClient(t, ts.URL, RetryPolicy{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.hook = func(int) { cancel() }
	_, err := c.GetSavedSearch(ctx, "s")
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrUnavailable) {
		t.Errorf("GetSavedSearch error = %v, want context.Canceled and ErrUnavailable", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("made %d requests, want 1", n)
	}
}

func TestAttemptsRunOut(t *testing.T) {
	t.Parallel()
	f, ts := serve(t, problem(http.StatusServiceUnavailable, "unavailable", ""))
	c, w := newTestClient(t, ts.URL, RetryPolicy{MaxAttempts: 4})
	_, err := c.ListRuns(context.Background(), ListRunsParams{})
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("ListRuns error = %v, want ErrUnavailable", err)
	}
	if n, nw := len(f.requests()), len(w.list()); n != 4 || nw != 3 {
		t.Errorf("made %d requests and %d waits, want 4 and 3", n, nw)
	}
}

func TestMaxAttemptsOneDisablesRetries(t *testing.T) {
	t.Parallel()
	f, ts := serve(t, problem(http.StatusConflict, "in_progress", "1"), started(http.StatusCreated))
	c, _ := newTestClient(t, ts.URL, RetryPolicy{MaxAttempts: 1})
	if _, err := c.StartSavedSearch(context.Background(), "s", StartOptions{}); !errors.Is(err, ErrInProgress) {
		t.Errorf("StartSavedSearch error = %v, want ErrInProgress", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("made %d requests, want 1", n)
	}
}

func TestTimedOutAttempt(t *testing.T) {
	t.Parallel()
	stall := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}
	policy := RetryPolicy{AttemptTimeout: 100 * time.Millisecond}
	t.Run("read is retried", func(t *testing.T) {
		t.Parallel()
		f, ts := serve(t, stall, runOK)
		c, _ := newTestClient(t, ts.URL, policy)
		if _, err := c.GetRun(context.Background(), "r"); err != nil {
			t.Fatalf("GetRun: %v", err)
		}
		if n := len(f.requests()); n != 2 {
			t.Errorf("made %d requests, want 2", n)
		}
	})
	t.Run("write without key is not", func(t *testing.T) {
		t.Parallel()
		f, ts := serve(t, stall, savedSearchCreated)
		c, _ := newTestClient(t, ts.URL, policy)
		_, err := c.UpdateSavedSearch(context.Background(), "s", UpdateSavedSearchParams{Name: new("m")})
		if err == nil || !strings.Contains(err.Error(), "attempt timed out") {
			t.Errorf("UpdateSavedSearch error = %v, want the attempt's timeout", err)
		}
		if n := len(f.requests()); n != 1 {
			t.Errorf("made %d requests, want 1", n)
		}
	})
}

func TestBackoffIsCappedFullJitter(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, MaxRetryAfter: 3 * time.Second}.WithDefaults()
	for n := 1; n <= 12; n++ {
		ceiling := min(p.BaseDelay<<(n-1), p.MaxDelay)
		distinct := map[time.Duration]bool{}
		for range 200 {
			d := p.delay(n, 0)
			if d < 0 || d > ceiling {
				t.Fatalf("delay(%d, 0) = %s, want within [0, %s]", n, d, ceiling)
			}
			distinct[d] = true
		}
		if len(distinct) < 100 {
			t.Errorf("delay(%d, 0) took %d distinct values in 200 draws, want jitter", n, len(distinct))
		}
		if d := p.delay(n, 2*time.Second); d < 2*time.Second || d > max(2*time.Second, ceiling) {
			t.Errorf("delay(%d, 2s) = %s, want at least the server's 2s", n, d)
		}
		if d := p.delay(n, time.Hour); d != 3*time.Second {
			t.Errorf("delay(%d, 1h) = %s, want MaxRetryAfter 3s", n, d)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{" 1 ", time.Second},
		{"0", 0},
		{"-5", 0},
		{"soon", 0},
		{"99999999999999999", 24 * time.Hour},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"Tuesday, 04-Mar-25 05:07:07 GMT", time.Minute}, // RFC 850
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	src := func(context.Context) (string, error) { return "t", nil }
	tests := []struct {
		name    string
		baseURL string
		opts    Options
		want    string
	}{
		{"relative URL", "searchd:8080", Options{Token: "t"}, "absolute http or https"},
		{"no host", "http://", Options{Token: "t"}, "absolute http or https"},
		{"query", "http://h/?x=1", Options{Token: "t"}, "no query"},
		{"no token", "http://h", Options{}, "exactly one of Options.Token and Options.TokenSource"},
		{"two tokens", "http://h", Options{Token: "t", TokenSource: src}, "exactly one of"},
		{"negative attempts", "http://h", Options{Token: "t", Retry: RetryPolicy{MaxAttempts: -1}}, "Retry.MaxAttempts"},
		{"negative base", "http://h", Options{Token: "t", Retry: RetryPolicy{BaseDelay: -1}}, "Retry.BaseDelay"},
		{"cap below base", "http://h", Options{Token: "t", Retry: RetryPolicy{BaseDelay: time.Second, MaxDelay: time.Millisecond}}, "at least Retry.BaseDelay"},
		{"negative retry-after cap", "http://h", Options{Token: "t", Retry: RetryPolicy{MaxRetryAfter: -1}}, "Retry.MaxRetryAfter"},
		{"negative attempt timeout", "http://h", Options{Token: "t", Retry: RetryPolicy{AttemptTimeout: -1}}, "Retry.AttemptTimeout"},
	}
	for _, tt := range tests {
		if _, err := New(tt.baseURL, tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New(%q) error = %v, want one saying %q", tt.name, tt.baseURL, err, tt.want)
		}
	}
	c, err := New("https://h.example/prefix/", Options{TokenSource: src, Retry: RetryPolicy{BaseDelay: 10 * time.Second}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if c.base != "https://h.example/prefix" || c.retry.MaxDelay != 10*time.Second || c.retry.MaxAttempts != DefaultMaxAttempts {
		t.Errorf("client base %q policy %+v, want the prefix without its slash and MaxDelay raised to BaseDelay", c.base, c.retry)
	}
}

func TestRequestsCarryTokenAgentAndPrefix(t *testing.T) {
	t.Parallel()
	f, ts := serve(t, problem(http.StatusServiceUnavailable, "unavailable", ""), func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"items":[],"next_cursor":null}`)
	})
	var calls int
	var mu sync.Mutex
	c, err := New(ts.URL+"/api/", Options{
		TokenSource: func(context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			return fmt.Sprintf("tok%d", calls), nil
		},
		UserAgent: "app/2",
	})
	if err != nil {
		t.Fatal(err)
	}
	c.sleep = (&waits{}).sleep
	page, err := c.ListRuns(context.Background(), ListRunsParams{SavedSearchID: "5f9f", Limit: 5, Cursor: "a+b/c="})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	if page.NextCursor != "" || page.Items == nil {
		t.Errorf("page = %+v, want an empty last page", page)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("made %d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if want := fmt.Sprintf("Bearer tok%d", i+1); r.auth != want || r.agent != "app/2" {
			t.Errorf("attempt %d sent Authorization %q User-Agent %q, want %q and app/2 (a fresh token per attempt)", i+1, r.auth, r.agent, want)
		}
		if r.path != "/api/v1/runs" || r.query != "cursor=a%2Bb%2Fc%3D&limit=5&saved_search_id=5f9f" {
			t.Errorf("attempt %d asked %s?%s", i+1, r.path, r.query)
		}
	}
}

func TestTokenSourceErrorEndsTheCall(t *testing.T) {
	t.Parallel()
	f, ts := serve(t, runOK)
	boom := errors.New("vault sealed")
	c, err := New(ts.URL, Options{TokenSource: func(context.Context) (string, error) { return "", boom }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRun(context.Background(), "r"); !errors.Is(err, boom) {
		t.Errorf("GetRun error = %v, want the token source's", err)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("made %d requests, want none", n)
	}
}

func TestKeysAndIDsAreCheckedBeforeSending(t *testing.T) {
	t.Parallel()
	f, ts := serve(t, started(http.StatusCreated))
	c, _ := newTestClient(t, ts.URL, RetryPolicy{})
	ctx := context.Background()
	for _, key := range []string{"", " lead", "trail ", "new\nline", "é", strings.Repeat("k", 256)} {
		if _, err := c.StartSavedSearch(ctx, "s", StartOptions{}, WithIdempotencyKey(key)); !errors.Is(err, ErrInvalidIdempotencyKey) {
			t.Errorf("StartSavedSearch with key %q: error = %v, want ErrInvalidIdempotencyKey", key, err)
		}
	}
	if _, err := c.StartSavedSearch(ctx, "", StartOptions{}); err == nil {
		t.Error("StartSavedSearch with an empty id succeeded")
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("made %d requests, want none", n)
	}
	if _, err := c.StartSavedSearch(ctx, "a/b", StartOptions{}, WithIdempotencyKey(strings.Repeat("k", 255))); err != nil {
		t.Fatalf("StartSavedSearch: %v", err)
	}
	if r := f.requests()[0]; r.path != "/v1/saved-searches/a%2Fb/start" || r.body != "{}" {
		t.Errorf("request %s with body %s, want the id escaped and an empty object", r.path, r.body)
	}
}

func TestAPIError(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("X-Request-Id", "hdr-id")
	h.Set("Retry-After", "4")
	body := `{"type":"https://searchd.dev/problems/validation_failed","title":"Validation failed","status":400,` +
		`"detail":"the body has invalid fields","code":"validation_failed",` +
		`"errors":[{"field":"brief.query","message":"is required"},{"field":"","message":"is invalid"}]}`
	e := newAPIError(http.StatusBadRequest, h, []byte(body))
	want := &APIError{Status: 400, Code: "validation_failed", Title: "Validation failed", Detail: "the body has invalid fields",
		Errors:    []FieldError{{"brief.query", "is required"}, {"", "is invalid"}},
		RequestID: "hdr-id", RetryAfter: 4 * time.Second}
	if got, _ := json.Marshal(e); string(got) != string(must(json.Marshal(want))) {
		t.Errorf("newAPIError = %s, want %s", got, must(json.Marshal(want)))
	}
	if got := e.Error(); got != "searchd: 400 validation_failed: the body has invalid fields (brief.query is required; body is invalid)" {
		t.Errorf("Error() = %q", got)
	}
	if !errors.Is(e, ErrValidation) || errors.Is(e, ErrNotFound) {
		t.Errorf("errors.Is matches the wrong sentinels for %v", e)
	}

	// A body that is not a problem: a proxy's page. The status decides.
	proxy := newAPIError(http.StatusServiceUnavailable, http.Header{}, []byte("  <html>"+strings.Repeat("x", 300)+"</html>\n"))
	if proxy.Code != "" || proxy.Title != "Service Unavailable" || len(proxy.Detail) != maxDetail+3 || !errors.Is(proxy, ErrUnavailable) {
		t.Errorf("proxy answer = %+v, want no code, the status text, a cut detail and ErrUnavailable", proxy)
	}
	internal := newAPIError(http.StatusInternalServerError, h, []byte(`{"code":"internal","detail":"d","request_id":"body-id"}`))
	if internal.RequestID != "body-id" || !strings.HasSuffix(internal.Error(), "[request_id body-id]") || !errors.Is(internal, ErrInternal) {
		t.Errorf("internal answer = %+v (%q), want the body's request id in the message", internal, internal.Error())
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
