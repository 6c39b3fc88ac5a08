package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/searchd/searchd/admission"
	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/telemetry"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// holdClaim claims key for the start of the saved search ssID with opts on
// a plane of its own, as another worker preparing the same start would.
func (b *bundle) holdClaim(clock *dbclock.Clock, ssID uuid.UUID, key string, opts admission.StartOptions) {
	b.t.Helper()
	plane := idempotency.NewService(b.pool, idempotency.Config{Clock: clock})
	out, err := plane.Claim(context.Background(), b.org, idempotency.ScopeSavedSearchStart, key,
		admission.SavedSearchRequestHash(ssID, opts.Normalize()), idempotency.SavedSearchStartLease)
	if err != nil || out.Kind != idempotency.KindClaimed {
		b.t.Fatalf("Claim(%q) = %v, %v; want claimed", key, out.Kind, err)
	}
}

// wantStatus fails the test unless res answered status.
func wantStatus(t *testing.T, what string, res *response, status int) {
	t.Helper()
	if res.status != status {
		t.Fatalf("%s = %d %s, want %d", what, res.status, res.body, status)
	}
}

func TestMetricsCountRequestsClaimsAndDrops(t *testing.T) {
	t.Parallel()
	clk := dbclocktest.New(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	m := telemetry.NewMetrics()
	pool := pgtest.NewDB(t)
	b := setup(t, setupOpts{pool: pool, clock: clk.Clock(), observer: m, deps: func(d *api.Deps) {
		st := newStores(pool, clk.Clock())
		st.plane = idempotency.NewService(pool, idempotency.Config{Clock: clk.Clock(), Observer: m})
		d.Starter = st.starter(t, admission.Config{})
		d.Metrics = m
		if err := m.WatchPool(pool); err != nil {
			t.Fatal(err)
		}
	}})
	ss := b.seedSavedSearch(seedOpts{})

	wantStatus(t, "start", b.start(ss.ID, "k1", map[string]any{"max_results": 5}), http.StatusCreated)
	wantStatus(t, "replay", b.start(ss.ID, "k1", map[string]any{"max_results": 5}), http.StatusOK)
	b.holdClaim(clk.Clock(), ss.ID, "held", admission.StartOptions{MaxResults: 7})
	wantStatus(t, "start during a held claim", b.start(ss.ID, "held", map[string]any{"max_results": 7}), http.StatusConflict)
	wantStatus(t, "start with another body", b.start(ss.ID, "held", map[string]any{"max_results": 8}), http.StatusUnprocessableEntity)
	clk.Advance(idempotency.SavedSearchStartLease + time.Second)
	wantStatus(t, "start after the lease", b.start(ss.ID, "held", map[string]any{"max_results": 7}), http.StatusCreated)
	if _, reason := b.callback(delivery{jobID: "no-such-job", deliveryID: "d-1",
		body: callbackBody("no-such-job", "running", nil)}).answer(t); reason != "unknown_job" {
		t.Fatalf("callback for no job dropped for %q, want unknown_job", reason)
	}
	rawPath := "/no/such/" + uuid.NewString()
	wantStatus(t, "GET "+rawPath, b.do(req{method: http.MethodGet, path: rawPath, noAuth: true}), http.StatusNotFound)
	wantStatus(t, "an odd method", b.do(req{method: "BREW", path: "/healthz", noAuth: true}), http.StatusMethodNotAllowed)

	res := b.do(req{method: http.MethodGet, path: "/metrics", noAuth: true})
	wantStatus(t, "GET /metrics", res, http.StatusOK)
	page := "\n" + string(res.body)
	const start = `route="/v1/saved-searches/:id/start"`
	const scope = `scope="` + idempotency.ScopeSavedSearchStart + `"`
	for _, line := range []string{
		`searchd_http_requests_total{method="POST",` + start + `,status="201"} 2`,
		`searchd_http_requests_total{method="POST",` + start + `,status="200"} 1`,
		`searchd_http_requests_total{method="POST",` + start + `,status="409"} 1`,
		`searchd_http_requests_total{method="POST",` + start + `,status="422"} 1`,
		`searchd_http_request_duration_seconds_count{method="POST",` + start + `} 5`,
		`searchd_http_requests_total{method="POST",route="/v1/callbacks/:provider/jobs/:job_id",status="200"} 1`,
		`searchd_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`searchd_http_requests_total{method="other",route="/healthz",status="405"} 1`,
		// The replay is answered by its Run, before any claim.
		`searchd_claims_total{kind="claimed",` + scope + `} 2`,
		`searchd_claims_total{kind="processing",` + scope + `} 1`,
		`searchd_claims_total{kind="conflict",` + scope + `} 1`,
		`searchd_claim_reclaims_total{` + scope + `} 1`,
		`searchd_webhook_drops_total{provider="acme",reason="unknown_job"} 1`,
	} {
		if !strings.Contains(page, "\n"+line+"\n") {
			t.Errorf("the metrics page lacks %s", line)
		}
	}
	for _, prefix := range []string{"searchd_db_pool_max_conns ", "searchd_db_pool_acquires_total ", "go_goroutines ", "process_cpu_seconds_total "} {
		if !strings.Contains(page, "\n"+prefix) {
			t.Errorf("the metrics page lacks %s", prefix)
		}
	}
	for _, raw := range []string{rawPath, ss.ID.String(), "BREW", "no-such-job"} {
		if strings.Contains(page, raw) {
			t.Errorf("the metrics page names %q: a label took a raw value", raw)
		}
	}
}

// tracedSetup is a server traced into an in-memory exporter, on a pool that
// traces its statements into the same.
func tracedSetup(t *testing.T, opts setupOpts) (*bundle, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	cfg, err := pgxpool.ParseConfig(pgtest.NewDBURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = telemetry.PoolTracer(tp)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	opts.pool = pool
	next := opts.deps
	opts.deps = func(d *api.Deps) {
		d.TracerProvider = tp
		if next != nil {
			next(d)
		}
	}
	return setup(t, opts), exp
}

// serverSpan waits for the span of the request res answered: the server
// ends it after the answer is written, so it may come a moment later.
func serverSpan(t *testing.T, exp *tracetest.InMemoryExporter, res *response) tracetest.SpanStub {
	t.Helper()
	id := res.header.Get("X-Request-Id")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, s := range exp.GetSpans() {
			if s.SpanKind == trace.SpanKindServer && attr(s, api.AttrRequestID).AsString() == id {
				return s
			}
		}
	}
	t.Fatalf("no server span with %s %q", api.AttrRequestID, id)
	return tracetest.SpanStub{}
}

// attr returns the value of the span's attribute key; an invalid value
// when the span has none.
func attr(s tracetest.SpanStub, key attribute.Key) attribute.Value {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

func TestTracingMarksStartsWithTheirClaimOutcome(t *testing.T) {
	t.Parallel()
	clk := dbclocktest.New(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	b, exp := tracedSetup(t, setupOpts{clock: clk.Clock()})
	ss := b.seedSavedSearch(seedOpts{})
	b.holdClaim(clk.Clock(), ss.ID, "held", admission.StartOptions{MaxResults: 7})
	direct := func() *response {
		return b.startDirect("direct", map[string]any{"kind": "capability", "name": "c"})
	}

	const start = "/v1/saved-searches/:id/start"
	for _, tt := range []struct {
		name     string
		send     func() *response
		status   int
		span     string // its name: the method and the route
		outcome  string // "" for none
		replayed bool
	}{
		{"first start", func() *response { return b.start(ss.ID, "k1", nil) }, 201, "POST " + start, "claimed", false},
		{"replayed start", func() *response { return b.start(ss.ID, "k1", nil) }, 200, "POST " + start, "completed", true},
		{"start while held", func() *response { return b.start(ss.ID, "held", map[string]any{"max_results": 7}) }, 409,
			"POST " + start, "processing", false},
		{"start with another body", func() *response { return b.start(ss.ID, "held", map[string]any{"max_results": 8}) }, 422,
			"POST " + start, "conflict", false},
		{"start without a key", func() *response { return b.start(ss.ID, "", nil) }, 400, "POST " + start, "", false},
		{"direct start", direct, 201, "POST /v1/runs", "", false},
		{"replayed direct start", direct, 200, "POST /v1/runs", "", true},
		{"a read", func() *response {
			return b.do(req{method: http.MethodGet, path: "/v1/saved-searches/" + ss.ID.String()})
		},
			200, "GET /v1/saved-searches/:id", "", false},
	} {
		res := tt.send()
		wantStatus(t, tt.name, res, tt.status)
		span := serverSpan(t, exp, res)
		if span.Name != tt.span {
			t.Errorf("%s: span name %q, want %q", tt.name, span.Name, tt.span)
		}
		_, route, _ := strings.Cut(tt.span, " ")
		if got := attr(span, "http.route").AsString(); got != route {
			t.Errorf("%s: http.route = %q, want %q", tt.name, got, route)
		}
		if got := attr(span, "http.response.status_code").AsInt64(); got != int64(tt.status) {
			t.Errorf("%s: http.response.status_code = %d, want %d", tt.name, got, tt.status)
		}
		if got := attr(span, api.AttrClaimOutcome).AsString(); got != tt.outcome {
			t.Errorf("%s: %s = %q, want %q", tt.name, api.AttrClaimOutcome, got, tt.outcome)
		}
		if got := attr(span, api.AttrReplayed).AsBool(); got != tt.replayed {
			t.Errorf("%s: %s = %v, want %v", tt.name, api.AttrReplayed, got, tt.replayed)
		}
	}

	// The first start's statements are spans of its trace, children of
	// the request's span, with their SQL.
	first := b.start(ss.ID, "k2", nil)
	wantStatus(t, "another start", first, http.StatusCreated)
	parent := serverSpan(t, exp, first)
	var statements []string
	for _, s := range exp.GetSpans() {
		if s.Parent.SpanID() == parent.SpanContext.SpanID() && s.SpanKind == trace.SpanKindClient {
			if text := attr(s, "db.query.text").AsString(); text != "" {
				statements = append(statements, s.Name)
			}
		}
	}
	if len(statements) < 3 {
		t.Errorf("the start's span has %d SQL child spans %v, want its lookup, claim, freeze and admission", len(statements), statements)
	}
}

func TestTracingContinuesTheCallersTrace(t *testing.T) {
	t.Parallel()
	b, exp := tracedSetup(t, setupOpts{})
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	res := b.do(req{method: http.MethodGet, path: "/healthz", noAuth: true,
		header: map[string]string{"traceparent": "00-" + traceID + "-" + parentID + "-01"}})
	wantStatus(t, "GET /healthz", res, http.StatusOK)
	span := serverSpan(t, exp, res)
	if span.SpanContext.TraceID().String() != traceID || span.Parent.SpanID().String() != parentID {
		t.Errorf("span in trace %s under %s, want the caller's %s under %s",
			span.SpanContext.TraceID(), span.Parent.SpanID(), traceID, parentID)
	}
	// The log lines of a traced request name its trace.
	if !strings.Contains(b.logs.String(), `"trace_id":"`+traceID+`"`) {
		t.Errorf("the access log does not name the trace: %s", b.logs.String())
	}
}

func TestEveryProblemCarriesTheRequestID(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	for _, r := range []req{
		{method: http.MethodPost, path: "/v1/saved-searches/" + ss.ID.String() + "/start"}, // 400 no key
		{method: http.MethodGet, path: "/v1/runs", noAuth: true},                           // 401
		{method: http.MethodGet, path: "/v1/runs/" + uuid.NewString()},                     // 404
		{method: http.MethodGet, path: "/nothing/here", noAuth: true},                      // 404 unmatched
		{method: http.MethodDelete, path: "/healthz", noAuth: true},                        // 405
		{method: http.MethodPost, path: "/v1/saved-searches", body: `{`},                   // 400 malformed
	} {
		res := b.do(r)
		p := res.problem(t) // checks request_id == X-Request-Id
		if _, err := uuid.Parse(p.RequestID); err != nil {
			t.Errorf("%s %s: request_id %q is not a UUID", r.method, r.path, p.RequestID)
		}
		if !strings.Contains(b.logs.String(), `"request_id":"`+p.RequestID+`"`) {
			t.Errorf("%s %s: no log line names request %s", r.method, r.path, p.RequestID)
		}
	}
}

// TestLogsNeverCarryCredentialsOrBodies sends credentials, signatures and
// a distinctive body through every path that logs, with the log at debug
// level, and finds none of them in the log. Every line is about one of the
// requests and names it.
func TestLogsNeverCarryCredentialsOrBodies(t *testing.T) {
	t.Parallel()
	b, exp := tracedSetup(t, setupOpts{})
	ss := b.seedSavedSearch(seedOpts{})
	canary := "canary-" + uuid.NewString()
	forged, err := auth.SignToken([]byte(canary+"-a-secret-nobody-else-has-0123456789"), b.org, canary, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	clientID := "client-id-" + canary
	cbBody := callbackBody("job-"+canary, "running", map[string]any{"note": canary})
	cbAt := time.Now()
	goodSig := sign(acmeSecret, "d-1", cbAt, cbBody)
	badSig := sign([]byte("wrong-"+canary), "d-1", cbAt, cbBody)

	var responses []*response
	send := func(r req) {
		if r.header == nil {
			r.header = map[string]string{}
		}
		r.header["X-Request-Id"] = clientID
		responses = append(responses, b.do(r))
	}
	key := map[string]string{"Idempotency-Key": "key-" + canary}
	send(req{method: http.MethodPost, path: "/v1/saved-searches",
		body: map[string]any{"name": canary, "brief": map[string]any{"query": canary}}})
	send(req{method: http.MethodPost, path: "/v1/saved-searches", body: `{"name": "` + canary + `", `})
	send(req{method: http.MethodPatch, path: "/v1/saved-searches/" + ss.ID.String(),
		body: map[string]any{"name": strings.Repeat(canary, 20)}})
	send(req{method: http.MethodPost, path: "/v1/saved-searches/" + ss.ID.String() + "/start",
		body: map[string]any{"note": canary}, header: key})
	send(req{method: http.MethodPost, path: "/v1/runs", body: map[string]any{"kind": "capability", "name": canary,
		"input": map[string]any{"q": canary}}, header: key})
	send(req{method: http.MethodGet, path: "/v1/runs", noAuth: true, header: bearer(forged)})
	send(req{method: http.MethodGet, path: "/v1/runs?cursor=" + canary})
	send(req{method: http.MethodPost, path: "/v1/callbacks/acme/jobs/job-" + canary, noAuth: true, body: cbBody,
		header: map[string]string{api.HeaderDeliveryID: "d-1", api.HeaderTimestamp: unix(cbAt), api.HeaderSignature: goodSig}})
	send(req{method: http.MethodPost, path: "/v1/callbacks/acme/jobs/job-" + canary, noAuth: true, body: cbBody,
		header: map[string]string{api.HeaderDeliveryID: "d-1", api.HeaderTimestamp: unix(cbAt), api.HeaderSignature: badSig}})

	logs := b.logs.String()
	for name, secret := range map[string]string{
		"the bearer token":       b.token,
		"the forged token":       forged,
		"the JWT secret":         string(testSecret),
		"the provider secret":    string(acmeSecret),
		"the valid signature":    strings.TrimPrefix(goodSig, "v1,"),
		"the invalid signature":  strings.TrimPrefix(badSig, "v1,"),
		"a body's content":       canary,
		"the client's own id":    clientID,
		"the Authorization name": "Authorization",
	} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %s", name)
		}
	}
	// The spans of these requests carry none of it either.
	spans, err := json.Marshal(exp.GetSpans())
	if err != nil || len(exp.GetSpans()) == 0 {
		t.Fatalf("%d spans, encoding: %v", len(exp.GetSpans()), err)
	}
	for name, secret := range map[string]string{"the bearer token": b.token, "the forged token": forged,
		"the valid signature": strings.TrimPrefix(goodSig, "v1,")} {
		if strings.Contains(string(spans), secret) {
			t.Errorf("a span holds %s", name)
		}
	}

	ids := map[string]bool{}
	for _, res := range responses {
		id := res.header.Get("X-Request-Id")
		if id == clientID || id == "" {
			t.Fatalf("X-Request-Id = %q, want the server's own id", id)
		}
		ids[id] = true
	}
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	if len(lines) < len(responses) {
		t.Fatalf("%d log lines for %d requests, want an access line each", len(lines), len(responses))
	}
	seen := map[string]bool{}
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		id, _ := m["request_id"].(string)
		if !ids[id] {
			t.Errorf("log line %s names no request of the test", line)
		}
		if m["trace_id"] == nil {
			t.Errorf("log line %s of a traced request names no trace", line)
		}
		seen[id] = true
	}
	if len(seen) != len(ids) {
		t.Errorf("the log names %d of the %d requests", len(seen), len(ids))
	}
}
