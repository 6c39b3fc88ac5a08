package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/dispatch"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/providerjobs"
	"github.com/searchd/searchd/schedule"
	"github.com/searchd/searchd/sweeper"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// One *Metrics observes every component that reports to the metrics page.
var (
	_ idempotency.Observer  = (*Metrics)(nil)
	_ providerjobs.Observer = (*Metrics)(nil)
	_ sweeper.Observer      = (*Metrics)(nil)
)

func TestMetricsCountEveryClaimOutcomeOfAPlane(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	m := NewMetrics()
	clk := dbclocktest.New(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	plane := idempotency.NewService(pool, idempotency.Config{Clock: clk.Clock(), Observer: m})
	ctx, org := context.Background(), uuid.New()
	const scope, lease = idempotency.ScopeSavedSearchStart, 30 * time.Second

	claim := func(key, hash string) idempotency.Outcome {
		t.Helper()
		out, err := plane.Claim(ctx, org, scope, key, hash, lease)
		if err != nil {
			t.Fatalf("Claim(%q, %q): %v", key, hash, err)
		}
		return out
	}
	first := claim("k", "h1") // claimed
	claim("k", "h1")          // processing
	claim("k", "h2")          // conflict
	if ok, err := plane.Complete(ctx, first.Claim, idempotency.Completion{ResourceType: "r", ResourceID: "1"}); !ok || err != nil {
		t.Fatalf("Complete = %v, %v; want true", ok, err)
	}
	claim("k", "h1") // completed

	// A worker whose lease passed loses its fence to the one that reclaims.
	stale := claim("f", "h1") // claimed
	clk.Advance(lease + time.Second)
	if out := claim("f", "h1"); out.Kind != idempotency.KindClaimed || !out.Claim.Reclaimed {
		t.Fatalf("claim after the lease = %v, want a reclaim", out.Kind)
	}
	if ok, _ := plane.Complete(ctx, stale.Claim, idempotency.Completion{ResourceType: "r", ResourceID: "2"}); ok {
		t.Fatal("Complete with a lost fence succeeded")
	}
	if ok, _ := plane.Release(ctx, stale.Claim); ok {
		t.Fatal("Release with a lost fence succeeded")
	}

	for _, tt := range []struct {
		kind string
		want float64
	}{
		{"claimed", 3}, {"processing", 1}, {"conflict", 1}, {"completed", 1}, {"absent", 0},
	} {
		if got := testutil.ToFloat64(m.claims.WithLabelValues(scope, tt.kind)); got != tt.want {
			t.Errorf("searchd_claims_total{kind=%q} = %v, want %v", tt.kind, got, tt.want)
		}
	}
	if got := testutil.ToFloat64(m.reclaims.WithLabelValues(scope)); got != 1 {
		t.Errorf("searchd_claim_reclaims_total = %v, want 1", got)
	}
	for _, op := range []string{"complete", "release"} {
		if got := testutil.ToFloat64(m.fencesLost.WithLabelValues(scope, op)); got != 1 {
			t.Errorf("searchd_claim_fences_lost_total{op=%q} = %v, want 1", op, got)
		}
	}
}

func TestMetricsCountDropsAndSweeps(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	m.ObserveDrop("acme", "unknown_job")
	m.ObserveDrop("acme", "unknown_job")
	m.ObserveDrop("acme", "hash_mismatch")
	m.ObservePass(sweeper.TableRuns, 1000, 998, 2*time.Second)
	m.ObservePass(sweeper.TableRuns, 10, 10, 50*time.Millisecond)
	var obs sweeper.Observer = m
	bo, ok := obs.(sweeper.BacklogObserver)
	if !ok {
		t.Fatal("*Metrics is not a sweeper.BacklogObserver: the sweeper would count no backlog pass")
	}
	bo.ObserveBacklogPass(sweeper.TableRuns)

	for _, tt := range []struct {
		name string
		got  float64
		want float64
	}{
		{"drops acme/unknown_job", testutil.ToFloat64(m.webhookDrops.WithLabelValues("acme", "unknown_job")), 2},
		{"drops acme/hash_mismatch", testutil.ToFloat64(m.webhookDrops.WithLabelValues("acme", "hash_mismatch")), 1},
		{"rows read", testutil.ToFloat64(m.sweptRead.WithLabelValues(sweeper.TableRuns)), 1010},
		{"rows deleted", testutil.ToFloat64(m.sweptDeleted.WithLabelValues(sweeper.TableRuns)), 1008},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	page := scrape(t, m)
	wantLines(t, page,
		`searchd_sweeper_pass_duration_seconds_count{table="`+sweeper.TableRuns+`"} 2`,
		`searchd_sweeper_pass_duration_seconds_sum{table="`+sweeper.TableRuns+`"} 2.05`,
		`searchd_sweeper_backlog_passes_total{table="`+sweeper.TableRuns+`"} 1`,
	)
}

func TestMetricsServeThePoolStatistics(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	m := NewMetrics()
	if err := m.WatchPool(pool); err != nil {
		t.Fatalf("WatchPool: %v", err)
	}
	if err := m.WatchPool(pool); err == nil {
		t.Error("a second WatchPool succeeded; its series would collide with the first's")
	}
	if _, err := pool.Exec(context.Background(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	page := scrape(t, m)
	for _, want := range []string{
		"searchd_db_pool_max_conns " + itoa(pool.Config().MaxConns),
		"searchd_db_pool_total_conns ",
		"searchd_db_pool_idle_conns ",
		"searchd_db_pool_acquired_conns 0",
		"searchd_db_pool_acquire_duration_seconds_total ",
		"searchd_db_pool_empty_acquires_total ",
		"# TYPE searchd_db_pool_acquires_total counter",
		"# TYPE searchd_db_pool_idle_conns gauge",
		"go_goroutines ",
		"process_open_fds ",
	} {
		if !strings.Contains(page, "\n"+want) {
			t.Errorf("the metrics page lacks %q", want)
		}
	}
	if v := pool.Stat().AcquireCount(); v < 1 || !strings.Contains(page, "\nsearchd_db_pool_acquires_total ") {
		t.Errorf("acquire count %d not served", v)
	}
}

// scrape returns the metrics page m serves.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics = %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	return "\n" + rec.Body.String()
}

// wantLines reports each of lines that page lacks as a whole line.
func wantLines(t *testing.T, page string, lines ...string) {
	t.Helper()
	for _, line := range lines {
		if !strings.Contains(page, "\n"+line+"\n") {
			t.Errorf("the metrics page lacks %q", line)
		}
	}
}

func itoa(n int32) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestPoolTracerTracesStatementsUnderTheCallersSpan(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	cfg, err := pgxpool.ParseConfig(pgtest.NewDBURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = PoolTracer(tp)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	const secret = "argument-that-must-not-be-recorded"
	// Outside any span: nothing is traced.
	if _, err := pool.Exec(context.Background(), "SELECT $1::text", secret); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans for a statement outside any span, want 0", n)
	}

	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	if _, err := pool.Exec(ctx, "SELECT $1::text", secret); err != nil {
		t.Fatal(err)
	}
	parent.End()

	var stmt *tracetest.SpanStub
	spans := exp.GetSpans()
	for i, s := range spans {
		if s.Name == "SELECT" {
			stmt = &spans[i]
		}
	}
	if stmt == nil {
		t.Fatalf("spans = %v, want a SELECT span", names(spans))
	}
	if stmt.Parent.SpanID() != parent.SpanContext().SpanID() || stmt.SpanContext.TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("the SELECT span is not a child of the caller's span")
	}
	text := ""
	for _, a := range stmt.Attributes {
		if a.Key == semconv.DBQueryTextKey {
			text = a.Value.AsString()
		}
	}
	if text != "SELECT $1::text" {
		t.Errorf("db.query.text = %q, want the statement with its placeholder", text)
	}
	buf, err := json.Marshal(spans)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf, []byte("SELECT $1::text")) || bytes.Contains(buf, []byte(secret)) {
		t.Error("a span records a statement's argument")
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func TestTracerProviderExportsOverOTLPHTTP(t *testing.T) {
	t.Parallel()
	type export struct {
		path, contentType string
		body              []byte
	}
	got := make(chan export, 10)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- export{r.URL.Path, r.Header.Get("Content-Type"), body}
	}))
	t.Cleanup(collector.Close)

	tp, err := NewTracerProvider(context.Background(), TracingConfig{EndpointURL: collector.URL + "/custom/traces"})
	if err != nil {
		t.Fatalf("NewTracerProvider: %v", err)
	}
	_, span := tp.Tracer("test").Start(context.Background(), "span-name-to-find")
	span.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case e := <-got:
		if e.path != "/custom/traces" || e.contentType != "application/x-protobuf" {
			t.Errorf("export to %s as %s, want /custom/traces as application/x-protobuf", e.path, e.contentType)
		}
		for _, want := range []string{"span-name-to-find", "service.name", DefaultServiceName} {
			if !bytes.Contains(e.body, []byte(want)) {
				t.Errorf("the export lacks %q", want)
			}
		}
	default:
		t.Fatal("Shutdown flushed no span to the collector")
	}

	if _, err := NewTracerProvider(context.Background(), TracingConfig{}); err == nil {
		t.Error("NewTracerProvider without an endpoint succeeded")
	}
}

