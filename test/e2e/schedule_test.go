//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/client"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/schedule"
)

// Advisory lock keys of the schedule probes: a drain's record of the kill
// probe's outcome, and the freeze (its Run insert) of the stop probe's
// start, wait on them while the harness holds them.
const (
	lockScheduleRecord = 7341
	lockScheduleFreeze = 7342
)

// TestScheduleDrain is the fault suite of the drain of scheduled starts:
// the three replicas of the harness drain one organization's schedules
// (a tick every 200 ms, two occurrences a tick, so the work spreads over
// them) while one replica is killed (kill -9) after its start admitted an
// occurrence's Run and before it recorded the outcome, and another is
// stopped (SIGSTOP) inside an occurrence's start, past its lease, and
// continued after the others took the occurrence over. Afterwards every
// occurrence due by the cutoff has exactly one outcome, started, and at
// most one Run (its own key's), with one snapshot the scheduler froze; the
// stopped replica's late record was refused by the fence; no claim is
// left processing.
func TestScheduleDrain(t *testing.T) {
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	h := setup(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	scheduleLease := 2 * cfg.lease
	for _, r := range h.replicas {
		r.Kill()
		r.env = append(r.env, "SEARCHD_SCHEDULE_TICK=200ms", "SEARCHD_SCHEDULE_BATCH=2",
			"SEARCHD_SCHEDULE_LEASE="+scheduleLease.String(), "SEARCHD_SCHEDULE_RETRY=2s")
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.db.Exec(ctx, holdScheduleSQL); err != nil {
		t.Fatalf("installing the schedule probes: %v", err)
	}

	org := uuid.New()
	token, err := auth.SignToken([]byte(jwtSecret), org, "e2e-schedules", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(h.replicas[0].URL(), client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	newSearch := func(name string) string {
		ss, err := c.CreateSavedSearch(ctx, client.CreateSavedSearchParams{Name: name, Brief: client.Brief{Query: name}})
		if err != nil {
			t.Fatal(err)
		}
		return ss.ID
	}
	killProbe, stopProbe := newSearch("probe-kill"), newSearch("probe-stop")
	// The triggers name the probes' saved searches.
	if _, err := h.db.Exec(ctx, fmt.Sprintf(`
		CREATE TRIGGER e2e_hold_schedule_record BEFORE UPDATE ON agent.schedule_occurrences
			FOR EACH ROW WHEN (NEW.status = 'started' AND OLD.status <> 'started' AND NEW.saved_search_id = '%s')
			EXECUTE FUNCTION public.e2e_hold_schedule(%d);
		CREATE TRIGGER e2e_hold_schedule_freeze AFTER INSERT ON agent.runs
			FOR EACH ROW WHEN (NEW.saved_search_id = '%s')
			EXECUTE FUNCTION public.e2e_hold_schedule(%d);`, killProbe, lockScheduleRecord, stopProbe, lockScheduleFreeze)); err != nil {
		t.Fatal(err)
	}
	wedge, err := pgx.Connect(ctx, h.pg.URL(dbName)+"&application_name=e2e-wedge")
	if err != nil {
		t.Fatal(err)
	}
	defer wedge.Close(context.Background())
	for _, k := range []int{lockScheduleRecord, lockScheduleFreeze} {
		if _, err := wedge.Exec(ctx, "SELECT pg_advisory_lock($1)", k); err != nil {
			t.Fatal(err)
		}
	}

	// The load: 40 saved searches whose schedules come due once each,
	// spread over ten seconds, and the two probes, due first.
	var ids []string
	for i := range 40 {
		ids = append(ids, newSearch(fmt.Sprintf("scheduled-%02d", i)))
	}
	t0 := time.Now().Add(4 * time.Second).Truncate(time.Second)
	every := int64(3600)
	set := func(id string, at time.Time) {
		sc, err := c.SetSchedule(ctx, id, client.SetScheduleParams{IntervalSeconds: &every, StartAt: &at})
		if err != nil {
			t.Fatal(err)
		}
		if sc.NextDueAt == nil || !sc.NextDueAt.Equal(at) {
			t.Fatalf("the schedule of %s comes due at %v, want %s: setting the schedules took too long", id, sc.NextDueAt, at)
		}
	}
	set(killProbe, t0)
	set(stopProbe, t0)
	for i, id := range ids {
		set(id, t0.Add(time.Duration(i)*250*time.Millisecond).Truncate(time.Second))
	}

	// The kill: the replica recording the kill probe's outcome, after its
	// start admitted the Run, is killed, and its waiting session ended, so
	// the record never lands.
	// A replica that took both probes in one tick reaches the second only
	// after its lease passes: every wait allows for one.
	killed := waitForHold(ctx, t, h, lockScheduleRecord, scheduleLease+30*time.Second)
	killedAt := time.Now()
	killed.Kill()
	if _, err := h.db.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`,
		killed.name); err != nil {
		t.Fatal(err)
	}
	if _, err := wedge.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockScheduleRecord); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s between the kill probe's start and its record", killed.name)

	// The stop: the replica inside the stop probe's freeze is stopped,
	// then the freeze let go (its batch, sent whole, commits without it).
	stopped := waitForHold(ctx, t, h, lockScheduleFreeze, scheduleLease+30*time.Second)
	if stopped == killed {
		t.Fatalf("the stop probe's start is held by %s, which was killed", stopped.name)
	}
	if err := stopped.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if _, err := wedge.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockScheduleFreeze); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped %s inside the stop probe's start", stopped.name)
	stopProbeDue := t0
	// Past its lease, another replica takes the occurrence over and
	// records it, while the stopped one still holds its old lease token.
	var takenOver bool
	for deadline := time.Now().Add(scheduleLease + 20*time.Second); time.Now().Before(deadline) && !takenOver; time.Sleep(200 * time.Millisecond) {
		var status string
		var attempts int
		err := h.db.QueryRow(ctx, `SELECT status, attempts FROM agent.schedule_occurrences
			WHERE organization_id = $1 AND saved_search_id = $2 AND due_at = $3`, org, stopProbe, stopProbeDue).Scan(&status, &attempts)
		takenOver = err == nil && status == schedule.StatusStarted && attempts >= 2
	}
	if !takenOver {
		t.Errorf("no replica took the stopped replica's occurrence over past its %s lease", scheduleLease)
	}
	if err := stopped.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := killed.Start(ctx); err != nil {
		t.Fatal(err)
	}

	// Every occurrence due by the cutoff gets its outcome.
	cutoff := t0.Add(11 * time.Second)
	for deadline := time.Now().Add(scheduleLease + 90*time.Second); ; time.Sleep(250 * time.Millisecond) {
		var open, due int
		if err := h.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE closed_at IS NULL), count(*) FROM agent.schedule_occurrences
			WHERE organization_id = $1 AND due_at <= $2`, org, cutoff).Scan(&open, &due); err != nil {
			t.Fatal(err)
		}
		if open == 0 && due == len(ids)+2 && time.Now().After(cutoff) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d occurrences due by the cutoff still open %s after the faults", open, due, scheduleLease+90*time.Second)
		}
	}

	checkSchedules(ctx, t, h, org, append(ids, killProbe, stopProbe), cutoff)
	// The kill probe's Run was admitted before the kill, and its outcome
	// recorded by another replica's replay.
	var runAt time.Time
	var attempts int
	if err := h.db.QueryRow(ctx, `SELECT r.created_at, o.attempts FROM agent.schedule_occurrences o
		JOIN agent.runs r ON r.id = o.run_id AND r.organization_id = o.organization_id
		WHERE o.organization_id = $1 AND o.saved_search_id = $2`, org, killProbe).Scan(&runAt, &attempts); err != nil {
		t.Fatal(err)
	}
	if !runAt.Before(killedAt) || attempts < 2 {
		t.Errorf("the kill probe's Run was admitted at %s (the kill at %s), %d attempts: want the Run before the kill, recorded by a second attempt",
			runAt, killedAt, attempts)
	}
	// The stopped replica's late record met the fence.
	fenced := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !fenced; time.Sleep(250 * time.Millisecond) {
		b, _ := os.ReadFile(stopped.logPath)
		fenced = strings.Contains(string(b), "another drain took the occurrence over")
	}
	if !fenced {
		t.Errorf("%s never reported its late record refused by the fence:\n%s", stopped.name, tail(stopped.logPath))
	}
	for _, r := range h.replicas {
		if bad, _ := r.logProblems(); len(bad) > 0 {
			t.Errorf("%s logged %q", r.name, bad)
		}
	}
}

// holdScheduleSQL installs the function of the schedule probes: the
// statement waits for the advisory lock its trigger names.
const holdScheduleSQL = `
CREATE FUNCTION public.e2e_hold_schedule() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_advisory_xact_lock_shared(TG_ARGV[0]::bigint);
	IF TG_OP = 'UPDATE' THEN
		RETURN NEW;
	END IF;
	RETURN NULL;
END;
$$;`

// waitForHold waits until a replica's session waits for the advisory
// lock key, which the wedge holds, and returns that replica.
func waitForHold(ctx context.Context, t *testing.T, h *harness, key int, timeout time.Duration) *replica {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var name string
		err := h.db.QueryRow(ctx, `SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND NOT l.granted AND l.classid = 0 AND l.objid::bigint = $1
				AND a.application_name LIKE 'searchd-r%' LIMIT 1`, key).Scan(&name)
		if err != nil {
			continue
		}
		for _, r := range h.replicas {
			if r.name == name {
				return r
			}
		}
	}
	t.Fatalf("no replica reached the schedule probe held by lock %d within %s", key, timeout)
	return nil
}

