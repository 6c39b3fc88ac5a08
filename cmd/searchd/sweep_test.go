package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/sweeper"
)

// sweepBundle is a migrated database, a pool on it and the organization
// the test seeds its claims in.
type sweepBundle struct {
	dbURL string
	pool  *pgxpool.Pool
	plane *idempotency.Service
	org   uuid.UUID
}

func sweepSetup(t *testing.T) *sweepBundle {
	t.Helper()
	dbURL, pool := newDB(t)
	return &sweepBundle{dbURL: dbURL, pool: pool, plane: idempotency.NewService(pool, idempotency.Config{}), org: uuid.New()}
}

// expiredOpts shapes a claim seeded past its retention.
type expiredOpts struct {
	// Processing seeds an unfinished claim; the default is a completed
	// one with an answer.
	Processing bool
}

// expired inserts a webhook claim keyed key whose retention passed an hour
// ago by the database clock, as the sweeper judges it.
func (b *sweepBundle) expired(t *testing.T, key string, opts expiredOpts) {
	t.Helper()
	status, resType, resID, response := "completed", any("test_resource"), any(key), any(`{}`)
	if opts.Processing {
		status, resType, resID, response = "processing", nil, nil, nil
	}
	_, err := b.pool.Exec(context.Background(), `
INSERT INTO agent.idempotency_keys
	(id, organization_id, scope, key, request_hash, status, lease_token,
	 resource_type, resource_id, response, claimed_at, lease_expires_at, retain_until)
VALUES (gen_random_uuid(), $1, 'webhook.acme', $2, 'hash', $3, gen_random_uuid(),
	$4::text, $5::text, $6::jsonb, now() - interval '25 hours', now() - interval '25 hours' + interval '1 minute',
	now() - interval '1 hour')`, b.org, key, status, resType, resID, response)
	if err != nil {
		t.Fatal(err)
	}
}

// live claims key through the plane, completing it unless processing is
// set: its retention is a day from now.
func (b *sweepBundle) live(t *testing.T, key string, processing bool) {
	t.Helper()
	ctx := context.Background()
	out, err := b.plane.Claim(ctx, b.org, "webhook.acme", key, "hash", time.Millisecond)
	if err != nil || out.Kind != idempotency.KindClaimed {
		t.Fatalf("Claim(%q) = %v, %v; want claimed", key, out.Kind, err)
	}
	if processing {
		return
	}
	if ok, err := b.plane.Complete(ctx, out.Claim, idempotency.Completion{Response: json.RawMessage(`{"ok":true}`)}); !ok || err != nil {
		t.Fatalf("Complete(%q) = %v, %v", key, ok, err)
	}
}

// keys returns the keys of the organization's stored claims, sorted.
func (b *sweepBundle) keys(t *testing.T) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(),
		`SELECT key FROM agent.idempotency_keys WHERE organization_id = $1 ORDER BY key`, b.org)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// logLines parses the JSON log lines of stderr, skipping any other line.
func logLines(stderr string) []map[string]any {
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stderr))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			lines = append(lines, m)
		}
	}
	return lines
}

// logLine returns the first log line of stderr with message msg, or nil.
func logLine(stderr, msg string) map[string]any {
	for _, l := range logLines(stderr) {
		if l["msg"] == msg {
			return l
		}
	}
	return nil
}

// claimsRow matches the claims table's row of the sweep report:
// read, deleted, passes, duration, backlog.
var claimsRow = regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(sweeper.TableClaims) + `\s+(\d+)\s+(\d+)\s+(\d+)\s+\S+\s+(yes|no)\s*$`)