func TestServiceResourceNamesTheService(t *testing.T) {
	// Not parallel: t.Setenv.
	ctx := context.Background()
	serviceName := func(name string) string {
		t.Helper()
		res, err := serviceResource(ctx, name)
		if err != nil {
			t.Fatalf("serviceResource(%q): %v", name, err)
		}
		v, _ := res.Set().Value(semconv.ServiceNameKey)
		return v.AsString()
	}
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	t.Setenv("OTEL_SERVICE_NAME", "")
	if got := serviceName(""); got != DefaultServiceName {
		t.Errorf("service.name = %q with nothing set, want %q", got, DefaultServiceName)
	}
	if got := serviceName("search-eu"); got != "search-eu" {
		t.Errorf("service.name = %q, want the configured search-eu", got)
	}
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attributes,deployment.environment.name=prod")
	if got := serviceName(""); got != "from-attributes" {
		t.Errorf("service.name = %q, want OTEL_RESOURCE_ATTRIBUTES's from-attributes", got)
	}
	if got := serviceName("search-eu"); got != "search-eu" {
		t.Errorf("service.name = %q, want OTEL_SERVICE_NAME's search-eu over the attributes", got)
	}
}

func TestLogHandlerAddsTheRequestAndTraceIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(NewLogHandler(slog.NewJSONHandler(&buf, nil)))
	if h := NewLogHandler(logger.Handler()); h != logger.Handler() {
		t.Error("wrapping a wrapped handler wrapped it again")
	}
	line := func(log func()) map[string]any {
		t.Helper()
		buf.Reset()
		log()
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", buf.String(), err)
		}
		return m
	}

	ctx := WithRequestID(context.Background(), "req-1")
	if got := RequestID(ctx); got != "req-1" {
		t.Fatalf("RequestID = %q, want req-1", got)
	}
	if m := line(func() { logger.InfoContext(ctx, "hello", "k", "v") }); m[LogKeyRequestID] != "req-1" || m["k"] != "v" {
		t.Errorf("line = %v, want request_id req-1 and k", m)
	}
	if m := line(func() { logger.With("a", 1).InfoContext(ctx, "hello") }); m[LogKeyRequestID] != "req-1" || m["a"] != 1.0 {
		t.Errorf("line through With = %v, want request_id req-1 and a", m)
	}
	// An explicit id is kept, and not written twice.
	buf.Reset()
	logger.InfoContext(ctx, "hello", LogKeyRequestID, "req-1")
	if n := strings.Count(buf.String(), `"request_id"`); n != 1 {
		t.Errorf("line %s has request_id %d times, want once", buf.String(), n)
	}
	if m := line(func() { logger.Info("no context") }); m[LogKeyRequestID] != nil || m[LogKeyTraceID] != nil {
		t.Errorf("line without a request's context = %v, want no ids", m)
	}

	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(ctx, "request")
	defer span.End()
	m := line(func() { logger.InfoContext(ctx, "traced") })
	if m[LogKeyTraceID] != span.SpanContext().TraceID().String() || m[LogKeySpanID] != span.SpanContext().SpanID().String() ||
		m[LogKeyRequestID] != "req-1" {
		t.Errorf("traced line = %v, want the request, trace and span ids", m)
	}
}