// checkSchedules checks the outcome of every occurrence of org due by
// cutoff: one per schedule (the natural key), started, with one Run under
// its own key and one snapshot the scheduler froze; no Run or snapshot of
// the organization is anyone else's; no start claim is left processing.
func checkSchedules(ctx context.Context, t *testing.T, h *harness, org uuid.UUID, ids []string, cutoff time.Time) {
	t.Helper()
	rows, err := h.db.Query(ctx, `SELECT o.saved_search_id::text, o.due_at, o.status, r.start_key
		FROM agent.schedule_occurrences o
		LEFT JOIN agent.runs r ON r.id = o.run_id AND r.organization_id = o.organization_id
		WHERE o.organization_id = $1 AND o.due_at <= $2`, org, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for rows.Next() {
		var id, status string
		var due time.Time
		var key *string
		if err := rows.Scan(&id, &due, &status, &key); err != nil {
			t.Fatal(err)
		}
		seen[id]++
		want := runs.SavedSearchStartKey(schedule.IdempotencyKey(uuid.MustParse(id), due))
		if status != schedule.StatusStarted || key == nil || *key != want {
			got := "no Run"
			if key != nil {
				got = "Run key " + *key
			}
			t.Errorf("occurrence of %s due %s: %s with %s, want started with %q", id, due, status, got, want)
		}
	}
	rows.Close()
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("saved search %s has %d occurrences due by the cutoff, want 1", id, seen[id])
		}
	}
	var runsN, snaps, started, processing int
	if err := h.db.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM agent.runs WHERE organization_id = $1),
			(SELECT count(*) FROM agent.saved_search_snapshots WHERE organization_id = $1 AND origin = 'schedule'),
			(SELECT count(*) FROM agent.schedule_occurrences WHERE organization_id = $1 AND status = 'started'),
			(SELECT count(*) FROM agent.idempotency_keys WHERE organization_id = $1 AND status = 'processing')`,
		org).Scan(&runsN, &snaps, &started, &processing); err != nil {
		t.Fatal(err)
	}
	if runsN != started || snaps != started || processing != 0 {
		t.Errorf("%d Runs and %d scheduled snapshots for %d started occurrences, %d claims processing; want one each, none",
			runsN, snaps, started, processing)
	}
	t.Logf("schedules: %d occurrences due by the cutoff, each started once; %d Runs, %d snapshots", len(ids), runsN, snaps)
}
