//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/readiness"
	"github.com/searchd/searchd/migrations"
)

// TestRollingUpgrade is the rolling upgrade of docs/deploy.md, from the
// previous release to this build, on one database while starts go on:
//
//  1. The previous release's binary, built from the git history, migrates
//     a fresh database and serves (the old replica).
//  2. A burst of starts begins on it (keys shared by several clients);
//     in its middle this build's `searchd migrate` runs, and the old
//     replica serves on the new schema.
//  3. A replica of this build starts, and more clients start keys over
//     both replicas at once, each key's clients on different replicas.
//  4. A schema one expand migration newer than this build (a test-only
//     migration applied by hand: a table, nullable and defaulted columns)
//     stands for the next release's migrate: this build's replica is
//     restarted on it, is ready, says the schema is newer once, and serves
//     a last burst beside the old one.
//  5. Every key is replayed once over both replicas.
//
// Then the fault suite's checks (verify): no 5xx (no 503 either: the
// database never went down), no 4xx but 409 in_progress, every
// acknowledged start exactly one Run and one snapshot, no Run doubled,
// every answer for a key naming its Run. The clients reach the replicas
// directly, not through their /readyz, which only a load balancer asks:
// this checks that a replica of release N serves correctly on N+1's
// schema; readiness on a newer schema is checked for this build's replica.
//
// The previous release is the release VERSION names: the newest commit
// before HEAD that set VERSION (a release renames Unreleased to its
// version and sets VERSION; at a release's own commit, the release before
// it). VERSION was added, at 0.7.0, by the commit just after 0.7.0's
// CHANGELOG, with no change to the code. The test needs the history: it
// fails on a shallow clone and says how to deepen it.
func TestRollingUpgrade(t *testing.T) {
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), setupTimeout)
	defer cancel()
	dir := workDir(t, "searchd-upgrade-")
	begin := time.Now()

	prev, err := previousRelease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// One after the other: the second build finds the dependencies the
	// first compiled in the build cache (two at once would both compile
	// them on a cold cache).
	newBin, err := buildSearchd(ctx, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	oldBin, err := prev.build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	built := time.Since(begin)

	pg, err := startPostgres(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{cfg: cfg, dir: dir, pg: pg}
	h.teardown(t, pg.Stop)
	if out, err := migrateOut(ctx, oldBin, pg.URL(dbName)); err != nil {
		t.Fatalf("the previous release's migrate: %v", err)
	} else {
		t.Logf("%s: %s", prev, out)
	}
	if h.db, err = pgxpool.New(ctx, pg.URL(dbName)+"&pool_max_conns=4&application_name=e2e-harness"); err != nil {
		t.Fatal(err)
	}
	newest := embeddedNewest(t)
	if prev.newest == newest {
		t.Logf("the previous release %s and this build have the same migrations (up to %d): the burst runs both versions on one schema, and this build's migrate applies nothing",
			prev.version, newest)
	} else {
		t.Logf("the previous release %s embeds migrations up to %d, this build up to %d: this build's migrate applies the rest in the middle of the burst",
			prev.version, prev.newest, newest)
	}

	old, err := newReplica("searchd-old", oldBin, pg.TCPAddr(), dir, cfg.lease)
	if err != nil {
		t.Fatal(err)
	}
	// 0.7.0 capped one organization's requests in flight on a replica
	// (SEARCHD_ORG_MAX_IN_FLIGHT, a quarter of the pool), answering 429
	// above it; the suite's one organization is lifted to what this
	// build does (no cap: its queue queues). A release that no longer
	// reads it warns and ignores it.
	old.env = []string{"SEARCHD_ORG_MAX_IN_FLIGHT=10000"}
	h.replicas = []*replica{old}
	if err := old.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer h.logTails(t)
	s, err := newScenarioRun(ctx, t, h, "Upgrade")
	if err != nil {
		t.Fatal(err)
	}

	gap := max(cfg.duration/3, time.Second)
	groups := max(2, cfg.clients/cfg.perKey)
	var load sync.WaitGroup
	var stop atomic.Bool
	drive := func(first, n int, targets []*replica) {
		for g := first; g < first+n; g++ {
			lg := &loadGroup{id: g}
			for m := range cfg.perKey {
				who := fmt.Sprintf("g%02d.%d", g, m)
				c, err := newClient(who, s.token, targets, g+m, loadPolicy, s.rec)
				if err != nil {
					t.Fatal(err)
				}
				lg.clients = append(lg.clients, c)
				lg.names = append(lg.names, who)
			}
			load.Go(func() { lg.drive(ctx, s, &stop) })
		}
	}
	defer func() { stop.Store(true); load.Wait() }() // on a failure below

	// 1–2. The old replica alone; this build migrates in the middle.
	drive(0, groups/2, []*replica{old})
	time.Sleep(gap)
	from := time.Now()
	out, err := migrateOut(ctx, newBin, pg.URL(dbName))
	if err != nil {
		t.Fatalf("this build's migrate in the burst: %v", err)
	}
	t.Logf("this build's migrate, in the burst, in %s: %s", time.Since(from).Round(time.Millisecond), out)
	// The old replica alone on the new schema, for at least two of its
	// readiness checks: what its /readyz said (the clients call it
	// whatever it says; a load balancer would not).
	seen := map[string]int{}
	for until := time.Now().Add(max(gap, 2*readiness.DefaultInterval+time.Second)); time.Now().Before(until); time.Sleep(250 * time.Millisecond) {
		seen[readyz(old)]++
	}
	t.Logf("%s's /readyz on this build's schema, sampled every 250 ms: %v", prev.version, seen)

	// 3. This build beside it, the same keys over both.
	fresh, err := newReplica("searchd-new", newBin, pg.TCPAddr(), dir, cfg.lease)
	if err != nil {
		t.Fatal(err)
	}
	h.replicas = []*replica{old, fresh}
	if err := fresh.Start(ctx); err != nil {
		t.Fatal(err)
	}
	both := []*replica{old, fresh}
	drive(groups, groups-groups/2, both)
	time.Sleep(cfg.duration)

	// 4. The next release's expand migration, applied by hand; this
	// build's replica restarts on it (its start-up check and readiness).
	if _, err := h.db.Exec(ctx, nextReleaseExpand(newest+1)); err != nil {
		t.Fatalf("the test-only expand migration: %v", err)
	}
	// Stopped as a rollout stops a pod: SIGTERM, requests drained.
	if err := fresh.terminate(); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Start(ctx); err != nil {
		t.Fatalf("this build on a schema one expand migration newer: %v", err)
	}
	if line := fresh.logLine("schema is newer than this binary"); line == "" {
		t.Errorf("%s logged nothing about the newer schema", fresh.name)
	}
	drive(2*groups, groups/2, both)
	time.Sleep(gap)
	if got := readyz(fresh); got != "200" {
		t.Errorf("%s's /readyz on a schema one expand migration newer = %s, want 200", fresh.name, got)
	}
	stop.Store(true)
	load.Wait()

	// 5. Every key once more, over both replicas.
	replayed := s.replayAll(ctx, both)

	v := s.verify(ctx)
	failWith(t, v.violations, 20)
	for _, r := range h.replicas {
		if bad, _ := r.logProblems(); len(bad) > 0 {
			t.Errorf("%s logged %d lines no upgrade excuses, the first: %s", r.name, len(bad), bad[0])
		}
	}
	// Runs the old replica admitted after this build's migrate have no
	// hand-off when the previous release predates the dispatch outbox
	// (00016): docs/deploy.md's upgrade from 0.7.0 re-runs its backfill.
	if prev.newest < 16 && newest >= 16 {
		var missing int
		if err := h.db.QueryRow(ctx, runsWithoutDispatch, s.org).Scan(&missing); err != nil {
			t.Fatal(err)
		}
		tag, err := h.db.Exec(ctx, dispatchBackfill)
		if err != nil {
			t.Fatal(err)
		}
		var after int
		if err := h.db.QueryRow(ctx, runsWithoutDispatch, s.org).Scan(&after); err != nil {
			t.Fatal(err)
		}
		t.Logf("Runs admitted by %s on this build's schema without a dispatch: %d; the backfill of docs/deploy.md inserted %d, leaving %d",
			prev.version, missing, tag.RowsAffected(), after)
		if after != 0 {
			t.Errorf("after the backfill %d queued Runs still have no dispatch", after)
		}
	}
	t.Logf("upgrade %s -> this build: %d keys, %d requests (%d retries, %d in_progress, %d 503, %d other 5xx, %d transport), %d replays, slowest call %s; built in %s, %s in all",
		prev.version, v.keys, v.requests, v.retries, v.conflicts, v.unavailable, v.other5xx, v.transport, replayed,
		v.slowest.Round(time.Millisecond), built.Round(time.Second), time.Since(begin).Round(time.Second))
}

// release is a commit of the history whose binary the test builds.
type release struct {
	root, commit, version string
	// newest is the highest migration the release embeds.
	newest int64
}

func (r release) String() string { return fmt.Sprintf("release %s (%.12s)", r.version, r.commit) }

// previousRelease finds the release VERSION names (see TestRollingUpgrade)
// in the history of the checkout the test runs in. It returns an error
// when git is missing, the clone is shallow, or no commit before HEAD sets
// VERSION.
func previousRelease(ctx context.Context) (release, error) {
	git := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "git", args...).Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				err = fmt.Errorf("%w: %s", err, ee.Stderr)
			}
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	var r release
	var err error
	if r.root, err = git("rev-parse", "--show-toplevel"); err != nil {
		return r, fmt.Errorf("the upgrade test builds the previous release from the git history: %w", err)
	}
	if shallow, err := git("-C", r.root, "rev-parse", "--is-shallow-repository"); err != nil {
		return r, err
	} else if shallow == "true" {
		return r, fmt.Errorf("the clone at %s is shallow: the upgrade test builds the previous release from the history; "+
			"deepen it with `git fetch --unshallow` (in CI: a checkout with fetch-depth 0)", r.root)
	}
	if r.commit, err = git("-C", r.root, "log", "-1", "--format=%H", "HEAD~1", "--", "VERSION"); err != nil {
		return r, err
	}
	if r.commit == "" {
		return r, fmt.Errorf("no commit before HEAD in %s sets VERSION: there is no previous release to upgrade from", r.root)
	}
	if r.version, err = git("-C", r.root, "show", r.commit+":VERSION"); err != nil {
		return r, err
	}
	files, err := git("-C", r.root, "ls-tree", "--name-only", r.commit, "migrations/")
	if err != nil {
		return r, err
	}
	for _, f := range strings.Fields(files) {
		if v, err := strconv.ParseInt(strings.SplitN(filepath.Base(f), "_", 2)[0], 10, 64); err == nil && strings.HasSuffix(f, ".sql") {
			r.newest = max(r.newest, v)
		}
	}
	return r, nil
}

