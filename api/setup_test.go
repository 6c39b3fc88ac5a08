package api_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/readiness"
	"github.com/searchd/searchd/internal/seatq"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/seatqtest"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/runs/runstream"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/schedule"
	"github.com/searchd/searchd/servicekeys"
	"github.com/searchd/searchd/snapshot"
	"github.com/searchd/searchd/webhooks"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

// testSecret signs the tokens of every test server.
var testSecret = []byte("test-secret-test-secret-test-secret-0123")

// bundle is one test's server and what it needs to talk to it.
type bundle struct {
	t      testing.TB
	pool   *pgxpool.Pool
	server *httptest.Server
	api    *api.Server
	// admission is the server's seat queue.
	admission *seatq.Queue
	// org is the caller's organization; token authenticates as it.
	org   uuid.UUID
	token string
	logs  *pgtest.SyncBuffer
}

// setupOpts tune setup; the zero value is a plain server on a fresh
// database.
type setupOpts struct {
	// pool, when set, is used instead of a fresh test database.
	pool *pgxpool.Pool
	// clock is the database clock of every store: the plane, the Runs,
	// and so admission and provider jobs. Nil is the database's now().
	clock *dbclock.Clock
	// observer counts the drops of provider callbacks; nil observes none.
	observer providerjobs.Observer
	// deps edits the dependencies before the server is built.
	deps func(d *api.Deps)
}

// stores are the plane and the stores of a test server, each built once on
// one pool at one database clock, as cmd/searchd builds them.
type stores struct {
	pool       *pgxpool.Pool
	plane      *idempotency.Service
	searches   *savedsearch.Store
	snapshots  *snapshot.Store
	runs       *runs.Store
	dispatches *dispatch.Store
}

// newStores builds the stores on pool at clock (nil: the database's now()).
func newStores(pool *pgxpool.Pool, clock *dbclock.Clock) stores {
	return stores{
		pool:       pool,
		plane:      idempotency.NewService(pool, idempotency.Config{Clock: clock}),
		searches:   savedsearch.NewStore(pool),
		snapshots:  snapshot.NewStore(pool),
		runs:       runs.NewStore(pool, runs.Config{Clock: clock}),
		dispatches: dispatch.NewStore(pool, clock),
	}
}

// starter returns a starter on s with cfg; the test fails when
// admission.NewStarter refuses them.
func (s stores) starter(t testing.TB, cfg admission.Config) *admission.Starter {
	t.Helper()
	starter, err := admission.NewStarter(admission.Deps{
		Pool: s.pool, Plane: s.plane, SavedSearches: s.searches, Snapshots: s.snapshots, Runs: s.runs,
	}, cfg)
	if err != nil {
		t.Fatalf("admission.NewStarter: %v", err)
	}
	return starter
}

// deps are the dependencies api.New requires, on s: its stores, a
// starter at its defaults, provider jobs with jobs, an seat queue as
// cmd/searchd builds it and the test verifier.
func (s stores) deps(t testing.TB, jobs providerjobs.Config) api.Deps {
	return api.Deps{
		Ready: readiness.Pool(s.pool), SavedSearches: s.searches, Snapshots: s.snapshots, Runs: s.runs,
		Starter: s.starter(t, admission.Config{}), ProviderJobs: providerjobs.New(s.pool, s.plane, jobs),
		Dispatches: s.dispatches, Seats: admissionFor(t, s.pool), Verifier: testVerifier(t, nil),
	}
}

// fakeDeps are the dependencies api.New requires, with starter and fakes
// that touch no database.
func fakeDeps(t testing.TB, starter api.Starter) api.Deps {
	return api.Deps{
		Ready: func(context.Context) error { return nil }, SavedSearches: noSavedSearches{},
		Snapshots: noSnapshots{}, Runs: noRuns{}, Starter: starter, ProviderJobs: noProviderJobs{},
		Dispatches: noDispatches{}, Seats: defaultAdmission(t), Verifier: testVerifier(t, nil),
	}
}

