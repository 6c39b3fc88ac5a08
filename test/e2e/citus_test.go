//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/client"
	"github.com/searchd/searchd/internal/pgcluster"
)

// The fault suite on Citus (issue 25.5; make e2e-citus): a coordinator and
// two workers, two `searchd serve` replicas on the coordinator, and the
// failover suite's load for an organization on each worker: starts of
// saved searches with keys clients share, provider callbacks, and tool
// calls through the journal. One worker's PostgreSQL is killed (kill -9)
// mid-burst, at the moment a transaction that spans the nodes (a provider
// job's registration: the job on the other worker, its directory entry on
// every node, a two-phase commit) has been prepared on it and the
// coordinator has committed; it stays down a while, then restarts. The
// checks:
//   - the organization on the other worker never sees anything but 2xx:
//     its requests keep succeeding through the outage;
//   - the organization on the killed worker sees only 503 unavailable
//     while it is down (and a margin after), never another 5xx;
//   - afterwards every acknowledged start has exactly one Run and one
//     snapshot, every acknowledged delivery is applied exactly once, every
//     acknowledged tool call replays without reaching the vendor, and no
//     claim is stuck;
//   - the prepared transaction left on the killed worker is committed by
//     the coordinator's recovery once the worker is back (none is left
//     prepared), and the registration it belonged to is whole: its job,
//     and its directory entry on every node.

// citusCluster is a coordinator and two workers of the suite's own, on
// loopback. The coordinator reaches the second worker through a proxy, so
// the harness can hold what it sends there.
type citusCluster struct {
	coordinator *postgres
	workers     []*postgres
	proxy       *faultProxy // the coordinator's way to workers[1]
}

// citusRecoverInterval is the coordinator's citus.recover_2pc_interval: how
// soon it commits (or rolls back) a transaction a failure left prepared on
// a worker. Citus's default is a minute.
const citusRecoverInterval = time.Second