func TestSweepDeletesExpiredClaimsAndKeepsLiveOnes(t *testing.T) {
	t.Parallel()
	b := sweepSetup(t)
	b.expired(t, "expired-completed", expiredOpts{})
	b.expired(t, "expired-processing", expiredOpts{Processing: true})
	b.live(t, "live-completed", false)
	// Its lease has passed, its retention holds: the journal of a worker
	// that died, for the next claim to take over, not the sweeper's.
	b.live(t, "live-lease-passed", true)

	h := newHarness(map[string]string{"DATABASE_URL": b.dbURL})
	if code := h.run("sweep"); code != 0 {
		t.Fatalf("sweep = %d, want 0; stdout %q, stderr %q", code, h.stdout.String(), h.stderr.String())
	}
	if got, want := b.keys(t), []string{"live-completed", "live-lease-passed"}; !slices.Equal(got, want) {
		t.Errorf("claims after the sweep = %q, want %q", got, want)
	}

	out := h.stdout.String()
	m := claimsRow.FindStringSubmatch(out)
	if m == nil || m[1] != "2" || m[2] != "2" || m[3] != "1" || m[4] != "no" {
		t.Errorf("sweep printed\n%s\nwant a %s row of 2 read, 2 deleted, 1 pass, no backlog", out, sweeper.TableClaims)
	}
	for _, want := range []string{"table", "read", "deleted", "passes", "duration", "backlog",
		sweeper.TableOccurrences, sweeper.TableRuns, sweeper.TableSnapshots, sweeper.TableDrops, sweeper.TableResolutions,
		"swept in ", "read 2, deleted 2 (bound 1000, budget 15m)"} {
		if !strings.Contains(out, want) {
			t.Errorf("sweep printed\n%s\nwithout %q", out, want)
		}
	}
	// The log line of the run carries both counts of each table.
	done := logLine(h.stderr.String(), "sweep done")
	claims, _ := done["claims"].(map[string]any)
	if claims == nil || claims["table"] != sweeper.TableClaims || claims["read"] != 2.0 || claims["deleted"] != 2.0 ||
		claims["passes"] != 1.0 || claims["backlog"] != false {
		t.Errorf(`log line "sweep done" = %v, want claims read 2, deleted 2, 1 pass, no backlog; stderr:\n%s`, done, h.stderr.String())
	}
	for _, table := range []string{"runs", "snapshots", "drops"} {
		if _, ok := done[table].(map[string]any); !ok {
			t.Errorf(`log line "sweep done" = %v, want the %s' counts too`, done, table)
		}
	}

	// A second sweep finds nothing, and says so.
	h = newHarness(map[string]string{"DATABASE_URL": b.dbURL})
	if code := h.run("sweep"); code != 0 {
		t.Fatalf("second sweep = %d: %s", code, h.stderr.String())
	}
	if m := claimsRow.FindStringSubmatch(h.stdout.String()); m == nil || m[1] != "0" || m[2] != "0" {
		t.Errorf("second sweep printed\n%s\nwant 0 read and 0 deleted", h.stdout.String())
	}
}

func TestSweepLeavesABacklogAndSaysSo(t *testing.T) {
	t.Parallel()
	b := sweepSetup(t)
	const expired = 200
	for i := range expired {
		b.expired(t, fmt.Sprintf("k%03d", i), expiredOpts{})
	}
	// Passes of one row, each followed by a rest 99 times as long: a
	// second's budget runs out long before 200 passes (each pass is
	// several round trips to the database, well over 50 µs).
	// SEARCHD_SWEEP_MAX_PASSES, no longer read, is warned of.
	h := newHarness(map[string]string{"DATABASE_URL": b.dbURL, "SEARCHD_SWEEP_MAX_PASSES": "1000"})
	if code := h.run("sweep", "--sweep-bound", "1", "--sweep-duty", "0.01", "--sweep-budget", "1s"); code != 0 {
		t.Fatalf("sweep with a backlog = %d, want 0 (a backlog is no error): %s", code, h.stderr.String())
	}
	left := len(b.keys(t))
	if left == 0 || left == expired {
		t.Errorf("%d of %d claims left after a run out of budget, want some deleted and some left", left, expired)
	}
	out := h.stdout.String()
	m := claimsRow.FindStringSubmatch(out)
	if m == nil || m[2] != strconv.Itoa(expired-left) || m[3] != m[2] || m[4] != "yes" {
		t.Errorf("sweep printed\n%s\nwant a %s row of %d deleted in as many passes, a backlog", out, sweeper.TableClaims, expired-left)
	}
	if !strings.Contains(out, "backlog: the budget ran out and the last pass on "+sweeper.TableClaims+" read a full bound") ||
		!strings.Contains(out, "(bound 1, budget 1s)") {
		t.Errorf("sweep printed\n%s\nwithout the backlog and the budget", out)
	}
	stderr := h.stderr.String()
	if l := logLine(stderr, "sweep done; a backlog remains for the next run"); l == nil || l["level"] != "WARN" {
		t.Errorf("the run's log line = %v, want a warning of the backlog; stderr:\n%s", l, stderr)
	}
	if l := logLine(stderr, "SEARCHD_SWEEP_MAX_PASSES is no longer read: "+removedWhy(t, "SEARCHD_SWEEP_MAX_PASSES")); l == nil || l["level"] != "WARN" {
		t.Errorf("stderr =\n%s\nwant a warning that SEARCHD_SWEEP_MAX_PASSES is no longer read", stderr)
	}
}

