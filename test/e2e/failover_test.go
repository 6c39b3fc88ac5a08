//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The failover suite: the database server itself fails. A primary and a
// streaming standby (pgPair) serve three replicas that reach them through
// one multi-host DATABASE_URL with target_session_attrs=read-write. Under a
// load of saved-search starts, provider callbacks and tool claims, the
// primary's machine is lost (kill -9 of its whole process group), the
// standby is promoted with pg_ctl promote after promoteAfter, and the
// replicas must find it by themselves: no replica is restarted.
//
// The environment adds to the fault suite's (see the package comment):
// SEARCHD_E2E_PROMOTE_AFTER (default 10s) is how long no writable server
// exists between the kill and the promotion, longer than a replica's
// connect timeout and the listener's longest backoff (5 s each), so a
// replica must recover from an outage past its pool's patience;
// SEARCHD_E2E_REPLICATION_LATENCY (default 0s) delays every chunk of the
// replication stream; SEARCHD_E2E_FAILOVER_ASYNC=1 also runs the
// asynchronous variant, a report that counts what the failover lost and
// fails on nothing it finds.
//
// The synchronous run also holds one delivery inside its claim→apply window
// at the kill (callbackLoad.wedgeDelivery): its arrival is committed in the
// inbox (agent.provider_inbox) and acknowledged, its claim committed and its
// apply not, when the primary dies. Before the inbox that delivery was lost
// (answered as a duplicate while nothing had been applied); now the
// applier of a replica must apply it on the new primary, and the run fails
// unless every acknowledged delivery is applied exactly once, none left
// pending.

// failoverConfig sizes a failover run.
type failoverConfig struct {
	promoteAfter time.Duration
	replLatency  time.Duration
	async        bool
}

func loadFailoverConfig() (failoverConfig, error) {
	fc := failoverConfig{promoteAfter: 10 * time.Second}
	for _, it := range []struct {
		name     string
		dst      *time.Duration
		min, max time.Duration
	}{
		{"SEARCHD_E2E_PROMOTE_AFTER", &fc.promoteAfter, 0, 10 * time.Minute},
		{"SEARCHD_E2E_REPLICATION_LATENCY", &fc.replLatency, 0, time.Second},
	} {
		if v := os.Getenv(it.name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < it.min || d > it.max {
				return fc, fmt.Errorf("%s=%q: want a duration from %s to %s", it.name, v, it.min, it.max)
			}
			*it.dst = d
		}
	}
	fc.async = os.Getenv("SEARCHD_E2E_FAILOVER_ASYNC") == "1"
	return fc, nil
}

// failoverSecret signs the callbacks of the failover suite's provider, e2e.
const failoverSecret = "e2e-provider-secret-e2e-provider-secret"

// e2eProvider is the provider the failover suite's jobs run at.
const e2eProvider = "e2e"

// TestFailover runs the synchronous failover, which must lose nothing,
// and, when asked, the asynchronous one as a report.
func TestFailover(t *testing.T) {
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	fc, err := loadFailoverConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), setupTimeout)
	defer cancel()
	dir := workDir(t, "searchd-failover-")
	bin, err := buildSearchd(ctx, dir, cfg.race)
	if err != nil {
		t.Fatal(err)
	}
	var reports []string
	t.Run("Synchronous", func(t *testing.T) {
		reports = append(reports, runFailover(t, cfg, fc, bin, dir, true, true).summary())
	})
	if fc.async {
		t.Run("AsynchronousReport", func(t *testing.T) {
			reports = append(reports, runFailover(t, cfg, fc, bin, dir, false, false).summary())
		})
	}
	for _, r := range reports {
		t.Log(r)
	}
}

