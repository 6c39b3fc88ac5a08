//go:build e2e

// Package e2e is the fault suite of searchd: real processes on loopback.
// It builds the binary, starts a PostgreSQL cluster of its own, three
// `searchd serve` replicas that reach it through a TCP proxy, and many
// clients (the real Go client) that start saved searches with keys they
// share, while it breaks one thing at a time: a replica killed, a replica
// stopped past its lease inside its freeze or inside its commit, the
// database restarted immediately, the network to the database cut and
// slowed, and blackholed (accepting and answering nothing). Probes hold a replica's start at a chosen point (with a row lock
// or an advisory lock) so that each fault lands while the replica owns a
// claim. After each scenario every key is started until it succeeds, and
// the suite checks, from the database and from every answer a client saw,
// that each key made exactly one snapshot and one Run. The inbox
// scenarios (inbox_test.go) play a provider instead: signed callbacks with
// a 2 s timeout, redelivered to healthy replicas until acknowledged, while
// a replica is stopped inside its apply transactions and killed, the
// database connection is cut after the inbox or the claim insert commits,
// or PostgreSQL restarts; every acknowledged delivery must take effect
// exactly once.
//
// The tests are behind the build tag e2e. Run them with
//
//	go test -tags e2e -count=1 -v ./test/e2e/
//
// The environment sizes them: SEARCHD_E2E_LEASE (the saved-search lease
// the replicas run with, SEARCHD_SAVED_SEARCH_LEASE; default 3s, so each
// scenario takes seconds; 30s is the product's), SEARCHD_E2E_DURATION
// (load per scenario, default 6s; faults repeat while it lasts, a lease
// apart),
// SEARCHD_E2E_ANSWER_TIMEOUT (the replicas' SEARCHD_DB_ANSWER_TIMEOUT,
// default the product's 20s; the blackhole outlasts it, the release and a
// slack by 4 s),
// SEARCHD_E2E_CLIENTS (default 24), SEARCHD_E2E_CLIENTS_PER_KEY (default 3),
// SEARCHD_E2E_RACE=1 (build the replicas with the race detector),
// SEARCHD_E2E_KEEP=1 (keep the logs and the data directory). SEARCHD_PG_BIN
// names the directory of initdb and postgres when they are not found on
// their own.
package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/idempotency"
)

// setupTimeout bounds building the binary and starting a process: a
// bound on a hang, not a claim of speed. Beside two CPU hogs, building
// searchd and an initdb took longer than 3 minutes together.
const setupTimeout = 10 * time.Minute

// config sizes the suite; see the package comment.
type config struct {
	// lease is the lease of a saved-search preparation the replicas run
	// with; every wait for a reclaim is derived from it.
	lease time.Duration
	// answerTimeout is the replicas' SEARCHD_DB_ANSWER_TIMEOUT.
	answerTimeout time.Duration
	duration      time.Duration
	clients       int
	perKey        int
	race          bool
	// callSlack is how long a client's call may retry beyond the lease
	// (callTimeout): 60 s by default, for a busy machine where attempts
	// time out (loadPolicy's AttemptTimeout) and their claims wait out a
	// lease more than once; more where an outage outlasts it (the Citus
	// variant's worker restart).
	callSlack time.Duration
}

// loadConfig reads the config from the environment. Its errors name the
// variable and the allowed range.
func loadConfig() (config, error) {
	cfg := config{lease: defaultLease, answerTimeout: defaultAnswerTimeout, duration: 6 * time.Second, clients: 24, perKey: 3, callSlack: 60 * time.Second}
	if v := os.Getenv("SEARCHD_E2E_LEASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > idempotency.MaxLease {
			return cfg, fmt.Errorf("SEARCHD_E2E_LEASE=%q: want a duration from 1s to %s", v, idempotency.MaxLease)
		}
		cfg.lease = d
	}
	if v := os.Getenv("SEARCHD_E2E_ANSWER_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > time.Hour {
			return cfg, fmt.Errorf("SEARCHD_E2E_ANSWER_TIMEOUT=%q: want a duration from 1s to 1h", v)
		}
		cfg.answerTimeout = d
	}
	if v := os.Getenv("SEARCHD_E2E_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > 24*time.Hour {
			return cfg, fmt.Errorf("SEARCHD_E2E_DURATION=%q: want a duration from 1s to 24h", v)
		}
		cfg.duration = d
	}
	for _, it := range []struct {
		name     string
		dst      *int
		min, max int
	}{
		{"SEARCHD_E2E_CLIENTS", &cfg.clients, 1, 512},
		{"SEARCHD_E2E_CLIENTS_PER_KEY", &cfg.perKey, 1, 16},
	} {
		if v := os.Getenv(it.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < it.min || n > it.max {
				return cfg, fmt.Errorf("%s=%q: want a whole number from %d to %d", it.name, v, it.min, it.max)
			}
			*it.dst = n
		}
	}
	if cfg.clients < cfg.perKey {
		return cfg, fmt.Errorf("SEARCHD_E2E_CLIENTS=%d is less than SEARCHD_E2E_CLIENTS_PER_KEY=%d", cfg.clients, cfg.perKey)
	}
	cfg.race = os.Getenv("SEARCHD_E2E_RACE") == "1"
	return cfg, nil
}