// removedWhy returns what removedSettings says of env.
func removedWhy(t *testing.T, env string) string {
	t.Helper()
	for _, r := range removedSettings {
		if r.env == env {
			return r.why
		}
	}
	t.Fatalf("%s is not in removedSettings", env)
	return ""
}

func TestSweepExitsOneOnAnError(t *testing.T) {
	t.Parallel()
	h := newHarness(map[string]string{"DATABASE_URL": emptyDatabase(t)})
	if code := h.run("sweep"); code != 1 {
		t.Fatalf("sweep on an unmigrated database = %d, want 1", code)
	}
	if stderr := h.stderr.String(); !strings.Contains(stderr, "refusing to start") || !strings.Contains(stderr, "searchd migrate") {
		t.Errorf("sweep on an unmigrated database said %q", stderr)
	}
}

func TestABoundOverTheCeilingIsRefusedAtStartUp(t *testing.T) {
	t.Parallel()
	// A database that is never reached: the refusal comes first.
	base := map[string]string{
		"DATABASE_URL":       "postgres://searchd@127.0.0.1:1/unreachable",
		"SEARCHD_JWT_SECRET": goodSecret,
		"SEARCHD_DEV_DIR":    t.TempDir(),
	}
	tests := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"SEARCHD_SWEEP_BOUND": "2000"}, []string{"sweep"},
			"SEARCHD_SWEEP_BOUND: Bound 2000 exceeds MaxBound 1000: a larger bound is refused, not clamped"},
		{nil, []string{"sweep", "--sweep-bound", "1500", "--sweep-max-bound", "1200"},
			"--sweep-bound: Bound 1500 exceeds MaxBound 1200: a larger bound is refused, not clamped; lower Bound, or raise MaxBound " +
				"with it (Bound is --sweep-bound, MaxBound is --sweep-max-bound)"},
		{map[string]string{"SEARCHD_SWEEP_BOUND": "1001"}, []string{"serve"},
			"SEARCHD_SWEEP_BOUND: Bound 1001 exceeds MaxBound 1000"},
		{map[string]string{"SEARCHD_SWEEP_MAX_BOUND": "500"}, []string{"serve", "--sweep-bound", "501"},
			"--sweep-bound: Bound 501 exceeds MaxBound 500: a larger bound is refused, not clamped; lower Bound, or raise MaxBound " +
				"with it (Bound is --sweep-bound, MaxBound is SEARCHD_SWEEP_MAX_BOUND)"},
		{map[string]string{"SEARCHD_SWEEP_BOUND": "5000"}, []string{"dev"},
			"SEARCHD_SWEEP_BOUND: Bound 5000 exceeds MaxBound 1000"},
	}
	for _, tt := range tests {
		env := maps.Clone(base)
		maps.Copy(env, tt.env)
		h := newHarness(env)
		if code := h.run(tt.args...); code != 2 || !strings.Contains(h.stderr.String(), tt.want) {
			t.Errorf("%v with %v = %d, stderr %q; want 2 saying %q", tt.args, tt.env, code, h.stderr.String(), tt.want)
		}
		if h.stdout.String() != "" {
			t.Errorf("%v with %v printed %q, want nothing: it must not start", tt.args, tt.env, h.stdout.String())
		}
	}
}