func TestMetricsCountTheInbox(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	var _ providerjobs.Observer = m
	m.ObserveApplied("acme", providerjobs.ByHandler)
	m.ObserveApplied("acme", providerjobs.ByApplier)
	m.ObserveApplied("acme", providerjobs.ByApplier)
	m.ObserveCopy("acme", "duplicate")
	m.ObserveCopy("acme", "path_mismatch")
	m.ObserveAuditFailure("acme", "duplicate")
	m.ObserveInbox(7, 1500*time.Millisecond)
	page := scrape(t, m)
	wantLines(t, page,
		`searchd_inbox_applied_total{by="handler",provider="acme"} 1`,
		`searchd_inbox_applied_total{by="applier",provider="acme"} 2`,
		`searchd_inbox_copies_total{provider="acme",reason="duplicate"} 1`,
		`searchd_inbox_copies_total{provider="acme",reason="path_mismatch"} 1`,
		`searchd_webhook_drop_audit_failures_total{provider="acme",reason="duplicate"} 1`,
		`searchd_inbox_pending 7`,
		`searchd_inbox_lag_seconds 1.5`,
	)
}

func TestMetricsCountTheDispatches(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	var _ dispatch.Observer = m
	var _ dispatch.BacklogObserver = m
	m.ObserveDispatchAttempt("delivered", 20*time.Millisecond)
	m.ObserveDispatchAttempt("retry", time.Second)
	m.ObserveDispatchAttempt("retry", time.Second)
	m.ObserveDispatchBacklog(12, 3, 90*time.Second)
	m.ObserveDispatching(true)
	page := scrape(t, m)
	wantLines(t, page,
		`searchd_dispatch_enabled 1`,
		`searchd_dispatch_attempts_total{outcome="delivered"} 1`,
		`searchd_dispatch_attempts_total{outcome="retry"} 2`,
		`searchd_dispatch_attempt_duration_seconds_count{outcome="retry"} 2`,
		`searchd_dispatch_pending 12`,
		`searchd_dispatch_failed 3`,
		`searchd_dispatch_oldest_pending_seconds 90`,
	)
}