func setup(t testing.TB, opts setupOpts) *bundle {
	t.Helper()
	pool := opts.pool
	if pool == nil {
		pool = pgtest.NewDB(t)
	}
	logs := &pgtest.SyncBuffer{}
	st := newStores(pool, opts.clock)
	d := st.deps(t, providerjobs.Config{Observer: opts.observer})
	d.Verifier = nil // made below, on the clock opts.deps may set
	// The plane a server built without one made for itself: the default
	// config, on the test's pool.
	d.Plane = idempotency.NewService(pool, idempotency.Config{})
	d.Schedules = schedule.NewStore(pool, opts.clock)
	d.ServiceKeys = servicekeys.NewService(pool, opts.clock)
	d.Webhooks = webhooks.NewStore(pool, webhooks.Config{Clock: opts.clock, AllowHTTPLoopback: true})
	d.ProviderSecrets = map[string][]byte{acme: acmeSecret, otherProvider: otherSecret}
	d.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// Streams that end within a second, so that the tests of every route,
	// which read each answer whole, are not held by a Run's event stream
	// (events_test.go sets its own).
	streams, err := runstream.New(runstream.Config{Poll: 100 * time.Millisecond, MaxDuration: time.Second}, d.Runs, d.Logger)
	if err != nil {
		t.Fatal(err)
	}
	d.Streams = streams
	if opts.deps != nil {
		opts.deps(&d)
	}
	if d.Verifier == nil {
		d.Verifier = testVerifier(t, d.Now)
	}
	srv, err := api.New(d)
	if err != nil {
		t.Fatalf("api.New: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	b := &bundle{t: t, pool: pool, server: ts, api: srv, admission: d.Seats, org: uuid.New(), logs: logs}
	b.token = b.tokenFor(b.org, "tester")
	return b
}

// setupDown is setup on a database that is down: port 1 on loopback,
// where nothing listens and every connection is refused.
func setupDown(t testing.TB) *bundle {
	t.Helper()
	down, err := pgxpool.New(context.Background(), "postgres://searchd@127.0.0.1:1/searchd?connect_timeout=2&sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(down.Close)
	return setup(t, setupOpts{pool: down})
}

// admissionFor returns an seat queue at its defaults, its seats as
// many as pool has connections, as cmd/searchd's newAdmission builds it.
func admissionFor(t testing.TB, pool *pgxpool.Pool) *seatq.Queue {
	t.Helper()
	return seatqtest.New(t, seatq.Config{Seats: int(pool.Config().MaxConns)})
}

// defaultAdmission returns an seat queue at seatq's defaults.
func defaultAdmission(t testing.TB) *seatq.Queue {
	t.Helper()
	return seatqtest.New(t, seatq.Config{})
}

// testVerifier returns a verifier of the tokens testSecret signs, judged
// by now (nil: time.Now).
func testVerifier(t testing.TB, now func() time.Time) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(context.Background(), auth.Config{Secret: testSecret, Now: now})
	if err != nil {
		t.Fatalf("auth.NewVerifier: %v", err)
	}
	return v
}

// tokenFor returns a valid token for org with sub actor.
func (b *bundle) tokenFor(org uuid.UUID, actor string) string {
	return b.sign(auth.SignToken, org, actor)
}

// runtimeTokenFor returns a runtime credential of org named actor, valid
// for an hour.
func (b *bundle) runtimeTokenFor(org uuid.UUID, actor string) string {
	return b.sign(auth.SignRuntimeToken, org, actor)
}

// adminTokenFor returns an admin's token of org named actor, valid for an
// hour.
func (b *bundle) adminTokenFor(org uuid.UUID, actor string) string {
	return b.sign(auth.SignAdminToken, org, actor)
}

// keyFor returns the token of a new service key of org with scopes,
// created in the store directly.
func (b *bundle) keyFor(org uuid.UUID, scopes ...servicekeys.Scope) string {
	b.t.Helper()
	tok, _, err := servicekeys.NewStore(b.pool, nil).Create(context.Background(), org,
		servicekeys.CreateParams{Name: "test key", Scopes: scopes, Actor: "tester"})
	if err != nil {
		b.t.Fatalf("creating a service key: %v", err)
	}
	return tok
}

// sign returns the token sign makes of org and actor, valid for an hour.
func (b *bundle) sign(sign func([]byte, uuid.UUID, string, time.Time, time.Duration) (string, error), org uuid.UUID, actor string) string {
	b.t.Helper()
	tok, err := sign(testSecret, org, actor, time.Now(), time.Hour)
	if err != nil {
		b.t.Fatalf("signing a token: %v", err)
	}
	return tok
}

// response is what a request answered.
type response struct {
	status int
	header http.Header
	body   []byte
}

// wantProblem fails t unless r is a problem of status and code; what (a
// format and its args) names the request.
func (r *response) wantProblem(t *testing.T, status int, code, what string, args ...any) {
	t.Helper()
	if r.status != status || r.problem(t).Code != code {
		t.Errorf("%s = %d %s, want %d %s", fmt.Sprintf(what, args...), r.status, r.body, status, code)
	}
}

// decode decodes the body into v, failing the test when it is not JSON.
func (r *response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// problem decodes a problem body and checks its media type and shape.
func (r *response) problem(t *testing.T) api.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != api.MediaTypeProblem {
		t.Fatalf("Content-Type = %q, want %q (body %s)", ct, api.MediaTypeProblem, r.body)
	}
	var p api.Problem
	r.decode(t, &p)
	if p.Status != r.status || p.Type != api.ProblemTypeBase+p.Code || p.Title == "" || p.Detail == "" {
		t.Fatalf("problem %+v does not match status %d or lacks a member", p, r.status)
	}
	if id := r.header.Get("X-Request-Id"); p.RequestID == "" || p.RequestID != id {
		t.Fatalf("problem request_id = %q, X-Request-Id = %q; want the same id in both", p.RequestID, id)
	}
	return p
}

// req describes one request; do sends it.
type req struct {
	method, path string
	// body is sent as is when a string or []byte, else encoded as JSON.
	// nil sends no body.
	body any
	// header is added; Content-Type defaults to application/json when a
	// body is sent, Authorization to the bundle's token.
	header map[string]string
	// noAuth sends no Authorization header.
	noAuth bool
	// token, when set, is sent instead of the bundle's token.
	token string
	// ctx is the request's context; nil is context.Background().
	ctx context.Context
}

// do sends r and returns the answer, after validating it against the
// OpenAPI document: every response any test receives is checked.
func (b *bundle) do(r req) *response {
	b.t.Helper()
	res, err := b.send(r)
	if err != nil {
		b.t.Fatal(err)
	}
	return res
}

// send is do for any goroutine: it reports failures as errors, including
// an answer the OpenAPI document does not allow.
func (b *bundle) send(r req) (*response, error) {
	var body io.Reader
	switch v := r.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(v)
	case []byte:
		body = bytes.NewReader(v)
	default:
		buf, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encoding body: %w", err)
		}
		body = bytes.NewReader(buf)
	}
	ctx := r.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	hr, err := http.NewRequestWithContext(ctx, r.method, b.server.URL+r.path, body)
	if err != nil {
		return nil, err
	}
	if r.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if !r.noAuth {
		hr.Header.Set("Authorization", "Bearer "+cmp.Or(r.token, b.token))
	}
	for k, v := range r.header {
		if v == "" {
			hr.Header.Del(k)
			continue
		}
		hr.Header.Set(k, v)
	}
	res, err := b.server.Client().Do(hr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	defer res.Body.Close()
	buf, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading answer: %w", r.method, r.path, err)
	}
	out := &response{status: res.StatusCode, header: res.Header, body: buf}
	if err := validateAgainstOpenAPI(hr, out); err != nil {
		return out, fmt.Errorf("%s %s answered %d %s, which the OpenAPI document does not allow: %w",
			r.method, r.path, out.status, out.body, err)
	}
	return out, nil
}