// failoverReport is what one failover run measured and lost.
type failoverReport struct {
	mode string
	// noWriter is the time from the kill to the promotion's request: no
	// server accepted writes; promoteTook is how long pg_ctl promote took.
	noWriter, promoteTook time.Duration
	// lagBytes is how much WAL the standby had not flushed just before the
	// kill.
	lagBytes int64
	// outage is the time from the kill to the first start answered 2xx;
	// backAfterPromote the time from the promotion to it, and
	// allBackAfterPromote to the first 2xx of the last replica.
	outage, backAfterPromote, allBackAfterPromote time.Duration
	listenBack                                    time.Duration // promotion to three LISTEN sessions on the new primary

	starts, startsLost                       int    // calls answered 2xx; of them, those whose Run is gone
	deliveries, deliveriesLost, appliedTwice int    // deliveries acknowledged; of them, not applied; applied more than once
	probeBy                                  string // who applied the delivery held inside its apply at the kill (handler, applier), with probe
	toolCalls, toolsRepeated                 int    // tool calls acknowledged; of them, called again at the vendor after
	unavailable                              int    // 503s answered
	violations                               int
}

func (r failoverReport) probeNote() string {
	if r.probeBy == "" {
		return ""
	}
	return " (the delivery held inside its apply at the kill applied by the " + r.probeBy + ")"
}

func (r failoverReport) summary() string {
	return fmt.Sprintf("%s failover: standby %d WAL bytes behind at the kill; no writable server for %s (pg_ctl promote then took %s); starts back %s after the kill, %s after the promotion "+
		"(all three replicas %s; LISTEN hubs %s); %d starts acknowledged, %d lost their Run; "+
		"%d deliveries acknowledged, %d not applied, %d applied twice%s; %d tool calls acknowledged, %d executed again after; "+
		"%d 503s; %d violations",
		r.mode, r.lagBytes, r.noWriter.Round(time.Millisecond), r.promoteTook.Round(time.Millisecond), r.outage.Round(time.Millisecond), r.backAfterPromote.Round(time.Millisecond),
		r.allBackAfterPromote.Round(time.Millisecond), r.listenBack.Round(time.Millisecond),
		r.starts, r.startsLost, r.deliveries, r.deliveriesLost, r.appliedTwice, r.probeNote(), r.toolCalls, r.toolsRepeated,
		r.unavailable, r.violations)
}