func TestSweepSettingsAreCheckedAndNamed(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://searchd@127.0.0.1:1/unreachable"}
	for _, tt := range []struct {
		flag, env, bad, want string
	}{
		{"sweep-bound", "SEARCHD_SWEEP_BOUND", "lots", `"lots" is not a whole number`},
		{"sweep-bound", "SEARCHD_SWEEP_BOUND", "0", "0 is out of range: from 1 to MaxBound, 1000 (sweeper: Config.Bound)"},
		{"sweep-max-bound", "SEARCHD_SWEEP_MAX_BOUND", "-5", "-5 is out of range: at least 1"},
		{"sweep-budget", "SEARCHD_SWEEP_BUDGET", "0s", "0s is out of range: 1s or more"},
		{"sweep-budget", "SEARCHD_SWEEP_BUDGET", "soon", `"soon" is not a duration (write it like 15m or 1h)`},
		{"sweep-duty", "SEARCHD_SWEEP_DUTY", "0", "0 is out of range: above 0 and at most 1"},
		{"sweep-duty", "SEARCHD_SWEEP_DUTY", "-0.5", "-0.5 is out of range: above 0 and at most 1"},
		{"sweep-duty", "SEARCHD_SWEEP_DUTY", "NaN", "NaN is out of range: above 0 and at most 1"},
		{"sweep-duty", "SEARCHD_SWEEP_DUTY", "quarter", `"quarter" is not a number (write it like 0.25)`},
		{"log-level", "SEARCHD_LOG_LEVEL", "loud", `"loud" is not a level`},
	} {
		wantBadSetting(t, "sweep", base, tt.flag, tt.env, tt.bad, tt.want)
	}
	h := newHarness(nil)
	if code := h.run("sweep"); code != 2 || !strings.Contains(h.stderr.String(), "DATABASE_URL: is required") {
		t.Errorf("sweep without a database = %d %q, want 2 naming DATABASE_URL", code, h.stderr.String())
	}
	// The passes per run are no longer bounded, and their flag is gone.
	h = newHarness(base)
	if code := h.run("sweep", "--sweep-max-passes", "10"); code != 2 || !strings.Contains(h.stderr.String(), "flag provided but not defined: -sweep-max-passes") {
		t.Errorf("sweep --sweep-max-passes = %d %q, want 2: no such flag", code, h.stderr.String())
	}
	// One run has no schedule: the interval is serve's.
	h = newHarness(base)
	if code := h.run("sweep", "--sweep-interval", "1h"); code != 2 || !strings.Contains(h.stderr.String(), "flag provided but not defined: -sweep-interval") {
		t.Errorf("sweep --sweep-interval = %d %q, want 2: no such flag", code, h.stderr.String())
	}
}