// openAPI is the loaded document and its router, shared by all tests.
var openAPI = sync.OnceValues(func() (routers.Router, error) {
	// The problem pages are HTML: checked as a string body.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, err
	}
	// A Run's event stream: every data line must be a RunEvent.
	runEvent := doc.Components.Schemas["RunEvent"]
	if runEvent == nil {
		return nil, errors.New("the document has no schema RunEvent")
	}
	openapi3filter.RegisterBodyDecoder("text/event-stream", func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		raw, err := io.ReadAll(body)
		if err != nil {
			return nil, err
		}
		for line := range strings.Lines(string(raw)) {
			data, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "data: ")
			if !ok {
				continue
			}
			var v any
			if err := json.Unmarshal([]byte(data), &v); err != nil {
				return nil, fmt.Errorf("event data %q: %w", data, err)
			}
			if err := runEvent.Value.VisitJSON(v); err != nil {
				return nil, fmt.Errorf("event data %s is no RunEvent: %w", data, err)
			}
		}
		return string(raw), nil
	})
	return gorillamux.NewRouter(doc)
})

// validateAgainstOpenAPI checks res, the answer to hr, against the OpenAPI
// document: its status must be documented for the operation, and its
// headers and body must match. A request no operation of the document
// names (an unknown path or method) has nothing to check.
func validateAgainstOpenAPI(hr *http.Request, res *response) error {
	router, err := openAPI()
	if err != nil {
		return err
	}
	// The router matches on the path alone; the host of the test server
	// is not the document's.
	route, params, err := router.FindRoute(hr)
	if err != nil {
		return nil
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    hr,
			PathParams: params,
			Route:      route,
		},
		Status:  res.status,
		Header:  res.header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(res.body)
	return openapi3filter.ValidateResponse(context.Background(), in)
}