// startCitus starts the three nodes under parent, creates the suite's
// database on each and makes it one cluster.
func startCitus(ctx context.Context, parent string) (_ *citusCluster, err error) {
	bins, err := pgcluster.FindBinaries(os.Getenv(pgcluster.EnvPGBin))
	if err != nil {
		return nil, err
	}
	if err := pgcluster.CitusInstalled(bins); err != nil {
		return nil, err
	}
	cl := &citusCluster{}
	defer func() {
		if err != nil {
			cl.Stop()
		}
	}()
	for i, name := range []string{"coordinator", "worker-1", "worker-2"} {
		pg, err := newNode(bins, parent, name)
		if err != nil {
			return nil, err
		}
		pg.settings = append(pgcluster.CitusSettings(300), "log_min_messages=warning")
		if i == 0 {
			pg.settings = append(pg.settings, "citus.shard_count=8",
				fmt.Sprintf("citus.recover_2pc_interval=%dms", citusRecoverInterval.Milliseconds()))
			cl.coordinator = pg
		} else {
			cl.workers = append(cl.workers, pg)
		}
		if err := pg.boot(ctx); err != nil {
			return nil, err
		}
	}
	if cl.proxy, err = newFaultProxy(cl.workers[1].TCPAddr()); err != nil {
		return nil, err
	}
	_, proxyPort, _ := strings.Cut(cl.proxy.Addr(), ":")
	var port int
	fmt.Sscan(proxyPort, &port)
	err = pgcluster.JoinCitus(ctx, cl.coordinator.URL(dbName), pgcluster.CitusNode{Host: "127.0.0.1", Port: cl.coordinator.port},
		[]string{cl.workers[0].URL(dbName), cl.workers[1].URL(dbName)},
		[]pgcluster.CitusNode{{Host: "127.0.0.1", Port: cl.workers[0].port}, {Host: "127.0.0.1", Port: port}})
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// Stop stops every node and the proxy.
func (cl *citusCluster) Stop() {
	if cl.proxy != nil {
		cl.proxy.Close()
	}
	for _, pg := range append([]*postgres{cl.coordinator}, cl.workers...) {
		if pg != nil {
			pg.Stop()
		}
	}
}

// nodePort is the port the coordinator's metadata names for worker i.
func (cl *citusCluster) nodePort(i int) int {
	if i == 0 {
		return cl.workers[0].port
	}
	var port int
	_, p, _ := strings.Cut(cl.proxy.Addr(), ":")
	fmt.Sscan(p, &port)
	return port
}

// orgOn returns a new organization whose shards are on the worker the
// coordinator reaches at port.
func orgOn(ctx context.Context, db *pgxpool.Pool, port int) (uuid.UUID, error) {
	for range 1000 {
		org := uuid.New()
		var p int
		if err := db.QueryRow(ctx, `SELECT nodeport FROM citus_shards
			WHERE shardid = get_shard_id_for_distribution_column('agent.idempotency_keys', $1::uuid)`, org).Scan(&p); err != nil {
			return uuid.Nil, err
		}
		if p == port {
			return org, nil
		}
	}
	return uuid.Nil, fmt.Errorf("no organization found on the worker at port %d", port)
}

// citusSide is the load of one organization, all of whose rows are on one
// worker.
type citusSide struct {
	worker int
	s      *scenarioRun
	cb     *callbackLoad
	tl     *toolLoad
}

func TestCitusFaults(t *testing.T) {
	if os.Getenv("SEARCHD_E2E_CITUS") != "1" {
		t.Skip("the fault suite on Citus runs with SEARCHD_E2E_CITUS=1: make e2e-citus")
	}
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	// A call of the killed worker's organization retries through the
	// whole outage, which lasts as long as the worker takes to die and
	// restart: seconds, many more on a busy machine.
	cfg.callSlack = 90 * time.Second
	ctx := t.Context()
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	dir := workDir(t, "searchd-e2e-citus-")
	start := time.Now()
	bin, err := buildSearchd(sctx, dir, cfg.race)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := startCitus(sctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{cfg: cfg, dir: dir, pg: cl.coordinator}
	h.teardown(t, cl.Stop)
	if err := migrate(sctx, bin, cl.coordinator.URL(dbName)); err != nil {
		t.Fatal(err)
	}
	if h.db, err = pgxpool.New(sctx, cl.coordinator.URL(dbName)+"&pool_max_conns=4&application_name=e2e-harness"); err != nil {
		t.Fatal(err)
	}
	coordinatorURL := func(params string) string {
		u := fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", cl.coordinator.TCPAddr(), dbName)
		if params != "" {
			u += "&" + params
		}
		return u
	}
	for i := range 2 {
		name := fmt.Sprintf("searchd-c%d", i+1)
		r, err := newReplica(name, bin, cl.coordinator.TCPAddr(), dir, cfg.lease)
		if err != nil {
			t.Fatal(err)
		}
		r.env = []string{"SEARCHD_PROVIDER_SECRETS=" + e2eProvider + "=" + failoverSecret,
			"SEARCHD_ORG_MAX_IN_FLIGHT=10000", "SEARCHD_MAX_IN_FLIGHT=100000"}
		h.replicas = append(h.replicas, r)
		if err := r.Start(sctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("Citus: coordinator %s, workers %s and %s (the second behind the proxy %s), replicas %s %s, in %s",
		cl.coordinator.TCPAddr(), cl.workers[0].TCPAddr(), cl.workers[1].TCPAddr(), cl.proxy.Addr(),
		h.replicas[0].addr, h.replicas[1].addr, time.Since(start).Round(time.Millisecond))

	// An organization (and one for its callbacks) on each worker.
	var sides []*citusSide
	for w := range 2 {
		org, err := orgOn(ctx, h.db, cl.nodePort(w))
		if err != nil {
			t.Fatal(err)
		}
		cbOrg, err := orgOn(ctx, h.db, cl.nodePort(w))
		if err != nil {
			t.Fatal(err)
		}
		side := &citusSide{worker: w}
		if side.s, err = newScenarioRunFor(ctx, t, h, fmt.Sprintf("CitusW%d", w+1), org); err != nil {
			t.Fatal(err)
		}
		if side.cb, err = newCallbackLoad(ctx, side.s, cbOrg); err != nil {
			t.Fatal(err)
		}
		if side.tl, err = newToolLoad(ctx, side.s, coordinatorURL); err != nil {
			t.Fatal(err)
		}
		defer side.tl.close()
		sides = append(sides, side)
	}

	// Before the load, with nothing else on the second worker: starts
	// whose commit to it is cut.
	cutViolations := checkCommitCuts(ctx, t, cl.proxy, sides[1])
	cutReg, found := cutRegistration(ctx, t, cl.proxy, sides[0])
	cutViolations = append(cutViolations, found...)

	var stop atomic.Bool
	var load sync.WaitGroup
	for _, side := range sides {
		groups := max(1, cfg.clients/cfg.perKey/2)
		for g := range groups {
			lg := &loadGroup{id: g}
			for m := range cfg.perKey {
				who := fmt.Sprintf("w%d.g%02d.%d", side.worker+1, g, m)
				c, err := newClient(who, side.s.token, h.replicas, g+m, loadPolicy, side.s.rec)
				if err != nil {
					t.Fatal(err)
				}
				lg.clients = append(lg.clients, c)
				lg.names = append(lg.names, who)
			}
			load.Go(func() { lg.drive(ctx, side.s, &stop) })
		}
		for _, j := range side.cb.jobs {
			load.Go(func() { side.cb.send(ctx, j, &stop) })
		}
		for _, w := range side.tl.workers {
			load.Go(func() { side.tl.run(ctx, w, &stop) })
		}
	}
	loadStart := time.Now()
	time.Sleep(2 * time.Second)

	// Mid-burst: a registration for the first worker's organization, a
	// transaction on every node (its directory entry is a reference
	// table's row), is held at its commit on the second worker: prepared
	// there, committed on the coordinator. Then the second worker dies.
	caught := make(chan struct{})
	var once sync.Once
	cl.proxy.HoldWhen(func(chunk []byte) bool {
		if !bytes.Contains(chunk, []byte("COMMIT PREPARED")) {
			return false
		}
		once.Do(func() { close(caught) })
		return true
	})
	probe := registerProbe(ctx, t, sides[0])
	select {
	case <-caught:
	case <-time.After(30 * time.Second):
		t.Fatal("no COMMIT PREPARED reached the second worker within 30 s: the registration did not span the nodes")
	}
	killed := time.Now()
	t.Logf("a COMMIT PREPARED held %v after the load began; killing the second worker", killed.Sub(loadStart).Round(time.Millisecond))
	if err := cl.workers[1].KillHost(); err != nil {
		t.Fatal(err)
	}
	cl.proxy.HoldWhen(nil)
	cl.proxy.Cut()
	t.Logf("the second worker died in %v", time.Since(killed).Round(time.Millisecond))
	var prepared int
	// The registration is answered: the coordinator committed; the second
	// worker holds its part prepared, on disk.
	reg := <-probe
	t.Logf("the registration held at its commit was answered %v after the kill (%v)", time.Since(killed).Round(time.Millisecond), reg.err)

	time.Sleep(max(3*time.Second, cfg.duration/3))
	restarting := time.Now()
	if err := cl.workers[1].Start(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	t.Logf("the second worker restarted in %v", restarted.Sub(restarting).Round(time.Millisecond))
	sides[1].s.down(killed, restarted.Add(downMargin))
	w2, err := pgxpool.New(ctx, cl.workers[1].URL(dbName)+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if err := w2.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()`).Scan(&prepared); err != nil {
		t.Fatal(err)
	}
	t.Logf("the second worker restarted after %s down with %d prepared transactions", restarted.Sub(killed).Round(time.Millisecond), prepared)
	recovered := time.Now()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err := w2.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()`).Scan(&prepared); err != nil {
			t.Fatal(err)
		}
		if prepared == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions still prepared on the second worker 60 s after its restart: the coordinator did not recover them", prepared)
		}
	}
	t.Logf("the coordinator's recovery finished the prepared transactions %s after the restart", time.Since(recovered).Round(time.Millisecond))

	time.Sleep(3 * time.Second) // load on the whole cluster again
	stop.Store(true)
	drainTimeout := cfg.callTimeout() + 10*time.Second
	for _, side := range sides {
		drainTimeout = max(drainTimeout, side.tl.callTimeout()+10*time.Second)
	}
	if !waitFor(&load, drainTimeout) {
		t.Errorf("the load did not stop within %s of its end", drainTimeout)
	}

	violations := cutViolations
	violations = append(violations, checkRegistration(ctx, h, reg)...)
	violations = append(violations, checkRegistration(ctx, h, cutReg)...)
	for _, side := range sides {
		if !waitFor(&side.s.bg, drainTimeout) {
			violations = append(violations, fmt.Sprintf("%s: background work did not stop", side.s.name))
		}
		var rep failoverReport
		finish := side.s.finish(ctx)
		v := side.s.verify(ctx)
		found := append(finish, v.violations...)
		found = append(found, side.cb.verify(ctx, side.s, &rep)...)
		found = append(found, side.tl.verify(ctx, side.s, &rep)...)
		for _, f := range found {
			violations = append(violations, side.s.name+": "+f)
		}
		t.Logf("%s (worker %d%s): %d requests, %d keys, %d answered 503; %d deliveries, %d tool calls acknowledged",
			side.s.name, side.worker+1, map[bool]string{true: ", killed", false: ", healthy"}[side.worker == 1],
			v.requests, v.keys, v.unavailable, rep.deliveries, rep.toolCalls)
		if side.worker == 0 && v.unavailable > 0 {
			violations = append(violations, fmt.Sprintf("%s: %d answers 503 for an organization whose worker stayed up", side.s.name, v.unavailable))
		}
	}
	for _, r := range h.replicas {
		if r.Exited() {
			violations = append(violations, fmt.Sprintf("%s exited on its own:\n%s", r.name, tail(r.logPath)))
		}
		bad, _ := r.logProblems()
		for _, line := range bad {
			violations = append(violations, fmt.Sprintf("%s logged: %s", r.name, line))
		}
	}
	failWith(t, violations, 40)
	h.logTails(t, [2]string{"coordinator", cl.coordinator.logPath}, [2]string{"second worker", cl.workers[1].logPath})
}

// registration is the probe's registration as the harness saw it.
type registration struct {
	providerJobID string
	jobID         string
	status        string // the answer: created, or the error
	err           error
}

// callbackClient is a client of side's callback organization, named who,
// sending to targets with policy.
func (side *citusSide) callbackClient(t *testing.T, who string, targets []*replica, policy client.RetryPolicy) *client.Client {
	t.Helper()
	token, err := auth.SignToken([]byte(jwtSecret), side.cb.org, "e2e-"+who, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newClient(who, token, targets, 0, policy, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// registerProbe registers, in the background, a provider job for a new Run
// of side's callback organization through the first replica, and sends
// what it saw on the channel.
func registerProbe(ctx context.Context, t *testing.T, side *citusSide) <-chan registration {
	out := make(chan registration, 1)
	c := side.callbackClient(t, "probe", side.s.h.replicas[:1], client.RetryPolicy{MaxAttempts: 1})
	go func() {
		reg := registration{providerJobID: "citus-2pc-probe-" + uuid.NewString()[:8]}
		defer func() { out <- reg }()
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		run, err := c.StartRun(cctx, client.DirectStart{Kind: client.KindCapability, Name: "2pc probe"},
			client.WithIdempotencyKey("citus-2pc-probe-run"))
		if err != nil {
			reg.err = fmt.Errorf("starting its Run: %w", err)
			return
		}
		res, err := c.RegisterProviderJob(cctx, client.RegisterProviderJobParams{RunID: run.Run.ID, Provider: e2eProvider,
			ProviderJobID: reg.providerJobID})
		if err != nil {
			reg.err = err
			return
		}
		reg.jobID, reg.status = res.Job.ID, "created"
	}()
	return out
}

// checkRegistration wants the probe's registration whole once the prepared
// transactions are recovered: when it was answered, its job exists and
// every node's copy of the directory names it; when it failed, none does.
// Either way the pair is in no half state.
func checkRegistration(ctx context.Context, h *harness, reg registration) []string {
	var jobs int
	if err := h.db.QueryRow(ctx, `SELECT count(*) FROM agent.provider_jobs WHERE provider = $1 AND provider_job_id = $2`,
		e2eProvider, reg.providerJobID).Scan(&jobs); err != nil {
		return []string{fmt.Sprintf("reading the probe's job: %v", err)}
	}
	rows, err := h.db.Query(ctx, `SELECT nodeport, success, result FROM run_command_on_placements('agent.provider_job_directory',
		format('SELECT count(*) FROM %%s WHERE provider = %L AND provider_job_id = %L', $1::text, $2::text))`,
		e2eProvider, reg.providerJobID)
	if err != nil {
		return []string{fmt.Sprintf("reading the directory's copies: %v", err)}
	}
	defer rows.Close()
	var out []string
	copies := 0
	for rows.Next() {
		var port int
		var ok bool
		var result string
		if err := rows.Scan(&port, &ok, &result); err != nil {
			return append(out, err.Error())
		}
		copies++
		want := "0"
		if jobs == 1 {
			want = "1"
		}
		if !ok || result != want {
			out = append(out, fmt.Sprintf("the directory's copy on port %d holds %q entries of the probe (ok %v), want %s: the registration is half applied",
				port, result, ok, want))
		}
	}
	if copies != 3 {
		out = append(out, fmt.Sprintf("the directory has %d copies, want 3 (the coordinator and both workers)", copies))
	}
	if reg.err == nil && jobs != 1 {
		out = append(out, fmt.Sprintf("the registration was answered %s, but %d jobs hold its pair", reg.status, jobs))
	}
	return out
}

// commitCut is one way a start's write on the second worker is cut. The
// claim is one statement the worker commits on its own; the freeze is a
// transaction whose COMMIT the coordinator sends the worker after
// committing its own part. The first chunk the coordinator sends the
// worker that holds match is held before it reaches the worker, which then
// never commits, or passed on with every answer of the worker swallowed,
// so the worker commits unseen; either way the proxy then resets the
// connections, and the coordinator cannot know which it was.
type commitCut struct {
	name    string
	match   string
	reaches bool   // the chunk reaches the worker
	logged  string // in the replica's log line of the answer: the cut hit the start
}

// cutTries bounds the tries of one commitCut: a try misses only when a
// background loop's write came first, which two tries in a row have seen.
const cutTries = 10

var commitCuts = []commitCut{
	{"the freeze's COMMIT lost before the worker", "Q\x00\x00\x00\vCOMMIT\x00", false, "could not commit transaction"},
	{"the freeze committed on the worker, its answer lost", "Q\x00\x00\x00\vCOMMIT\x00", true, "could not commit transaction"},
	{"the claim written on the worker, its answer lost", "INSERT INTO agent.idempotency_keys_", true, "idempotency"},
}

// checkCommitCuts starts, for each commitCut, a saved search of side's
// organization (on the second worker, behind proxy) whose write is cut,
// and wants the start answered 503 unavailable, never 500: its outcome is
// unknown, so the client must send it again, and no claim of its key may
// be left processing (the start released whatever it may have written),
// so that the retry need not wait out a lease. The key is then sent again
// until it is answered; the scenario's verify wants one Run for it and no
// orphan snapshot. It returns what went wrong.
func checkCommitCuts(ctx context.Context, t *testing.T, proxy *faultProxy, side *citusSide) []string {
	var out []string
	retrying, err := newClient("commit-cut-retry", side.s.token, side.s.h.replicas, 0, loadPolicy, &recorder{})
	if err != nil {
		return []string{err.Error()}
	}
cuts:
	for i, cut := range commitCuts {
		// A background loop of searchd (the dispatch of the Run just
		// admitted, a drain's tick) may send the worker a matching chunk
		// first; the cut then misses the start: try again.
		var answer error
		var key string
		var spec keySpec
		for try := 1; ; try++ {
			key = fmt.Sprintf("%s-cut%d-%d", side.s.name, i, try)
			if spec, answer, err = cutOneWrite(ctx, proxy, side.s, key, cut); err != nil {
				return append(out, fmt.Sprintf("%s: %v", cut.name, err))
			}
			if hit(side.s.h.replicas[0].logPath, answer, cut.logged) {
				break
			}
			if try == cutTries {
				out = append(out, fmt.Sprintf("%s: none of %d cuts hit the start (the last answered %v)", cut.name, cutTries, answer))
				continue cuts
			}
			t.Logf("commit cut, %s: the chunk cut was not the start's (answered %v); again", cut.name, answer)
		}
		var apiErr *client.APIError
		if !errors.As(answer, &apiErr) || apiErr.Status != http.StatusServiceUnavailable || apiErr.Code != "unavailable" {
			out = append(out, fmt.Sprintf("%s: the start was answered %v, want 503 unavailable (the outcome is unknown; the client sends it again)", cut.name, answer))
		}
		var processing int
		if err := side.s.h.db.QueryRow(ctx, `SELECT count(*) FROM agent.idempotency_keys
			WHERE organization_id = $1 AND scope = 'surface.saved_search.start' AND key = $2 AND status = 'processing'`,
			side.s.org, key).Scan(&processing); err != nil {
			return append(out, fmt.Sprintf("%s: reading the claim: %v", cut.name, err))
		}
		if processing != 0 {
			out = append(out, fmt.Sprintf("%s: the claim of key %s is left processing after the answer: its retry waits out the lease", cut.name, key))
		}
		rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		res, err := retrying.StartSavedSearch(rctx, spec.savedSearch, spec.opts, client.WithIdempotencyKey(key))
		cancel()
		if err != nil {
			out = append(out, fmt.Sprintf("%s: sending the start again failed: %v", cut.name, err))
			continue
		}
		t.Logf("commit cut, %s: answered %v; sent again: Run %s (replayed %v) in %d attempts", cut.name, answer, res.Run.ID, res.Replayed, res.Attempts)
	}
	return out
}

// hit reports whether answer is an error whose request the replica logged
// (in the log at path) with an error that holds want.
func hit(path string, answer error, want string) bool {
	var apiErr *client.APIError
	if !errors.As(answer, &apiErr) || apiErr.RequestID == "" {
		return false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, "request_id="+apiErr.RequestID) && strings.Contains(line, want) {
			return true
		}
	}
	return false
}

// catchFirst makes the proxy catch the first chunk a client sends that
// holds match, and returns a channel closed when it has: the chunk is
// held, or, when pass, passed on with every answer of the server swallowed
// from then on (see Swallow). The caller ends it with HoldWhen(nil).
func (p *faultProxy) catchFirst(match string, pass bool) <-chan struct{} {
	caught := make(chan struct{})
	var seen atomic.Bool
	p.HoldWhen(func(chunk []byte) bool {
		if !bytes.Contains(chunk, []byte(match)) || seen.Swap(true) {
			return false
		}
		if pass {
			p.Swallow()
		}
		close(caught)
		return !pass
	})
	return caught
}

// cutOneWrite registers key with s for a new saved search, starts it once,
// cuts the first chunk the coordinator sends the second worker meanwhile
// that holds cut.match, and returns the request and the start's answer.
func cutOneWrite(ctx context.Context, proxy *faultProxy, s *scenarioRun, key string, cut commitCut) (spec keySpec, answer, err error) {
	ss, err := s.createSearch(ctx, "commit cut "+key)
	if err != nil {
		return keySpec{}, nil, fmt.Errorf("creating the saved search: %w", err)
	}
	spec = keySpec{savedSearch: ss, opts: client.StartOptions{MaxResults: 3, Note: "commit cut " + key}}
	s.mu.Lock()
	s.keys[key] = spec
	s.mu.Unlock()
	once, err := newClient("commit-cut", s.token, s.h.replicas[:1], 0, client.RetryPolicy{MaxAttempts: 1}, &recorder{})
	if err != nil {
		return spec, nil, err
	}
	caught := proxy.catchFirst(cut.match, cut.reaches)
	defer proxy.HoldWhen(nil)
	answered := make(chan error, 1)
	go func() {
		_, err := once.StartSavedSearch(ctx, spec.savedSearch, spec.opts, client.WithIdempotencyKey(key))
		answered <- err
	}()
	select {
	case <-caught:
	case err := <-answered:
		return spec, nil, fmt.Errorf("the start was answered (%v) before the proxy saw %q", err, cut.match)
	case <-time.After(30 * time.Second):
		return spec, nil, fmt.Errorf("the proxy saw no %q within 30 s", cut.match)
	}
	time.Sleep(200 * time.Millisecond) // a chunk passed on is applied
	proxy.HoldWhen(nil)
	proxy.Cut()
	return spec, <-answered, nil
}

// cutRegistration registers a provider job for a new Run of side's callback
// organization (on the first worker) and cuts its two-phase commit at the
// PREPARE TRANSACTION the coordinator sends the second worker (for the
// directory's copy there): the proxy holds it, then resets the
// connections. The coordinator aborts the whole transaction, so the answer
// must be 503 unavailable, never 500. The registration is then sent again
// until it is answered; it returns that registration, which the caller
// checks whole once the prepared transactions are recovered, and what went
// wrong.
func cutRegistration(ctx context.Context, t *testing.T, proxy *faultProxy, side *citusSide) (registration, []string) {
	reg := registration{providerJobID: "citus-prepare-cut-" + uuid.NewString()[:8]}
	once := side.callbackClient(t, "prepare-cut", side.s.h.replicas[:1], client.RetryPolicy{MaxAttempts: 1})
	retrying := side.callbackClient(t, "prepare-cut-retry", side.s.h.replicas, loadPolicy)
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	run, err := retrying.StartRun(cctx, client.DirectStart{Kind: client.KindCapability, Name: "prepare cut"},
		client.WithIdempotencyKey("citus-prepare-cut-run"))
	if err != nil {
		return reg, []string{fmt.Sprintf("prepare cut: starting its Run: %v", err)}
	}
	params := client.RegisterProviderJobParams{RunID: run.Run.ID, Provider: e2eProvider, ProviderJobID: reg.providerJobID}
	caught := proxy.catchFirst("PREPARE TRANSACTION", false)
	defer proxy.HoldWhen(nil)
	answered := make(chan error, 1)
	go func() {
		_, err := once.RegisterProviderJob(cctx, params)
		answered <- err
	}()
	var out []string
	select {
	case <-caught:
		proxy.HoldWhen(nil)
		proxy.Cut()
		answer := <-answered
		var apiErr *client.APIError
		if !errors.As(answer, &apiErr) || apiErr.Status != http.StatusServiceUnavailable || apiErr.Code != "unavailable" {
			out = append(out, fmt.Sprintf("prepare cut: the registration was answered %v, want 503 unavailable", answer))
		}
		t.Logf("prepare cut: the registration cut at its PREPARE TRANSACTION on the second worker was answered %v", answer)
	case err := <-answered:
		out = append(out, fmt.Sprintf("prepare cut: the registration was answered (%v) before a PREPARE TRANSACTION reached the second worker", err))
	case <-time.After(30 * time.Second):
		out = append(out, "prepare cut: no PREPARE TRANSACTION reached the second worker within 30 s")
	}
	res, err := retrying.RegisterProviderJob(cctx, params)
	if err != nil {
		reg.err = err
		return reg, append(out, fmt.Sprintf("prepare cut: sending the registration again failed: %v", err))
	}
	reg.jobID, reg.status = res.Job.ID, "created"
	return reg, out
}