func TestSweepSettingsDefaultsAndOverrides(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string, args ...string) sweeper.Config {
		t.Helper()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		serverFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		all := map[string]string{"DATABASE_URL": "postgres://searchd@localhost/db", "SEARCHD_JWT_SECRET": goodSecret}
		for k, v := range env {
			all[k] = v
		}
		cfg, err := loadServerConfig(fs, func(k string) string { return all[k] }, false)
		if err != nil {
			t.Fatalf("loadServerConfig(%v, %v): %v", env, args, err)
		}
		return cfg.Sweep
	}
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		// want is the configuration the sweeper runs with, its defaults
		// applied; Interval zero is no sweeper.
		want sweeper.Config
	}{
		{"defaults", nil, nil,
			sweeper.Config{Interval: time.Hour, Jitter: 6 * time.Minute, Bound: 1000, MaxBound: 1000, Budget: 15 * time.Minute, Duty: 0.25}},
		{"jitter is a tenth of the interval", map[string]string{"SEARCHD_SWEEP_INTERVAL": "10m"}, nil,
			sweeper.Config{Interval: 10 * time.Minute, Jitter: time.Minute, Bound: 1000, MaxBound: 1000, Budget: 15 * time.Minute, Duty: 0.25}},
		{"from the variables", map[string]string{"SEARCHD_SWEEP_INTERVAL": "30m", "SEARCHD_SWEEP_JITTER": "30m",
			"SEARCHD_SWEEP_BOUND": "1200", "SEARCHD_SWEEP_MAX_BOUND": "1200", "SEARCHD_SWEEP_BUDGET": "1h",
			"SEARCHD_SWEEP_DUTY": "1"}, nil,
			sweeper.Config{Interval: 30 * time.Minute, Jitter: 30 * time.Minute, Bound: 1200, MaxBound: 1200, Budget: time.Hour, Duty: 1}},
		{"flags over variables", map[string]string{"SEARCHD_SWEEP_INTERVAL": "30m", "SEARCHD_SWEEP_BOUND": "900",
			"SEARCHD_SWEEP_DUTY": "0.9"},
			[]string{"--sweep-interval", "2h", "--sweep-bound", "100", "--sweep-budget", "90s", "--sweep-duty", "0.5"},
			sweeper.Config{Interval: 2 * time.Hour, Jitter: 12 * time.Minute, Bound: 100, MaxBound: 1000, Budget: 90 * time.Second, Duty: 0.5}},
		{"a lower ceiling lowers the default bound", map[string]string{"SEARCHD_SWEEP_MAX_BOUND": "500"}, nil,
			sweeper.Config{Interval: time.Hour, Jitter: 6 * time.Minute, Bound: 500, MaxBound: 500, Budget: 15 * time.Minute, Duty: 0.25}},
		{"0s of jitter is none", nil, []string{"--sweep-interval", "200ms", "--sweep-jitter", "0s"},
			sweeper.Config{Interval: 200 * time.Millisecond, Jitter: -1, Bound: 1000, MaxBound: 1000, Budget: 15 * time.Minute, Duty: 0.25}},
	} {
		got := load(tt.env, tt.args...).WithDefaults()
		if got.Interval != tt.want.Interval || got.Jitter != tt.want.Jitter || got.Bound != tt.want.Bound ||
			got.MaxBound != tt.want.MaxBound || got.Budget != tt.want.Budget || got.Duty != tt.want.Duty {
			t.Errorf("%s: sweep config = interval %s jitter %s bound %d max bound %d budget %s duty %g; want %s %s %d %d %s %g",
				tt.name, got.Interval, got.Jitter, got.Bound, got.MaxBound, got.Budget, got.Duty,
				tt.want.Interval, tt.want.Jitter, tt.want.Bound, tt.want.MaxBound, tt.want.Budget, tt.want.Duty)
		}
	}
	// 0s turns the sweeper off: the interval stays zero, not the
	// sweeper's default hour.
	if got := load(map[string]string{"SEARCHD_SWEEP_INTERVAL": "0s"}); got.Interval != 0 {
		t.Errorf("SEARCHD_SWEEP_INTERVAL=0s: interval %s, want 0 (no sweeper)", got.Interval)
	}
}

func TestServeWithoutASweepIntervalRunsNoSweeper(t *testing.T) {
	t.Parallel()
	var logs pgtest.SyncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	// No pool: a sweeper that started would need one.
	run, err := server{logger: logger}.sweeper()
	if err != nil || run != nil {
		t.Fatalf("sweeper with no interval: run %v, error %v; want no run", run != nil, err)
	}
	if l := logLine(logs.String(), "sweeper off: the sweep interval is 0s; run searchd sweep from an outside scheduler to enforce retention"); l == nil {
		t.Errorf("the sweeper with no interval logged %q, want that the sweeper is off", logs.String())
	}
}

