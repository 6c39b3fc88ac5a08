//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/client"
)

// Timings of the scenarios. Every wait of the suite is bounded by one of
// these.
// Those derived from the lease are methods of config: callTimeout, soakGap
// and slowCall.
const (
	// stuckMargin is how long past its lease a claim may stay processing.
	stuckMargin = 5 * time.Second
	// downMargin is how long after the database is back a 503 is still
	// excused: pools notice dead connections as they use them.
	downMargin = 10 * time.Second
	// restartAfter is how long a killed replica stays down.
	restartAfter = 3 * time.Second
	// pgDownFor is how long the database stays down after its crash.
	pgDownFor = time.Second
	// wedgeTimeout bounds waiting for a replica to reach the freeze.
	wedgeTimeout = 15 * time.Second
	// searchPool is how many saved searches a scenario's keys spread over.
	searchPool = 16
	// maxCycles bounds the fault cycles of one scenario.
	maxCycles = 1000
)

// scenario is one kind of fault, repeated while the load lasts.
type scenario struct {
	name string
	// fault breaks one thing and mends it; it returns once the system is
	// whole again (work it started, such as clients chasing a probe key,
	// may still run: it registers with s.bg). cycle counts from 0.
	fault func(ctx context.Context, s *scenarioRun, cycle int) error
}

func scenarios() []scenario {
	return []scenario{
		{name: "KillReplica", fault: killReplica},
		{name: "StopReplicaPastLease", fault: stopReplicaPastLease},
		{name: "StopReplicaInsideCommit", fault: stopReplicaInsideCommit},
		{name: "RestartPostgresImmediate", fault: restartPostgres},
		{name: "CutAndSlowDatabaseNetwork", fault: cutAndSlowNetwork},
		{name: "BlackholeDatabase", fault: blackholeDatabase},
	}
}

// window is a span of time in which the database was unreachable.
type window struct{ from, to time.Time }

// scenarioRun is one scenario in progress: its organization, its keys and
// everything its clients saw.
type scenarioRun struct {
	t        *testing.T
	h        *harness
	name     string
	org      uuid.UUID
	token    string
	searches []string
	rec      *recorder
	bg       sync.WaitGroup // work a fault left running
	probes   atomic.Int64

	mu    sync.Mutex
	keys  map[string]keySpec
	calls []call
	downs []window
	notes []string
	// wedged maps each probe key to the lease token of the replica the
	// harness broke while it held the claim: another must have taken it.
	wedged map[string]string
	// ended holds, per replica, the windows in which PostgreSQL had ended
	// its sessions (idle in a transaction while it was stopped): its 503s
	// then are the answer of a replica whose transaction the server ended.
	ended map[string][]window
}

// sessionEnded reports whether replica's sessions had been ended by the
// server at at.
func (s *scenarioRun) sessionEnded(replica string, at time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.ended[replica] {
		if !at.Before(w.from) && !at.After(w.to) {
			return true
		}
	}
	return false
}

// newScenarioRun makes the scenario's organization and its saved searches.
func newScenarioRun(ctx context.Context, t *testing.T, h *harness, name string) (*scenarioRun, error) {
	return newScenarioRunFor(ctx, t, h, name, uuid.New())
}

// newScenarioRunFor is newScenarioRun for the organization org.
func newScenarioRunFor(ctx context.Context, t *testing.T, h *harness, name string, org uuid.UUID) (*scenarioRun, error) {
	s := &scenarioRun{t: t, h: h, name: name, org: org, rec: &recorder{}, keys: map[string]keySpec{},
		wedged: map[string]string{}, ended: map[string][]window{}}
	var err error
	if s.token, err = auth.SignToken([]byte(jwtSecret), s.org, "e2e-"+name, time.Now(), 24*time.Hour); err != nil {
		return nil, err
	}
	for i := range searchPool {
		id, err := s.createSearch(ctx, fmt.Sprintf("%s search %d", name, i))
		if err != nil {
			return nil, err
		}
		s.searches = append(s.searches, id)
	}
	return s, nil
}