// build writes the release's tree into dir (git archive) and builds its
// ./cmd/searchd there through the module proxy, as a user of the release
// would; it returns the binary's path.
func (r release) build(ctx context.Context, dir string) (string, error) {
	src := filepath.Join(dir, "src-"+r.version)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	tarball := filepath.Join(dir, "release.tar")
	if out, err := exec.CommandContext(ctx, "git", "-C", r.root, "archive", "--format=tar", "-o", tarball, r.commit).CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %w\n%s", r.commit, err, out)
	}
	if out, err := exec.CommandContext(ctx, "tar", "-xf", tarball, "-C", src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("unpacking %s: %w\n%s", tarball, err, out)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "searchd-"+r.version)
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "./cmd/searchd")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/searchd of %s: %w\n%s", r, err, out)
	}
	return bin, nil
}

// migrateOut runs `searchd migrate` against dbURL and returns what it
// printed.
func migrateOut(ctx context.Context, bin, dbURL string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, "migrate")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "DATABASE_URL=" + dbURL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s migrate: %w\n%s", bin, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// embeddedNewest is the highest migration this build embeds.
func embeddedNewest(t *testing.T) int64 {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var newest int64
	for _, f := range files {
		v, err := strconv.ParseInt(f[:5], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
		newest = max(newest, v)
	}
	return newest
}

// nextReleaseExpand is a migration of a release after this build, of the
// expand kind only (migrations' package comment), recorded as version:
// a new table, a nullable column, a defaulted NOT NULL column and a
// constraint added NOT VALID on the tables a start writes.
func nextReleaseExpand(version int64) string {
	return `BEGIN;
CREATE TABLE agent.e2e_next_release (organization_id uuid NOT NULL, id uuid NOT NULL, PRIMARY KEY (organization_id, id));
ALTER TABLE agent.runs ADD COLUMN e2e_next_note text;
ALTER TABLE agent.saved_search_snapshots ADD COLUMN e2e_next_flag boolean NOT NULL DEFAULT false;
ALTER TABLE agent.idempotency_keys ADD COLUMN e2e_next_hint text,
	ADD CONSTRAINT idempotency_keys_e2e_next_hint_check CHECK (e2e_next_hint IS NULL OR e2e_next_hint <> '') NOT VALID;
CREATE INDEX runs_e2e_next_note_idx ON agent.runs (organization_id, e2e_next_note) WHERE e2e_next_note IS NOT NULL;
INSERT INTO public.goose_db_version (version_id, is_applied) VALUES (` + strconv.FormatInt(version, 10) + `, true);
COMMIT;`
}

// runsWithoutDispatch counts the organization's queued Runs that have no
// dispatch (no hand-off to the runtime).
const runsWithoutDispatch = `SELECT count(*) FROM agent.runs r
WHERE r.organization_id = $1 AND r.status = 'queued'
	AND NOT EXISTS (SELECT 1 FROM agent.run_dispatches d WHERE d.organization_id = r.organization_id AND d.run_id = r.id)`

// dispatchBackfill is docs/deploy.md's statement, after upgrading from
// 0.7.0: a dispatch for every queued Run without one (00016's backfill,
// idempotent).
const dispatchBackfill = `INSERT INTO agent.run_dispatches (run_id, organization_id, next_attempt_at, created_at)
SELECT r.id, r.organization_id, now(), r.created_at
FROM agent.runs r
WHERE r.status = 'queued'
	AND NOT EXISTS (SELECT 1 FROM agent.run_dispatches d WHERE d.organization_id = r.organization_id AND d.run_id = r.id)`

// readyz returns the status of the replica's /readyz ("200", "503"), or
// the error.
func readyz(r *replica) string {
	res, err := http.Get(r.URL() + "/readyz")
	if err != nil {
		return err.Error()
	}
	res.Body.Close()
	return strconv.Itoa(res.StatusCode)
}

// terminate stops the replica as an orchestrator does (SIGTERM: it drains
// its requests and exits) and waits for it, at most 30 seconds.
func (r *replica) terminate() error {
	r.mu.Lock()
	p := r.proc
	r.proc = nil
	r.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Stop(syscall.SIGTERM, 30*time.Second)
}

// replayAll starts every key of s once more, a few at a time, with
// clients balanced over targets, and returns how many it replayed.
func (s *scenarioRun) replayAll(ctx context.Context, targets []*replica) int {
	s.mu.Lock()
	keys := make([]string, 0, len(s.keys))
	for k := range s.keys {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	slices.Sort(keys)
	const workers = 8
	var wg sync.WaitGroup
	for w := range workers {
		who := fmt.Sprintf("replay.%d", w)
		c, err := newClient(who, s.token, targets, w, loadPolicy, s.rec)
		if err != nil {
			s.t.Fatal(err)
		}
		wg.Go(func() {
			for i := w; i < len(keys); i += workers {
				s.start(ctx, c, who, keys[i], s.register(keys[i], 0), false)
			}
		})
	}
	wg.Wait()
	return len(keys)
}