// runFailover sets up a pair and three replicas in a directory of its own
// under parent, drives the load, fails the primary over, and checks. With
// synchronous every loss is a test failure; without, it is counted and
// reported. With probe, one delivery is held between its claim and its
// apply when the primary dies (callbackLoad.wedgeDelivery).
func runFailover(t *testing.T, cfg config, fc failoverConfig, bin, parent string, synchronous, probe bool) failoverReport {
	mode := "asynchronous"
	if synchronous {
		mode = "synchronous"
	}
	rep := failoverReport{mode: mode}
	ctx := t.Context()
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	dir := sharedDir(t, parent, mode+"-")
	start := time.Now()
	pair, err := startPair(sctx, dir, synchronous, fc.replLatency)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{cfg: cfg, dir: dir, pg: pair.primary}
	h.teardown(t, pair.Stop)
	if err := migrate(sctx, bin, pair.URL("")); err != nil {
		t.Fatal(err)
	}
	// The harness's own connections wait as long as a loaded machine
	// takes to make one: they observe, they are not the product.
	if h.db, err = pgxpool.New(sctx, pair.URL("pool_max_conns=4&application_name=e2e-harness&connect_timeout=30")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		name := fmt.Sprintf("searchd-f%d", i+1)
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{name: name, bin: bin, lease: cfg.lease,
			// The replica's whole view of the database: one URL naming
			// both servers, of which it takes the one that accepts writes,
			// with the connect timeout docs/scaling.md recommends.
			dbURL:   pair.URL("application_name=" + name + "&connect_timeout=10"),
			addr:    fmt.Sprintf("127.0.0.1:%d", port),
			logPath: fmt.Sprintf("%s/%s.log", dir, name),
			// The load's clients are one organization, many at once on
			// each replica, at the seat queue's defaults.
			env: []string{"SEARCHD_PROVIDER_SECRETS=" + e2eProvider + "=" + failoverSecret},
		}
		h.replicas = append(h.replicas, r)
		if err := r.Start(sctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s pair: primary %s, standby %s (replication latency %s), replicas on %s, in %s", mode,
		pair.primary.TCPAddr(), pair.standby.TCPAddr(), fc.replLatency, pair.URL(""), time.Since(start).Round(time.Millisecond))

	s, err := newScenarioRun(ctx, t, h, "Failover"+strings.ToUpper(mode[:1])+mode[1:])
	if err != nil {
		t.Fatal(err)
	}
	cb, err := newCallbackLoad(ctx, s, uuid.New())
	if err != nil {
		t.Fatal(err)
	}
	tl, err := newToolLoad(ctx, s, pair.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer tl.close()

	// The load: starts as in the fault suite, a sender per provider job,
	// and a tool worker per agent runtime.
	var stop atomic.Bool
	var load sync.WaitGroup
	s.driveGroups(ctx, &load, &stop)
	for _, j := range cb.jobs {
		load.Go(func() { cb.send(ctx, j, &stop) })
	}
	for _, w := range tl.workers {
		load.Go(func() { tl.run(ctx, w, &stop) })
	}

	time.Sleep(min(cfg.duration/3, 2*time.Second))
	if probe {
		if err := cb.wedgeDelivery(ctx, s, pair.primary); err != nil {
			t.Fatal(err)
		}
	}
	// The machine is lost with what it was sending: the replication link
	// is cut (a chunk the proxy holds for its latency is dropped, as on
	// a wire that goes dead), then every process is killed. The standby
	// retries its connection only after wal_retrieve_retry_interval (5 s),
	// so nothing streams between the two.
	// How far behind the standby is, just before: the WAL the primary has
	// written and the standby has not flushed.
	if err := h.db.QueryRow(ctx, `SELECT coalesce((SELECT pg_current_wal_lsn() - flush_lsn FROM pg_stat_replication
		WHERE application_name = $1), -1)::bigint`, standbyName).Scan(&rep.lagBytes); err != nil {
		t.Logf("reading the replication lag: %v", err)
	}
	killed := time.Now()
	pair.repl.Cut()
	if err := pair.primary.KillHost(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(fc.promoteAfter)
	// The promotion is timed from its request: the standby accepts writes
	// a little before pg_ctl, polling, sees it.
	promoted := time.Now()
	if err := pair.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	rep.promoteTook = time.Since(promoted)
	rep.noWriter = promoted.Sub(killed)
	// 503s are excused while no server accepts writes, and for a margin
	// after, while pools find the new primary.
	s.down(killed, promoted.Add(downMargin))
	rep.listenBack = waitListeners(ctx, t, h, promoted)

	if rest := cfg.duration - time.Since(start); rest > 0 {
		time.Sleep(rest)
	}
	time.Sleep(3 * time.Second) // load on the new primary
	stop.Store(true)
	drainTimeout := tl.callTimeout() + 10*time.Second
	if !waitFor(&load, drainTimeout) || !waitFor(&s.bg, drainTimeout) {
		t.Errorf("the load did not stop within %s of its end", drainTimeout)
	}

	// What the failover lost is read before the keys are finished: a
	// finished lost key has a new Run.
	rep.starts, rep.startsLost = s.lostRuns(ctx)
	finishViolations := s.finish(ctx)
	v := s.verify(ctx)
	v.violations = append(finishViolations, v.violations...)
	v.violations = append(v.violations, cb.verify(ctx, s, &rep)...)
	v.violations = append(v.violations, tl.verify(ctx, s, &rep)...)
	for _, r := range h.replicas {
		if r.Exited() {
			v.violations = append(v.violations, fmt.Sprintf("%s exited on its own:\n%s", r.name, tail(r.logPath)))
		}
		bad, _ := r.logProblems()
		for _, line := range bad {
			v.violations = append(v.violations, fmt.Sprintf("%s logged: %s", r.name, line))
		}
	}
	rep.unavailable = v.unavailable
	rep.outage, rep.backAfterPromote, rep.allBackAfterPromote = serviceBack(s.rec.all(), h.replicas, killed, promoted)
	rep.violations = len(v.violations)
	t.Log(rep.summary())
	for _, n := range s.notes {
		t.Log("  " + n)
	}
	if !synchronous {
		// A report: what the failover lost is the figure, not a failure.
		for i, msg := range v.violations {
			if i == 30 {
				t.Logf("... and %d more", len(v.violations)-30)
				break
			}
			t.Log("found: " + msg)
		}
		return rep
	}
	if rep.startsLost+rep.deliveriesLost+rep.appliedTwice+rep.toolsRepeated > 0 {
		t.Errorf("the synchronous failover lost work: %d starts lost their Run, %d deliveries were not applied, "+
			"%d applied twice, %d tool calls executed again", rep.startsLost, rep.deliveriesLost, rep.appliedTwice, rep.toolsRepeated)
	}
	failWith(t, v.violations, 30)
	h.logTails(t, [2]string{"standby (new primary)", pair.standby.logPath})
	return rep
}

// waitListeners waits until every replica's claim listener holds a LISTEN
// session on the new primary, and returns how long after the promotion;
// a replica whose hub never reconnects fails the test.
func waitListeners(ctx context.Context, t *testing.T, h *harness, promoted time.Time) time.Duration {
	deadline := promoted.Add(30 * time.Second)
	for {
		var n int
		err := h.db.QueryRow(ctx, `SELECT count(DISTINCT application_name) FROM pg_stat_activity
			WHERE application_name LIKE 'searchd-f%' AND query ILIKE 'LISTEN%'`).Scan(&n)
		if err == nil && n == len(h.replicas) {
			return time.Since(promoted)
		}
		if time.Now().After(deadline) {
			t.Errorf("%d of %d replicas listen for claim ends on the new primary 30s after the promotion (%v)", n, len(h.replicas), err)
			return time.Since(promoted)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serviceBack reads, from every attempt of the starts, the first 2xx after
// the promotion was requested: how long after the kill and after the
// promotion, and how long after the promotion the last replica answered
// its first 2xx. A 2xx between the kill and the promotion is the late
// answer of a start that committed before the kill, not service.
func serviceBack(attempts []attempt, replicas []*replica, killed, promoted time.Time) (outage, back, allBack time.Duration) {
	first := map[string]time.Time{}
	var firstAny time.Time
	for _, a := range attempts {
		if a.status < 200 || a.status > 299 || a.at.Before(promoted) {
			continue
		}
		if firstAny.IsZero() || a.at.Before(firstAny) {
			firstAny = a.at
		}
		if f, ok := first[a.replica]; !ok || a.at.Before(f) {
			first[a.replica] = a.at
		}
	}
	if firstAny.IsZero() {
		return -1, -1, -1
	}
	last := firstAny
	for _, r := range replicas {
		f, ok := first[r.name]
		if !ok {
			return firstAny.Sub(killed), firstAny.Sub(promoted), -1
		}
		if f.After(last) {
			last = f
		}
	}
	return firstAny.Sub(killed), firstAny.Sub(promoted), last.Sub(promoted)
}

// lostRuns counts the starts answered 2xx and, of them, those whose Run is
// not in the database: admitted on a primary that died before the standby
// had it.
func (s *scenarioRun) lostRuns(ctx context.Context) (acked, lost int) {
	s.mu.Lock()
	ids := map[string]bool{}
	for _, c := range s.calls {
		if c.err == nil {
			acked++
			ids[c.runID] = true
		}
	}
	s.mu.Unlock()
	have := map[string]bool{}
	rows, err := s.h.db.Query(ctx, `SELECT id::text FROM agent.runs WHERE organization_id = $1`, s.org)
	if err != nil {
		s.t.Errorf("reading the Runs: %v", err)
		return acked, 0
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err == nil {
			have[id] = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.calls {
		if c.err == nil && !have[c.runID] {
			lost++
		}
	}
	return acked, lost
}