// seedOpts describe a saved search to seed.
type seedOpts struct {
	org      uuid.UUID // default: the bundle's organization
	name     string
	query    string
	items    []string
	archived bool
}

// seedSavedSearch creates a saved search through the store, not the API.
func (b *bundle) seedSavedSearch(o seedOpts) *savedsearch.SavedSearch {
	b.t.Helper()
	if o.org == uuid.Nil {
		o.org = b.org
	}
	if o.name == "" {
		o.name = "seeded " + uuid.NewString()[:8]
	}
	if o.query == "" {
		o.query = "golang jobs"
	}
	store := savedsearch.NewStore(b.pool)
	ss, err := store.Create(context.Background(), o.org, savedsearch.CreateParams{
		Name:     o.name,
		Brief:    savedsearch.Brief{Query: o.query, Filters: map[string]any{"remote": true}},
		Baseline: savedsearch.Baseline{Items: o.items},
		Actor:    "seed",
	})
	if err != nil {
		b.t.Fatalf("seeding saved search: %v", err)
	}
	if o.archived {
		if err := store.Archive(context.Background(), o.org, ss.ID); err != nil {
			b.t.Fatalf("archiving seeded saved search: %v", err)
		}
	}
	return ss
}

// start posts a saved-search start with key and body.
func (b *bundle) start(id uuid.UUID, key string, body any) *response {
	b.t.Helper()
	return b.do(req{method: http.MethodPost, path: "/v1/saved-searches/" + id.String() + "/start",
		body: body, header: map[string]string{"Idempotency-Key": key}})
}

// count returns the number of rows a query counts.
func (b *bundle) count(query string, args ...any) int {
	b.t.Helper()
	return pgtest.Count(b.t, b.pool, query, args...)
}

// wantCount fails t unless query counts want.
func (b *bundle) wantCount(t testing.TB, want int, query string, args ...any) {
	t.Helper()
	if n := b.count(query, args...); n != want {
		t.Errorf("%s = %d, want %d", query, n, want)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal(%v): %v", v, err)
	}
	return b
}