func TestServeSweepsWhileItServes(t *testing.T) {
	t.Parallel()
	b := sweepSetup(t)
	b.expired(t, "expired-before-start", expiredOpts{})
	b.live(t, "live", false)

	h := newHarness(map[string]string{
		"DATABASE_URL":       b.dbURL,
		"SEARCHD_JWT_SECRET": goodSecret,
		"SEARCHD_ADDR":       "127.0.0.1:0",
	})
	addr, stop := h.start(t, "serve", "--sweep-interval", "200ms", "--sweep-jitter", "0s")

	// eventually polls cond until it holds, or fails the test.
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 20s; serve logged:\n%s", what, h.stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	eventually("the claim expired before start is swept", func() bool {
		return slices.Equal(b.keys(t), []string{"live"})
	})
	// The sweeper runs again: a claim that expires while serving goes too.
	b.expired(t, "expired-while-serving", expiredOpts{})
	eventually("the claim expired while serving is swept", func() bool {
		return slices.Equal(b.keys(t), []string{"live"})
	})
	// The metrics the API serves count both, read and deleted apart.
	for _, series := range []string{"searchd_sweeper_rows_read_total", "searchd_sweeper_rows_deleted_total"} {
		want := series + `{table="` + sweeper.TableClaims + `"} 2`
		eventually("/metrics shows "+want, func() bool {
			return strings.Contains(getText(t, "http://"+addr+"/metrics"), want)
		})
	}
	sched := logLine(h.stderr.String(), "sweeper scheduled")
	if sched == nil || sched["interval"] != float64(200*time.Millisecond) || sched["jitter"] != 0.0 || sched["bound"] != 1000.0 {
		t.Errorf(`log line "sweeper scheduled" = %v, want interval 200ms, no jitter, bound 1000`, sched)
	}
	if l := logLine(h.stderr.String(), "sweeper: swept"); l == nil || l["table"] != sweeper.TableClaims || l["deleted"] != 1.0 {
		t.Errorf(`log line "sweeper: swept" = %v, want the server's logger to report the claims deleted`, l)
	}

	if code := stop(); code != 0 {
		t.Errorf("serve exited %d after the signal, want 0: %s", code, h.stderr.String())
	}
	if strings.Contains(h.stderr.String(), "sweeper: run failed") {
		t.Errorf("a sweep failed while serving:\n%s", h.stderr.String())
	}
}

func TestSweepHelpListsItsSettings(t *testing.T) {
	t.Parallel()
	help := wantHelpListing(t, []helpSetting{
		{"database-url", "DATABASE_URL", "required"},
		{"sweep-bound", "SEARCHD_SWEEP_BOUND", "1000, or the ceiling when that is lower"},
		{"sweep-max-bound", "SEARCHD_SWEEP_MAX_BOUND", "1000"},
		{"sweep-budget", "SEARCHD_SWEEP_BUDGET", "15m"},
		{"sweep-duty", "SEARCHD_SWEEP_DUTY", "0.25"},
		{"log-level", "SEARCHD_LOG_LEVEL", "info"},
		{"log-format", "SEARCHD_LOG_FORMAT", "json"},
	}, "sweep", "--help")
	if !strings.HasPrefix(help, "usage: searchd sweep") || strings.Contains(help, "sweep-interval") {
		t.Errorf("sweep --help =\n%s\nwant its usage, and no schedule: one run has none", help)
	}
	h := newHarness(nil)
	if code := h.run("help"); code != 0 || !strings.Contains(h.stdout.String(), "\n  sweep ") ||
		!strings.Contains(h.stdout.String(), "SEARCHD_SWEEP_MAX_BOUND") {
		t.Errorf("help = %d:\n%s\nwant the sweep command and its settings", code, h.stdout.String())
	}
}