// TestMetricsCountTheScheduleDrain: the drain's counts and gauges, by
// outcome and reason alone: no label names an organization.
func TestMetricsCountTheScheduleDrain(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	var _ schedule.Observer = m
	m.ObserveCameDue(3)
	m.ObserveOutcome(schedule.StatusStarted, "")
	m.ObserveOutcome(schedule.StatusStarted, "")
	m.ObserveOutcome(schedule.StatusRefused, schedule.ReasonSavedSearchArchived)
	m.ObserveOutcome(schedule.StatusMissed, "")
	m.ObserveDrain(4, 2500*time.Millisecond, 30*time.Millisecond)
	page := scrape(t, m)
	wantLines(t, page,
		`searchd_schedule_came_due_total 3`,
		`searchd_schedule_outcomes_total{outcome="started",reason=""} 2`,
		`searchd_schedule_outcomes_total{outcome="refused",reason="saved_search_archived"} 1`,
		`searchd_schedule_outcomes_total{outcome="missed",reason=""} 1`,
		`searchd_schedule_due 4`,
		`searchd_schedule_lag_seconds 2.5`,
		`searchd_schedule_tick_duration_seconds_count 1`,
	)
	for _, l := range strings.Split(page, "\n") {
		if strings.Contains(l, "searchd_schedule_") && strings.Contains(l, "organization") {
			t.Errorf("a schedule metric names an organization: %s", l)
		}
	}
}