// createSearch creates a saved search through the API.
func (s *scenarioRun) createSearch(ctx context.Context, name string) (string, error) {
	c, err := newClient("setup", s.token, s.h.replicas, rand.N(len(s.h.replicas)), client.RetryPolicy{}, &recorder{})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ss, err := c.CreateSavedSearch(ctx, client.CreateSavedSearchParams{
		Name:     name,
		Brief:    client.Brief{Query: "laptops under 1000", Filters: map[string]any{"scenario": s.name}},
		Baseline: &client.BaselineInput{Items: []string{"seen-1", "seen-2"}},
	})
	if err != nil {
		return "", fmt.Errorf("creating saved search %q: %w", name, err)
	}
	return ss.ID, nil
}

// register records key with the request every client sends for it, which
// seed picks, and returns that request.
func (s *scenarioRun) register(key string, seed int) keySpec {
	spec := keySpec{
		savedSearch: s.searches[seed%len(s.searches)],
		opts:        client.StartOptions{MaxResults: 1 + seed%200, Note: "e2e " + key},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.keys[key]; ok {
		return old
	}
	s.keys[key] = spec
	return spec
}

// start makes one logical start of key with c and records what it saw.
func (s *scenarioRun) start(ctx context.Context, c *client.Client, who, key string, spec keySpec, pinned bool) call {
	ctx, cancel := context.WithTimeout(ctx, s.h.cfg.callTimeout())
	defer cancel()
	deadline, _ := ctx.Deadline()
	cl := call{key: key, client: who, start: time.Now(), deadline: deadline, pinned: pinned}
	res, err := c.StartSavedSearch(ctx, spec.savedSearch, spec.opts, client.WithIdempotencyKey(key))
	cl.end = time.Now()
	if err != nil {
		cl.err = err
	} else {
		cl.runID, cl.created = res.Run.ID, res.Created
		if res.Snapshot != nil {
			cl.snapshotID = res.Snapshot.ID
		}
		if res.Run.SnapshotID != nil {
			cl.runSnap = *res.Run.SnapshotID
		}
	}
	s.mu.Lock()
	s.calls = append(s.calls, cl)
	s.mu.Unlock()
	return cl
}

// chase starts key with as many clients as share a key, balanced over
// every replica, in the background.
func (s *scenarioRun) chase(ctx context.Context, key string) error {
	spec := s.register(key, 0)
	for m := range s.h.cfg.perKey {
		who := fmt.Sprintf("chase.%s.%d", key, m)
		c, err := newClient(who, s.token, s.h.replicas, m, loadPolicy, s.rec)
		if err != nil {
			return err
		}
		s.bg.Go(func() { s.start(ctx, c, who, key, spec, false) })
	}
	return nil
}

func (s *scenarioRun) note(format string, args ...any) {
	s.mu.Lock()
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *scenarioRun) down(from, to time.Time) {
	s.mu.Lock()
	s.downs = append(s.downs, window{from, to})
	s.mu.Unlock()
}

// wedgePoint is where a probe holds a replica's start.
type wedgePoint int

const (
	// inFreeze holds the start at its freeze read: the claim is taken, its
	// lease runs, and nothing of the preparation is written. The read
	// travels with BEGIN in the transaction's first round trip; the writes,
	// the fenced completion and COMMIT follow in the second only once the
	// read has answered, so a replica broken here never sent them. (Held
	// at the snapshot insert instead, the replica would already have sent
	// its COMMIT, and its session could commit the whole preparation after
	// a kill -9.) A plain read waits only for a table lock: the harness
	// takes ACCESS EXCLUSIVE on the baselines, which holds every start's
	// freeze for the moment the probe is wedged.
	inFreeze wedgePoint = iota
	// inCommit holds the start after the UPDATE that completes the claim
	// and before its commit: the replica's transaction holds the claim's
	// row lock. The harness's trigger on the plane's table (installed by
	// setup, firing for commit-probe keys alone) waits for an advisory lock
	// the harness holds.
	inCommit
)

// holdLockKey is the advisory lock the inCommit trigger waits for.
const holdLockKey = 7331

// holdCompletionSQL installs the inCommit trigger.
const holdCompletionSQL = `
CREATE FUNCTION public.e2e_hold_completion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_xact_lock_shared(7331);
	RETURN NULL;
END;
$$;
CREATE TRIGGER e2e_hold_completion AFTER UPDATE OF status ON agent.idempotency_keys
	FOR EACH ROW WHEN (NEW.status = 'completed' AND NEW.key LIKE '%-commitprobe-%')
	EXECUTE FUNCTION public.e2e_hold_completion();`

// wedge is a probe: a start sent to one replica and held at a point of its
// work, so the replica owns the probe key's claim at a moment the harness
// chooses. The harness then breaks the replica and releases the hold.
type wedge struct {
	key        string
	who        string // the pinned client's name
	victim     *replica
	conn       *pgx.Conn // holds the lock; closing it releases the hold
	leaseToken string    // the lease token the victim holds
	pinned     chan call
	timeout    time.Duration // bounds waiting for the pinned start
}

// wedgeOn sends a probe start to victim and returns once victim's session
// waits at point. policy is the pinned client's.
func (s *scenarioRun) wedgeOn(ctx context.Context, victim *replica, point wedgePoint, policy client.RetryPolicy) (*wedge, error) {
	n := s.probes.Add(1)
	key := fmt.Sprintf("%s-probe-%03d", s.name, n)
	if point == inCommit {
		key = fmt.Sprintf("%s-commitprobe-%03d", s.name, n)
	}
	ss, err := s.createSearch(ctx, fmt.Sprintf("%s probe %d", s.name, n))
	if err != nil {
		return nil, err
	}
	spec := keySpec{savedSearch: ss, opts: client.StartOptions{MaxResults: 7, Note: "probe " + key}}
	s.mu.Lock()
	s.keys[key] = spec
	s.mu.Unlock()

	conn, err := pgx.Connect(ctx, s.h.pg.URL(dbName)+"&application_name=e2e-wedge")
	if err != nil {
		return nil, err
	}
	w := &wedge{key: key, victim: victim, conn: conn, pinned: make(chan call, 1), timeout: s.h.cfg.callTimeout()}
	if point == inFreeze {
		if _, err = conn.Exec(ctx, "BEGIN"); err == nil {
			_, err = conn.Exec(ctx, "LOCK TABLE agent.saved_search_baselines IN ACCESS EXCLUSIVE MODE")
		}
	} else {
		_, err = conn.Exec(ctx, "SELECT pg_advisory_lock($1)", holdLockKey)
	}
	if err != nil {
		w.release(ctx)
		return nil, err
	}
	w.who = "pinned." + key
	c, err := newClient(w.who, s.token, []*replica{victim}, 0, policy, s.rec)
	if err != nil {
		w.release(ctx)
		return nil, err
	}
	go func() { w.pinned <- s.start(context.WithoutCancel(ctx), c, w.who, key, spec, true) }()

	deadline := time.Now().Add(wedgeTimeout)
	for {
		var waiting int
		// Blocked by the harness's own session, and by nothing else: a
		// wait on another lock (a relation extension, say) is not the
		// probe.
		err := s.h.db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND pg_blocking_pids(pid) = ARRAY[$2::int]`,
			victim.name, int(conn.PgConn().PID())).Scan(&waiting)
		if err != nil {
			w.release(ctx)
			return nil, err
		}
		if waiting > 0 {
			// The session held may be a load start of the victim's (the
			// baselines lock holds every start's freeze) that got there
			// before the probe: the probe is wedged once its claim exists
			// too, since its freeze cannot pass the lock either.
			tok, _, err := s.claimState(ctx, key)
			if err == nil {
				w.leaseToken = tok
				break
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				w.release(ctx)
				return nil, fmt.Errorf("probe %s: reading its claim: %w", key, err)
			}
		}
		if time.Now().After(deadline) {
			w.release(ctx)
			return nil, fmt.Errorf("probe %s: %s did not reach the wedge within %s", key, victim.name, wedgeTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	tok := w.leaseToken
	if point == inFreeze {
		s.mu.Lock()
		s.wedged[key] = tok
		s.mu.Unlock()
	}
	return w, nil
}

// wait returns the pinned start's call once it has ended.
func (w *wedge) wait() (call, error) {
	select {
	case c := <-w.pinned:
		return c, nil
	case <-time.After(w.timeout):
		return call{}, fmt.Errorf("probe %s: the pinned start on %s did not end within %s", w.key, w.victim.name, w.timeout)
	}
}

// release lets the wedged start go on: closing the connection ends the
// harness's transaction or session and its lock.
func (w *wedge) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = w.conn.Close(ctx)
}

// claimState returns the lease token and status of key's claim.
func (s *scenarioRun) claimState(ctx context.Context, key string) (token, status string, err error) {
	err = s.h.db.QueryRow(ctx, `SELECT lease_token::text, status FROM agent.idempotency_keys
		WHERE organization_id = $1 AND scope = 'surface.saved_search.start' AND key = $2`,
		s.org, key).Scan(&token, &status)
	return token, status, err
}

// killReplica is kill -9 of a replica while it holds a claim (a probe
// wedged in its freeze, and whatever the load had in flight), restarted a
// few seconds later. The other replicas must reclaim the dead replica's
// claims once their leases pass.
func killReplica(ctx context.Context, s *scenarioRun, cycle int) error {
	victim := s.h.replicas[cycle%len(s.h.replicas)]
	w, err := s.wedgeOn(ctx, victim, inFreeze, client.RetryPolicy{MaxAttempts: 1, AttemptTimeout: time.Minute})
	if err != nil {
		return err
	}
	victim.Kill()
	w.release(ctx)
	if err := s.chase(ctx, w.key); err != nil {
		return err
	}
	time.Sleep(restartAfter)
	if err := victim.Start(ctx); err != nil {
		return err
	}
	if _, err := w.wait(); err != nil { // the kill ended it already
		return err
	}
	s.note("kill -9 %s holding probe %s (its start answered %s), restarted after %s",
		victim.name, w.key, s.answersOf(w.who), restartAfter)
	return nil
}

// stopWedged holds a start on victim at point, stops victim (SIGSTOP)
// while it holds the claim, releases the hold and has the other replicas
// chase the key. The pinned client waits out the stop on its first
// attempt, then retries on the same replica. It returns the wedge, when
// the victim stopped and its process state then.
func (s *scenarioRun) stopWedged(ctx context.Context, victim *replica, point wedgePoint) (*wedge, time.Time, string, error) {
	w, err := s.wedgeOn(ctx, victim, point, client.RetryPolicy{
		MaxAttempts: 5, AttemptTimeout: 2*s.h.cfg.lease + time.Minute, MaxRetryAfter: 500 * time.Millisecond})
	if err != nil {
		return nil, time.Time{}, "", err
	}
	if err := victim.Stop(); err != nil {
		w.release(ctx)
		return nil, time.Time{}, "", err
	}
	stopped, state := time.Now(), victim.State()
	w.release(ctx)
	return w, stopped, state, s.chase(ctx, w.key)
}

// cont excuses the 503s of victim's ended session from stopped on (see
// stopReplicaPastLease), continues it (SIGCONT) and waits for the pinned
// start of w.
func (s *scenarioRun) cont(victim *replica, w *wedge, stopped time.Time) (call, error) {
	s.mu.Lock()
	s.ended[victim.name] = append(s.ended[victim.name], window{stopped, time.Now().Add(downMargin)})
	s.mu.Unlock()
	if err := victim.Signal(syscall.SIGCONT); err != nil {
		return call{}, err
	}
	return w.wait()
}

// stopReplicaPastLease stops a replica (SIGSTOP) while it holds a claim
// and is inside its freeze, keeps it stopped until another replica has
// reclaimed the claim after its lease and completed it, then continues it
// (SIGCONT). The stalled replica's late completion must be fenced off: its
// snapshot rolled back, no second Run, its answer in progress or the
// replay of the other replica's Run.
func stopReplicaPastLease(ctx context.Context, s *scenarioRun, cycle int) error {
	victim := s.h.replicas[cycle%len(s.h.replicas)]
	// Unblocked, the victim's backend answers the freeze read and leaves
	// the transaction open, waiting for the stopped replica's writes: the
	// writes the fence must keep from committing.
	w, stopped, stateAtStop, err := s.stopWedged(ctx, victim, inFreeze)
	if err != nil {
		return err
	}
	// The victim stays stopped until another replica has reclaimed and
	// completed the claim: a lease, then a chaser's retry, reclaim,
	// freeze and admit, which a busy machine makes slow. The wait is
	// bounded by half a call's deadline, so that the pinned start,
	// which began before the stop, has the other half after SIGCONT.
	reclaimed := false
	for deadline := stopped.Add(s.h.cfg.callTimeout() / 2); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		tok, status, err := s.claimState(ctx, w.key)
		if err == nil && tok != w.leaseToken && status == "completed" {
			reclaimed = true
			break
		}
	}
	if rest := s.h.cfg.lease + 2*time.Second - time.Since(stopped); rest > 0 {
		time.Sleep(rest)
	}
	stoppedFor := time.Since(stopped)
	stateAtCont := victim.State()
	// Stopped inside its freeze, the victim's session sat idle in its
	// transaction, and PostgreSQL ended it after the idle bound: its next
	// statement fails, and its 503 is excused for it alone.
	pinned, err := s.cont(victim, w, stopped)
	if err != nil {
		return err
	}
	if !reclaimed {
		s.t.Errorf("probe %s: no other replica reclaimed and completed the claim while %s was stopped for %s "+
			"(process state %q after SIGSTOP, %q before SIGCONT); the probe's attempts:\n%s",
			w.key, victim.name, stoppedFor.Round(time.Millisecond), stateAtStop, stateAtCont, s.timeline(w.key, stopped))
	}
	answers := s.answersOf(w.who)
	s.note("SIGSTOP %s for %s holding probe %s (reclaimed by another replica: %v); its late start answered %s",
		victim.name, stoppedFor.Round(100*time.Millisecond), w.key, reclaimed, answers)
	switch {
	case pinned.err != nil:
		s.t.Errorf("probe %s: the pinned start on %s failed after SIGCONT: %v", w.key, victim.name, pinned.err)
	case reclaimed && pinned.created:
		s.t.Errorf("probe %s: %s admitted the Run (201) after another replica had reclaimed its claim", w.key, victim.name)
	case reclaimed && !strings.HasPrefix(answers, "409 in_progress") && !strings.HasPrefix(answers, "503 unavailable"):
		// The fenced completion rolls back and answers in progress, or,
		// when the server ended the stalled session (idle in its
		// transaction past the bound), the completion fails and answers
		// 503; either way the retry replays the other replica's Run.
		s.t.Errorf("probe %s: the stalled %s first answered %s, want 409 in_progress (its completion fenced off) "+
			"or 503 unavailable (its session ended by the idle bound)", w.key, victim.name, answers)
	}
	return nil
}

// stopReplicaInsideCommit stops a replica (SIGSTOP) between the UPDATE that
// completes its claim and the commit, for longer than the lease, then
// continues it. Its transaction holds the claim's row lock, but only until
// PostgreSQL ends its session, idle in that transaction, after the
// replicas' idle_in_transaction_session_timeout (idleBound): a stalled
// replica cannot block the others (issue 11.7). The sessions of the other
// replicas that waited for the lock go on then, the claim falls to the
// lease rules and another replica reclaims it after the lease; the
// stopped replica's commit fails when it continues, and every start
// answers the one Run admitted. The note counts the sessions that waited
// on locks meanwhile: abandoned attempts must not pile up in PostgreSQL.
func stopReplicaInsideCommit(ctx context.Context, s *scenarioRun, cycle int) error {
	victim := s.h.replicas[cycle%len(s.h.replicas)]
	w, stopped, _, err := s.stopWedged(ctx, victim, inCommit)
	if err != nil {
		return err
	}
	maxWaiting, maxSessions := 0, 0
	var lastWaiting time.Time
	for time.Since(stopped) < s.h.cfg.lease+2*time.Second {
		var waiting, sessions int
		err := s.h.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'), count(*)
			FROM pg_stat_activity WHERE application_name LIKE 'searchd-%'`).Scan(&waiting, &sessions)
		if err == nil {
			maxWaiting, maxSessions = max(maxWaiting, waiting), max(maxSessions, sessions)
			if waiting > 0 {
				lastWaiting = time.Now()
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	stoppedFor := time.Since(stopped)
	tokBefore, statusBefore, _ := s.claimState(ctx, w.key)
	pinned, err := s.cont(victim, w, stopped)
	if err != nil {
		return err
	}
	var sessionsAfter int
	_ = s.h.db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'searchd-%'`).Scan(&sessionsAfter)
	waitedFor := time.Duration(0)
	if !lastWaiting.IsZero() {
		waitedFor = lastWaiting.Sub(stopped)
	}
	s.note("SIGSTOP %s inside the commit of probe %s for %s: up to %d replica sessions waited on locks, the last %s after the stop "+
		"(%d sessions in all; %d just after SIGCONT); its late start answered %s",
		victim.name, w.key, stoppedFor.Round(100*time.Millisecond), maxWaiting, waitedFor.Round(100*time.Millisecond),
		maxSessions, sessionsAfter, s.answersOf(w.who))
	switch {
	case pinned.err != nil:
		s.t.Errorf("probe %s: the pinned start on %s failed after SIGCONT: %v", w.key, victim.name, pinned.err)
	case tokBefore == w.leaseToken && statusBefore != "completed":
		// A start sends its completion and COMMIT in one batch, so once
		// the hold is released its session may commit at once: the claim
		// then completed under the stopped replica's token, which blocks
		// nobody. Still processing under that token, it blocked the others.
		s.t.Errorf("probe %s: the claim stayed unfinished with the stopped %s for %s: its session was not ended (idle bound %s), so it blocked the others",
			w.key, victim.name, stoppedFor.Round(100*time.Millisecond), idleBound)
	}
	if waitedFor > idleBound+time.Second {
		s.t.Errorf("probe %s: replica sessions still waited on locks %s after %s was stopped, past the %s idle bound",
			w.key, waitedFor.Round(100*time.Millisecond), victim.name, idleBound)
	}
	// Either the stopped replica's transaction committed as soon as the
	// hold was released (its COMMIT travelled with the completion), or the
	// server ended it and its retry replays the Run another replica
	// admitted. verify checks that every answer names that one Run.
	return nil
}

// restartPostgres is `pg_ctl restart -m immediate` in the middle of load,
// while a replica holds a claim inside its freeze (a probe, and whatever
// the load had in flight): the crash aborts the freeze and the database is
// down for the release, so the claim survives the restart processing, and
// another replica must reclaim it after its lease.
func restartPostgres(ctx context.Context, s *scenarioRun, cycle int) error {
	victim := s.h.replicas[cycle%len(s.h.replicas)]
	w, err := s.wedgeOn(ctx, victim, inFreeze, client.RetryPolicy{MaxAttempts: 1, AttemptTimeout: time.Minute})
	if err != nil {
		return err
	}
	from := time.Now()
	crashErr := s.h.pg.Crash()
	w.release(ctx) // its session died with the server
	if crashErr != nil {
		return crashErr
	}
	time.Sleep(pgDownFor)
	if err := s.h.pg.Start(ctx); err != nil {
		return err
	}
	s.down(from, time.Now().Add(downMargin))
	if err := s.chase(ctx, w.key); err != nil {
		return err
	}
	if _, err := w.wait(); err != nil { // the crash ended it
		return err
	}
	s.note("PostgreSQL immediate restart: down for %s, while %s held probe %s (its start answered %s)",
		time.Since(from).Round(time.Millisecond), victim.name, w.key, s.answersOf(w.who))
	return nil
}

// cutAndSlowNetwork adds latency to every chunk between the replicas and
// PostgreSQL and resets every live connection a few times a second.
func cutAndSlowNetwork(ctx context.Context, s *scenarioRun, _ int) error {
	from := time.Now()
	faultFor := min(max(s.h.cfg.duration/2, 3*time.Second), 30*time.Second)
	latency := time.Duration(1+rand.N(4)) * time.Millisecond
	s.h.proxy.SetLatency(latency)
	rounds, cut := 0, 0
	for time.Since(from) < faultFor && ctx.Err() == nil {
		time.Sleep(200*time.Millisecond + rand.N(600*time.Millisecond))
		cut += s.h.proxy.Cut()
		rounds++
	}
	s.h.proxy.SetLatency(0)
	s.down(from, time.Now().Add(downMargin))
	s.note("network to PostgreSQL: %s latency per chunk, %d connections reset in %d cuts over %s",
		latency, cut, rounds, time.Since(from).Round(time.Millisecond))
	return nil
}

// timeline lists the attempts for key, with their times relative to t0.
func (s *scenarioRun) timeline(key string, t0 time.Time) string {
	var b strings.Builder
	for _, a := range s.rec.all() {
		if a.key == key {
			fmt.Fprintf(&b, "  %+8.3fs %s -> %s: %d %s %s\n", a.at.Sub(t0).Seconds(), a.client, a.replica, a.status, a.code, a.failure)
		}
	}
	return b.String()
}

// answersOf describes the answers the client named who got, in order.
func (s *scenarioRun) answersOf(who string) string {
	var parts []string
	for _, a := range s.rec.all() {
		if a.client != who {
			continue
		}
		switch {
		case a.status == 0:
			parts = append(parts, "no answer")
		case a.code != "":
			parts = append(parts, fmt.Sprintf("%d %s", a.status, a.code))
		default:
			parts = append(parts, fmt.Sprint(a.status))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", then ")
}

// runScenario drives the load, injects sc's fault while it lasts, finishes
// every key, checks the invariants and returns the one-line summary.
func runScenario(t *testing.T, h *harness, sc scenario) string {
	ctx := t.Context()
	began := time.Now()
	badBefore, otherBefore := make([]int, len(h.replicas)), make([]int, len(h.replicas))
	for i, r := range h.replicas {
		bad, other := r.logProblems()
		badBefore[i], otherBefore[i] = len(bad), len(other)
	}
	s, err := newScenarioRun(ctx, t, h, sc.name)
	if err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var load sync.WaitGroup
	s.driveGroups(ctx, &load, &stop)

	time.Sleep(min(h.cfg.duration/3, 2*time.Second))
	faults := 0
	for cycle := range maxCycles {
		if err := sc.fault(ctx, s, cycle); err != nil {
			t.Errorf("fault %d: %v", cycle, err)
			break
		}
		faults++
		if time.Since(began)+h.cfg.soakGap() >= h.cfg.duration {
			break
		}
		time.Sleep(h.cfg.soakGap())
	}
	if rest := h.cfg.duration - time.Since(began); rest > 0 {
		time.Sleep(rest)
	}
	stop.Store(true)
	faultEnd := time.Now()
	drainTimeout := h.cfg.callTimeout() + 10*time.Second
	if !waitFor(&load, drainTimeout) || !waitFor(&s.bg, drainTimeout) {
		t.Errorf("the clients did not stop within %s of the end of the load", drainTimeout)
	}
	loadEnd := time.Now()

	finishViolations := s.finish(ctx)
	v := s.verify(ctx)
	v.violations = append(finishViolations, v.violations...)
	for i, r := range h.replicas {
		if r.Exited() {
			v.violations = append(v.violations, fmt.Sprintf("%s exited on its own:\n%s", r.name, tail(r.logPath)))
		}
		bad, other := r.logProblems()
		for _, line := range bad[min(badBefore[i], len(bad)):] {
			v.violations = append(v.violations, fmt.Sprintf("%s logged: %s", r.name, line))
		}
		if other = other[min(otherBefore[i], len(other)):]; len(other) > 0 {
			s.note("%s logged %d other lines at level ERROR, the first: %s", r.name, len(other), other[0])
		}
	}

	summary := fmt.Sprintf("%s: %d requests, %d keys, %d retries, %d 409s, %d 503s, %d other 5xx, %d transport errors, "+
		"%d duplicates, %d claims stuck, %d failed calls, %d keys waited out a lease, slowest call %s, %d faults, load %s, drain %s, total %s",
		sc.name, v.requests, v.keys, v.retries, v.conflicts, v.unavailable, v.other5xx, v.transport,
		v.duplicates, v.stuck, v.failed, v.slowKeys, v.slowest.Round(time.Millisecond), faults,
		faultEnd.Sub(began).Round(100*time.Millisecond), loadEnd.Sub(faultEnd).Round(100*time.Millisecond),
		time.Since(began).Round(100*time.Millisecond))
	t.Log(summary)
	for _, n := range s.notes {
		t.Log("  " + n)
	}
	failWith(t, v.violations, 30)
	h.logTails(t, [2]string{"postgres", h.pg.logPath})
	return summary
}

// finish starts every key of the scenario once more, until it succeeds:
// after it, no key is left between a completed claim and its Run. It
// returns a violation for each key that would not finish.
func (s *scenarioRun) finish(ctx context.Context) []string {
	s.mu.Lock()
	keys := make([]string, 0, len(s.keys))
	for k := range s.keys {
		keys = append(keys, k)
	}
	specs := s.keys
	s.mu.Unlock()
	slices.Sort(keys)

	work := make(chan string)
	var mu sync.Mutex
	var violations []string
	var wg sync.WaitGroup
	for w := range 8 {
		c, err := newClient(fmt.Sprintf("finish.%d", w), s.token, s.h.replicas, w, loadPolicy, s.rec)
		if err != nil {
			return []string{err.Error()}
		}
		wg.Go(func() {
			for key := range work {
				s.mu.Lock()
				spec := specs[key]
				s.mu.Unlock()
				if cl := s.start(ctx, c, fmt.Sprintf("finish.%d", w), key, spec, false); cl.err != nil {
					mu.Lock()
					violations = append(violations, fmt.Sprintf("key %s did not finish after the scenario: %v", key, cl.err))
					mu.Unlock()
				}
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	return violations
}

// waitFor waits for wg at most d and reports whether it finished.
func waitFor(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