// harness is what every scenario shares: the binary, the database, the
// proxy and the replicas.
type harness struct {
	cfg      config
	dir      string
	pg       *postgres
	proxy    *faultProxy
	replicas []*replica
	// db is the harness's own pool, straight to the unix socket: the
	// checks never go through the proxy the faults live in.
	db *pgxpool.Pool
}

// setup builds and starts everything, and registers its teardown.
func setup(t *testing.T, cfg config) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	dir := workDir(t, "searchd-e2e-")
	h := &harness{cfg: cfg, dir: dir}
	h.teardown(t, func() {
		if h.pg != nil {
			h.pg.Stop()
		}
	})

	start := time.Now()
	bin, err := buildSearchd(ctx, dir, cfg.race)
	if err != nil {
		t.Fatal(err)
	}
	if h.pg, err = startPostgres(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, bin, h.pg.URL(dbName)); err != nil {
		t.Fatal(err)
	}
	if h.db, err = pgxpool.New(ctx, h.pg.URL(dbName)+"&pool_max_conns=4&application_name=e2e-harness"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.Exec(ctx, holdCompletionSQL); err != nil {
		t.Fatalf("installing the commit-probe trigger: %v", err)
	}
	if _, err := h.db.Exec(ctx, holdInsertSQL); err != nil {
		t.Fatalf("installing the cut-probe triggers: %v", err)
	}
	if h.proxy, err = newFaultProxy(h.pg.TCPAddr()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		r, err := newReplica(fmt.Sprintf("searchd-r%d", i+1), bin, h.proxy.Addr(), dir, cfg.lease)
		if err != nil {
			t.Fatal(err)
		}
		// The clients of a scenario are one organization, many of them
		// on each replica at once on purpose, at the defaults: the
		// seat queue queues them, it caps no organization. The
		// answer timeout is the product's unless SEARCHD_E2E_ANSWER_TIMEOUT
		// says otherwise.
		r.env = []string{"SEARCHD_DB_ANSWER_TIMEOUT=" + cfg.answerTimeout.String()}
		h.replicas = append(h.replicas, r)
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("setup: searchd built (race %v), PostgreSQL on %s, proxy on %s, replicas %s %s %s with a %s lease, in %s",
		cfg.race, h.pg.TCPAddr(), h.proxy.Addr(), h.replicas[0].addr, h.replicas[1].addr, h.replicas[2].addr, cfg.lease,
		time.Since(start).Round(time.Millisecond))
	return h
}

// sharedDir makes a directory under parent (the system's temporary
// directory when empty) that PostgreSQL's user can enter: not t.TempDir,
// since PostgreSQL runs as another user.
func sharedDir(t *testing.T, parent, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, pattern)
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// workDir is a test's [sharedDir] for its binary, data and logs, removed
// once the test and its cleanups are done, unless SEARCHD_E2E_KEEP=1 or
// the test failed.
func workDir(t *testing.T, pattern string) string {
	t.Helper()
	dir := sharedDir(t, "", pattern)
	t.Cleanup(func() {
		if os.Getenv("SEARCHD_E2E_KEEP") == "1" || t.Failed() {
			t.Logf("kept %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

// standalone builds searchd into dir (never with -race: the race
// detector's shadow memory would be measured too), starts a server of the
// suite's own there with start and migrates the suite's database. The
// server is stopped at cleanup.
func standalone(ctx context.Context, t *testing.T, dir string,
	start func(ctx context.Context, parent string) (*postgres, error)) (bin string, pg *postgres) {
	t.Helper()
	bin, err := buildSearchd(ctx, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if pg, err = start(ctx, dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Stop)
	if err := migrate(ctx, bin, pg.URL(dbName)); err != nil {
		t.Fatal(err)
	}
	return bin, pg
}

// teardown registers h's teardown: the replicas killed, the harness's
// pool and the proxy closed, then stop (the database's).
func (h *harness) teardown(t *testing.T, stop func()) {
	t.Cleanup(func() {
		for _, r := range h.replicas {
			r.Kill()
		}
		if h.db != nil {
			h.db.Close()
		}
		if h.proxy != nil {
			h.proxy.Close()
		}
		stop()
	})
}

// failWith fails t with each of violations: the first shown of them, and
// how many more there are.
func failWith(t *testing.T, violations []string, shown int) {
	t.Helper()
	for i, msg := range violations {
		if i == shown {
			t.Errorf("... and %d more violations", len(violations)-shown)
			return
		}
		t.Error(msg)
	}
}

// logTails logs, once t has failed, the tail of every replica's log, then
// of each server log named in servers (a name and a path).
func (h *harness) logTails(t *testing.T, servers ...[2]string) {
	if !t.Failed() {
		return
	}
	for _, r := range h.replicas {
		t.Logf("%s log tail:\n%s", r.name, tail(r.logPath))
	}
	for _, s := range servers {
		t.Logf("%s log tail:\n%s", s[0], tail(s[1]))
	}
}

// heal undoes whatever a scenario left broken: a stopped replica is
// continued, a killed one started, the proxy made transparent, a crashed
// database started. It is the teardown of every scenario.
func (h *harness) heal(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	h.proxy.SetLatency(0)
	h.pg.mu.Lock()
	pgDown := h.pg.proc == nil
	h.pg.mu.Unlock()
	if pgDown {
		if err := h.pg.Start(ctx); err != nil {
			t.Fatalf("heal: %v", err)
		}
	}
	for _, r := range h.replicas {
		r.mu.Lock()
		running := r.proc != nil
		r.mu.Unlock()
		switch {
		case running && !r.Exited():
			_ = r.Signal(syscall.SIGCONT)
		default:
			r.Kill()
			if err := r.Start(ctx); err != nil {
				t.Fatalf("heal: %v", err)
			}
		}
	}
}

// TestFaults runs the scenarios one at a time against one set of
// processes, each with an organization of its own.
func TestFaults(t *testing.T) {
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	h := setup(t, cfg)
	// First, cheaply: a checker that cannot fail would pass every scenario.
	if !t.Run("ChecksCatchPlantedViolations", func(t *testing.T) { testChecksCatchPlantedViolations(t, h) }) {
		t.FailNow()
	}
	var summaries []string
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			defer h.heal(t)
			summaries = append(summaries, runScenario(t, h, sc))
		})
	}
	for _, sc := range inboxScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			defer h.heal(t)
			summaries = append(summaries, runInboxScenario(t, h, sc))
		})
	}
	for _, s := range summaries {
		t.Log(s)
	}
}

// defaultAnswerTimeout is the suite's SEARCHD_DB_ANSWER_TIMEOUT: the
// product's, so the blackhole scenario measures what users get, and no
// statement or connection of the load meets it on a busy machine.
const defaultAnswerTimeout = 20 * time.Second

// defaultLease is the suite's saved-search lease: a tenth of the
// product's, long enough for a healthy freeze under the network faults and
// short enough that a scenario waiting out a crashed holder takes seconds.
const defaultLease = 3 * time.Second

// callTimeout is the deadline of one logical start: a claim orphaned by a
// fault blocks its key for up to a lease, then it is reclaimed; callSlack
// is the rest (see config).
func (c config) callTimeout() time.Duration { return c.lease + c.callSlack }

// soakGap is the healthy load between two faults when the duration allows
// more than one: long enough for the claims one fault orphaned to be
// reclaimed before the next, so no call meets two leases.
func (c config) soakGap() time.Duration { return c.lease + 5*time.Second }

// slowCall is how long a call must take to count as having waited out a
// lease: its key's claim was orphaned by the fault.
func (c config) slowCall() time.Duration { return c.lease / 2 }
