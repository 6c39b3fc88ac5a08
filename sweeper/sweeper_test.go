package sweeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

const day = 24 * time.Hour

func TestSweepDeletesExpiredClaimsAndKeepsLiveOnes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const lease = time.Minute

	// Claims made 31 days before the sweep.
	b.claimDone(t, "tool.email.send", "tool-31-days", lease)
	b.claim(t, b.plane, "tool.crm.update", "tool-31-days-processing", lease)
	b.clock.Advance(2 * day)
	// Claims made 29 days before the sweep.
	b.claimDone(t, "tool.email.send", "tool-29-days", lease)
	b.claimDone(t, "webhook.nylas", "webhook-29-days", idempotency.WebhookLease)
	b.claimDone(t, idempotency.ScopeSavedSearchStart, "start-29-days", idempotency.SavedSearchStartLease)
	b.clock.Advance(29*day - time.Hour)
	// A processing claim an hour old: its lease passed long ago, its
	// retention holds, so it is the journal of a worker that died, still
	// to be reclaimed, and must stay.
	b.claim(t, b.plane, "tool.email.send", "tool-lease-passed", lease)
	// A claim whose retention passes exactly at the sweep: gone.
	b.clock.Advance(time.Hour - idempotency.WebhookRetention)
	b.claimDone(t, "webhook.nylas", "webhook-24-hours", idempotency.WebhookLease)
	b.clock.Advance(idempotency.WebhookRetention)

	var observed struct {
		sync.Mutex
		read, deleted map[string]int
	}
	observed.read, observed.deleted = map[string]int{}, map[string]int{}
	s := b.sweeper(t, Config{Observer: ObserverFunc(func(table string, read, deleted int, _ time.Duration) {
		observed.Lock()
		defer observed.Unlock()
		observed.read[table] += read
		observed.deleted[table] += deleted
	})})
	rep := b.runOnce(t, s)

	want := map[string]bool{"tool-29-days": true, "tool-lease-passed": true}
	if got := b.keys(t); !maps.Equal(got, want) {
		t.Errorf("claims after the sweep = %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	if c := rep.Claims; c.Read != 5 || c.Deleted != 5 || c.Passes != 1 || c.Backlog {
		t.Errorf("claims report = %+v, want 5 read, 5 deleted, 1 pass, no backlog", c)
	}
	if observed.read[TableClaims] != 5 || observed.deleted[TableClaims] != 5 {
		t.Errorf("observer saw %d read, %d deleted on %s, want 5 and 5",
			observed.read[TableClaims], observed.deleted[TableClaims], TableClaims)
	}
	if rep.Runs.Passes != 1 || rep.Snapshots.Passes != 1 || rep.Drops.Passes != 1 {
		t.Errorf("report = %+v, want one pass on each table", rep)
	}
	// The 29-day tool claim still replays.
	out, err := b.plane.Read(b.ctx, b.org, "tool.email.send", "tool-29-days", "hash")
	if err != nil || out.Kind != idempotency.KindCompleted || out.ResourceID != "tool-29-days" {
		t.Errorf("Read(tool-29-days) after the sweep = %+v, %v; want its stored answer", out, err)
	}
	// A second run finds nothing.
	if rep := b.runOnce(t, s); rep.Claims.Read != 0 || rep.Claims.Deleted != 0 {
		t.Errorf("second run = %+v, want nothing read", rep.Claims)
	}
}

func TestARunOutOfBudgetLeavesABacklogAndWarns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seedExpired(t, "old", 12)

	// A budget spent by the first round: one pass on each table.
	s := b.sweeper(t, Config{Bound: 5, Budget: time.Nanosecond})
	rep := b.runOnce(t, s)
	if c := rep.Claims; c.Read != 5 || c.Deleted != 5 || c.Passes != 1 || !c.Backlog || !rep.Backlog() {
		t.Errorf("claims report = %+v, want 5 read, 5 deleted, 1 pass, a backlog", c)
	}
	if n := b.count(t, TableClaims); n != 7 {
		t.Errorf("%d claims left, want 7", n)
	}
	// The oldest went first.
	for i := range 12 {
		key := fmt.Sprintf("old-%d", i)
		// seedExpired makes old-11 the oldest.
		if gone := !b.keys(t)[key]; gone != (i >= 7) {
			t.Errorf("claim %s gone = %v, want %v", key, gone, i >= 7)
		}
	}
	logs := b.logs.String()
	if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "backlog remains") ||
		!strings.Contains(logs, "table="+TableClaims) || !strings.Contains(logs, "read=5") || !strings.Contains(logs, "budget=1ns") {
		t.Errorf("log = %q, want a warning that a backlog remains on %s when the budget ran out", logs, TableClaims)
	}

	// A run within its budget drains the rest, and warns of nothing: its
	// full pass is counted, and the summary says so.
	b.logs = &pgtest.SyncBuffer{}
	s = b.sweeper(t, Config{Bound: 5})
	rep = b.runOnce(t, s)
	if c := rep.Claims; c.Read != 7 || c.Deleted != 7 || c.Passes != 2 || c.Backlog || c.FullPasses != 1 {
		t.Errorf("claims report = %+v, want 7 read, 7 deleted, 2 passes, 1 full, no backlog", c)
	}
	logs = b.logs.String()
	if strings.Contains(logs, "level=WARN") ||
		!strings.Contains(logs, `level=INFO msg="sweeper: swept" table=`+TableClaims+" read=7 deleted=7 passes=2 full_passes=1") {
		t.Errorf("log = %q, want no warning and an info summary of 7 read and 7 deleted in 2 passes, 1 full", logs)
	}
}

// backlogLog counts the backlog passes a BacklogObserver is told of.
type backlogLog struct {
	passLog
	full map[string]int
}

func (l *backlogLog) ObserveBacklogPass(table string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.full[table]++
}

func TestEveryFullPassIsCounted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// 12 rows, bound 5: passes read 5, 5 and 2. The run drains the table,
	// and both full passes are counted.
	b.seedExpired(t, "old", 12)
	obs := &backlogLog{full: map[string]int{}}
	rep := b.runOnce(t, b.sweeper(t, Config{Bound: 5, Duty: 1, Observer: obs}))
	if c := rep.Claims; c.Read != 12 || c.Passes != 3 || c.FullPasses != 2 || c.Backlog || rep.Backlog() {
		t.Errorf("claims report = %+v, want 12 read in 3 passes, 2 of them full, no backlog left", c)
	}
	if got := obs.full; len(got) != 1 || got[TableClaims] != 2 {
		t.Errorf("backlog passes observed = %v, want 2 on %s", got, TableClaims)
	}
	logs := b.logs.String()
	for _, want := range []string{"pass=1 read=5 deleted=5 full=true", "pass=2 read=5 deleted=5 full=true", "pass=3 read=2 deleted=2 full=false"} {
		if !strings.Contains(logs, `level=DEBUG msg="sweeper: pass" table=`+TableClaims+" "+want) {
			t.Errorf("log = %q, want the pass %q", logs, want)
		}
	}
	if strings.Contains(logs, "level=WARN") {
		t.Errorf("log = %q, want no warning: the run drained its backlog", logs)
	}
	// A quiet run counts nothing.
	obs.full = map[string]int{}
	b.seedExpired(t, "few", 3)
	rep = b.runOnce(t, b.sweeper(t, Config{Bound: 5, Observer: obs}))
	if rep.Claims.FullPasses != 0 || len(obs.full) != 0 {
		t.Errorf("a pass of 3 under a bound of 5: report %+v, observed %v; want no backlog pass", rep.Claims, obs.full)
	}
}

func TestConfigRefusesABoundAboveItsCeiling(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg  Config
		want []string // in the error; nil when valid
	}{
		{Config{}, nil},
		{Config{Bound: 1000}, nil},
		{Config{Bound: 1001}, []string{"Bound 1001", "MaxBound 1000", "refused"}},
		{Config{Bound: 5000, MaxBound: 2000}, []string{"Bound 5000", "MaxBound 2000"}},
		{Config{Bound: 2000, MaxBound: 2000}, nil},
		{Config{Bound: -1}, []string{"Config.Bound is -1"}},
		{Config{MaxBound: -5}, []string{"Config.MaxBound is -5"}},
		{Config{Budget: -time.Second}, []string{"sweeper: Config.Budget is -1s; it must be at least 0s"}},
		{Config{Budget: time.Nanosecond}, nil},
		{Config{Interval: -time.Second}, []string{"Config.Interval is -1s"}},
		{Config{Interval: time.Minute, Jitter: 2 * time.Minute}, []string{"Config.Jitter is 2m0s; it must be at most Interval, 1m0s"}},
		{Config{Jitter: -1}, nil}, // no jitter
		{Config{Duty: 1}, nil},
		{Config{Duty: 0.01}, nil},
		{Config{Duty: -0.5}, []string{"Config.Duty is -0.5; it must be above 0 and at most 1"}},
		{Config{Duty: 1.5}, []string{"Duty is 1.5"}},
		{Config{Duty: math.NaN()}, []string{"Duty is NaN"}},
		{Config{Duty: math.Inf(1)}, []string{"Duty is +Inf"}},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if tt.want == nil {
			if err != nil {
				t.Errorf("Validate(%+v) = %v, want nil", tt.cfg, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidConfig", tt.cfg, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Validate(%+v) = %q, want it to name %q", tt.cfg, err, w)
			}
		}
		if s, nerr := New(nil, tt.cfg); s != nil || !errors.Is(nerr, ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, %v; want ErrInvalidConfig", tt.cfg, s, nerr)
		}
	}

	// Defaults: a lower ceiling lowers the default bound, never the reverse.
	if c := (Config{MaxBound: 200}).WithDefaults(); c.Bound != 200 || c.MaxBound != 200 {
		t.Errorf("defaults with MaxBound 200 = Bound %d, MaxBound %d; want 200, 200", c.Bound, c.MaxBound)
	}
	c := Config{}.WithDefaults()
	if c.Bound != 1000 || c.MaxBound != 1000 || c.Budget != 15*time.Minute || c.Interval != time.Hour || c.Jitter != 6*time.Minute ||
		c.Duty != 0.25 {
		t.Errorf("defaults = %+v", c)
	}
}

// pass is what an Observer was told of one pass, and when.
type pass struct {
	read int
	d    time.Duration
	at   time.Time
}

// passLog records the passes an Observer is told of.
type passLog struct {
	mu     sync.Mutex
	passes []pass
}

func (l *passLog) ObservePass(_ string, read, _ int, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.passes = append(l.passes, pass{read: read, d: d, at: time.Now()})
}

func (l *passLog) all() []pass {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.passes)
}

func TestPassesRestInProportionToTheirDuration(t *testing.T) {
	t.Parallel()
	// The other tables (occurrences, runs, directory, snapshots, drops,
	// resolutions, inbox, sessions) have nothing to sweep: one pass each
	// in the first round, reading nothing.
	quiet := []int{0, 0, 0, 0, 0, 0, 0, 0}
	round := func(claims int) []int { return append([]int{claims}, quiet...) }
	for _, tt := range []struct {
		name   string
		duty   float64
		budget time.Duration
		seeded int
		reads  []int // per pass, bound 5, in the order made
		rests  int   // one after each full pass the run goes on from
	}{
		{"drained on the third pass", 0.25, 0, 12, append(round(5), 5, 2), 2},
		{"a budget spent by the first round leaves a backlog", 0.25, time.Nanosecond, 15, round(5), 1},
		{"a tenth", 0.1, 0, 7, append(round(5), 2), 1},
		{"back to back", 1, 0, 12, append(round(5), 5, 2), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.seedExpired(t, "old", tt.seeded)
			var (
				log   passLog
				mu    sync.Mutex
				rests []time.Duration
			)
			s := b.sweeper(t, Config{Bound: 5, Budget: tt.budget, Duty: tt.duty, Observer: &log,
				rest: func(ctx context.Context, d time.Duration) bool {
					mu.Lock()
					defer mu.Unlock()
					rests = append(rests, d)
					return true
				}})
			b.runOnce(t, s)
			passes := log.all()
			var (
				reads []int
				full  []pass
			)
			for _, p := range passes {
				reads = append(reads, p.read)
				if p.read == 5 {
					full = append(full, p)
				}
			}
			if !slices.Equal(reads, tt.reads) {
				t.Fatalf("passes read %v, want %v", reads, tt.reads)
			}
			if len(rests) != tt.rests {
				t.Fatalf("rested %d times (%v), want %d", len(rests), rests, tt.rests)
			}
			for i, r := range rests {
				// The rest after full pass i is its duration times 1/Duty−1.
				if want := time.Duration(float64(full[i].d) * (1/tt.duty - 1)); r != want || r <= 0 {
					t.Errorf("rest %d = %s after a pass of %s, want %s (duty %g)", i, r, full[i].d, want, tt.duty)
				}
			}
		})
	}
}

func TestRestWaitsAndStopsWithTheContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seedExpired(t, "old", 10)

	// Resting 9 times each pass: the second pass ends at least 9 times the
	// first pass's duration after the first, plus its own.
	var log passLog
	s := b.sweeper(t, Config{Bound: 5, Duty: 0.1, Observer: &log})
	b.runOnce(t, s)
	p := log.all()
	if len(p) < 2 || p[0].read != 5 {
		t.Fatalf("passes = %+v, want a full first pass and a second", p)
	}
	if gap, least := p[1].at.Sub(p[0].at), 9*p[0].d+p[1].d; gap < least {
		t.Errorf("the second pass ended %s after the first, want at least %s: 9×%s of rest and its own %s",
			gap, least, p[0].d, p[1].d)
	}

	// A rest of a million times a pass (over 15 minutes for any pass of a
	// millisecond or more) ends with the context.
	b.seedExpired(t, "again", 10)
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	log = passLog{}
	s = b.sweeper(t, Config{Bound: 5, Duty: 1e-6, Observer: ObserverFunc(func(table string, read, deleted int, d time.Duration) {
		log.ObservePass(table, read, deleted, d)
		cancel() // the run is resting after this pass
	})})
	done := make(chan error, 1)
	go func() {
		_, err := s.RunOnce(ctx)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("RunOnce cancelled while resting = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunOnce did not return within 30s of its context's end: the rest ignores the context")
	}
	if p := log.all(); len(p) != 1 || p[0].read != 5 {
		t.Errorf("passes = %+v, want the one full pass before the cancel", p)
	}
	if n := b.count(t, TableClaims); n != 5 {
		t.Errorf("%d claims left, want the 5 the cancelled run had not reached", n)
	}
}

func TestSweepRacingClaimersLosesNoLiveClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const (
		claimers  = 20
		expired   = 300
		freshEach = 20
		scope     = "webhook.nylas"
	)
	for i := range expired {
		b.claimDone(t, scope, fmt.Sprintf("expired-%d", i), idempotency.WebhookLease)
	}
	b.clock.Advance(idempotency.WebhookRetention + time.Minute)

	// A small bound and a pause inside each pass, between the read and the
	// delete, while the pass holds its batch: many passes, each racing the
	// claimers on the rows it holds.
	var swept atomic.Int64
	s := b.sweeper(t, Config{Bound: 7, Budget: time.Nanosecond,
		beforeDelete: func(context.Context, string, []uuid.UUID) error {
			time.Sleep(time.Millisecond)
			return nil
		}})

	type owned struct {
		claimer int
		claim   *idempotency.Claim
	}
	var (
		mu      sync.Mutex
		owners  = map[string][]owned{}
		errs    []error
		wg      sync.WaitGroup
		start   = make(chan struct{})
		claimed = make(chan struct{})
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for w := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys := make([]string, 0, expired+freshEach)
			for i := range expired {
				keys = append(keys, fmt.Sprintf("expired-%d", i))
			}
			for i := range freshEach {
				keys = append(keys, fmt.Sprintf("fresh-%d-%d", w, i))
			}
			rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			<-start
			for _, key := range keys {
				out, err := b.plane.Claim(b.ctx, b.org, scope, key, "hash", idempotency.WebhookLease)
				if err != nil {
					fail(fmt.Errorf("Claim(%q): %w", key, err))
					return
				}
				if out.Kind != idempotency.KindClaimed {
					continue
				}
				// Told it owns the key, the claimer completes it, and the
				// fence must still be its own.
				ok, err := b.plane.Complete(b.ctx, out.Claim, answer(key))
				if err != nil || !ok {
					fail(fmt.Errorf("Complete(%q) of a claim owned by claimer %d = %v, %v; want true", key, w, ok, err))
					continue
				}
				mu.Lock()
				owners[key] = append(owners[key], owned{w, out.Claim})
				mu.Unlock()
			}
		}()
	}
	sweepDone := make(chan error, 1)
	go func() {
		<-start
		for {
			select {
			case <-claimed:
				sweepDone <- nil
				return
			default:
			}
			rep, err := s.RunOnce(b.ctx)
			if err != nil {
				sweepDone <- err
				return
			}
			swept.Add(int64(rep.Claims.Deleted))
		}
	}()
	close(start)
	wg.Wait()
	close(claimed)
	if err := <-sweepDone; err != nil {
		t.Fatalf("a sweep racing the claimers failed: %v", err)
	}
	for _, err := range errs {
		t.Error(err)
	}

	// Every claim a claimer owned and completed is stored as it left it.
	for key, own := range owners {
		if len(own) != 1 {
			t.Errorf("key %s owned by %d claimers, want 1", key, len(own))
			continue
		}
		c := own[0].claim
		rec, err := b.plane.Repository().Get(b.ctx, b.org, scope, key)
		if err != nil || rec == nil {
			t.Errorf("claim %s of claimer %d: gone after the race (%v)", key, own[0].claimer, err)
			continue
		}
		if rec.ID != c.ID || rec.LeaseToken != c.LeaseToken || rec.Status != idempotency.StatusCompleted || rec.ResourceID != key {
			t.Errorf("claim %s = %+v, want the completed claim %s of claimer %d", key, rec, c.ID, own[0].claimer)
		}
	}
	if len(owners) != expired+claimers*freshEach {
		t.Errorf("%d keys owned, want %d: every key claimed once", len(owners), expired+claimers*freshEach)
	}
	// Nothing else is stored: each expired row was deleted by the sweep or
	// taken over in place by a claimer, and a final run finds nothing.
	if n := b.count(t, TableClaims); n != len(owners) {
		t.Errorf("%d claims stored, want the %d owned", n, len(owners))
	}
	if rep := b.runOnce(t, s); rep.Claims.Read != 0 {
		t.Errorf("final run read %d claims, want 0", rep.Claims.Read)
	}
	if swept.Load() == 0 {
		t.Errorf("the sweep deleted nothing during the race; the test raced nothing")
	}
	t.Logf("of %d expired claims, the sweep deleted %d and claimers took over %d in place",
		expired, swept.Load(), int64(expired)-swept.Load())
}

// noRest is a rest that returns at once, counting the rests asked for:
// the tests of a drain prove what the run does, not how long it rests
// (TestRestWaitsAndStopsWithTheContext does).
func noRest(n *atomic.Int64) func(context.Context, time.Duration) bool {
	return func(ctx context.Context, _ time.Duration) bool {
		n.Add(1)
		return ctx.Err() == nil
	}
}

// TestARunDrainsABacklogOf200000Claims: one run at the defaults (the bound
// of 1000, the duty's rests asked for, the default budget) deletes every
// one of 200,000 expired claims: the number of passes is no brake.
func TestARunDrainsABacklogOf200000Claims(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const expired = 200_000
	b.seedExpired(t, "old", expired)
	b.claimDone(t, "tool.email.send", "live", time.Minute)

	var rests atomic.Int64
	rep := b.runOnce(t, b.sweeper(t, Config{rest: noRest(&rests)}))
	c := rep.Claims
	if c.Read != expired || c.Deleted != expired || c.Backlog || rep.Backlog() {
		t.Errorf("claims report = %+v, want %d read and deleted, no backlog", c, expired)
	}
	// 200 full passes, then one that finds none left; a rest after each
	// full pass.
	if c.Passes != expired/DefaultBound+1 || c.FullPasses != expired/DefaultBound || rests.Load() != int64(c.FullPasses) {
		t.Errorf("claims report = %+v after %d rests, want %d passes, %d full, a rest after each full one",
			c, rests.Load(), expired/DefaultBound+1, expired/DefaultBound)
	}
	if got := b.keys(t); !maps.Equal(got, map[string]bool{"live": true}) {
		t.Errorf("%d claims left after the run, want the live one alone", len(got))
	}
}

// TestTwoReplicasDrainABacklogDeletingEachRowOnce: two sweepers, each on
// a pool of its own as two replicas are, drain one backlog at once. Each
// first pass holds its batch until the other has read one too, so both
// hold locked batches at the same instant (SKIP LOCKED lets the second
// read past the first's rows instead of waiting on them); then they race
// freely. Every row is read and deleted by exactly one of them, neither
// errs, and none is left.
func TestTwoReplicasDrainABacklogDeletingEachRowOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const expired = 30_000
	dbURL := pgtest.NewDBURL(t)
	pools := make([]*pgxpool.Pool, 2)
	for i := range pools {
		pool, err := pgxpool.New(b.ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close) // before the database is dropped
		pools[i] = pool
	}
	b.db, b.plane = pools[0], idempotency.NewService(pools[0], idempotency.Config{Clock: b.clock.Clock()})
	b.seedExpired(t, "old", expired)
	b.claimDone(t, "tool.email.send", "live", time.Minute)

	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		both    sync.WaitGroup // both sweepers hold a batch of claims
		reports [2]Report
		errs    [2]error
		rests   atomic.Int64
	)
	both.Add(len(pools))
	for i, pool := range pools {
		var first sync.Once
		s, err := New(pool, Config{Clock: b.clock.Clock(), Logger: slog.New(slog.DiscardHandler), rest: noRest(&rests),
			beforeDelete: func(ctx context.Context, table string, _ []uuid.UUID) error {
				var err error
				first.Do(func() {
					if table != TableClaims {
						err = fmt.Errorf("sweeper %d: first pass on %s, want %s", i, table, TableClaims)
						return
					}
					both.Done()
					held := make(chan struct{})
					go func() { both.Wait(); close(held) }()
					select {
					case <-held:
					case <-time.After(30 * time.Second):
						err = fmt.Errorf("sweeper %d: the other sweeper read no batch of its own for 30s while this one held its batch: its read waits on this one's locks", i)
					}
				})
				return err
			}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			reports[i], errs[i] = s.RunOnce(b.ctx)
		}()
	}
	close(start)
	wg.Wait()

	read, deleted := 0, 0
	for i := range pools {
		if errs[i] != nil {
			t.Errorf("sweeper %d: %v", i, errs[i])
		}
		c := reports[i].Claims
		if c.Deleted == 0 {
			t.Errorf("sweeper %d deleted nothing: the sweepers did not share the work", i)
		}
		read += c.Read
		deleted += c.Deleted
		t.Logf("sweeper %d: %+v", i, c)
	}
	if deleted != expired || read != expired {
		t.Errorf("the sweepers read %d and deleted %d claims in total, want %d each: every row by one of them, once",
			read, deleted, expired)
	}
	if got := b.keys(t); !maps.Equal(got, map[string]bool{"live": true}) {
		t.Errorf("%d claims left, want the live one alone", len(got))
	}
}

// TestRunStartsAgainAtOnceWhileABacklogRemains: the loop of serve, its
// budget judged by a stub clock that moves a second per pass (and not in
// the rests, which return at once: the budget then depends on the number
// of passes alone, never on how fast the machine is).
// The first run's budget runs out with claims still due, right after a
// full pass: the loop's next wait is the rest that pass asked for (the
// duty's, a few milliseconds), not the interval. The second run drains the
// rest: rows came due, so the wait after it is the time half a bound took
// to come due at that pace (never the interval), and the third run, so
// soon, sweeps the claims alone, the one table that had rows due. It finds
// nothing, and the wait after it is the interval plus at most the jitter,
// before a fourth run that sweeps every table again.
func TestRunStartsAgainAtOnceWhileABacklogRemains(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seedExpired(t, "old", 20)

	var (
		now    = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		waits  []time.Duration
		full   []time.Duration // the durations of the full claims passes
		counts []int           // claims deleted by each run
		passes [][2]int        // each run's passes on the claims and the Runs
		starts []time.Time     // the clock at each wait: the next run's start
		runs   int
	)
	const interval, jitter = time.Hour, 6 * time.Minute
	s := b.sweeper(t, Config{Bound: 5, Duty: 0.25, Interval: interval, Jitter: jitter,
		// A round of 9 passes is 9 s: the first round, then two passes of
		// the second and third, and the budget has run out.
		Budget: 10*time.Second + 500*time.Millisecond,
		Observer: ObserverFunc(func(table string, read, _ int, d time.Duration) {
			now = now.Add(time.Second)
			if table == TableClaims && read == 5 {
				full = append(full, d)
			}
		}),
		Recorder: recorderFunc(func(r RunRecord) {
			counts = append(counts, r.Report.Claims.Deleted)
			passes = append(passes, [2]int{r.Report.Claims.Passes, r.Report.Runs.Passes})
		}),
		now:  func() time.Time { return now },
		rest: func(context.Context, time.Duration) bool { return true },
		wait: func(_ context.Context, d time.Duration) bool {
			waits, starts = append(waits, d), append(starts, now)
			runs++
			return runs <= 4
		},
	})
	s.Run(b.ctx)

	if !slices.Equal(counts, []int{15, 5, 0, 0}) {
		t.Fatalf("the runs deleted %v claims, want 15 (out of budget), then the last 5, then none twice", counts)
	}
	if len(waits) != 5 || len(full) != 4 {
		t.Fatalf("waits %v after full passes of %v, want 5 waits and 4 full passes", waits, full)
	}
	if want := [2]int{1, 0}; passes[2] != want {
		t.Errorf("the quick third run made %v passes on the claims and the Runs, want %v: "+
			"the claims alone, the one table the run before deleted from", passes[2], want)
	}
	if want := [2]int{1, 1}; passes[3] != want {
		t.Errorf("the fourth run, an interval on, made %v passes on the claims and the Runs, want %v: every table", passes[3], want)
	}
	if w := waits[0]; w < 0 || w > jitter {
		t.Errorf("first wait = %s, want at most the jitter %s", w, jitter)
	}
	// The third full pass ended the first run: its rest, owed, is the wait.
	if want := 3 * full[2]; waits[1] != want {
		t.Errorf("wait after a run that left a backlog = %s, want the rest its last pass asked for, %s (3×%s): "+
			"the next run starts at once", waits[1], want, full[2])
	}
	// The second run deleted 5 claims, a bound, that came due since the
	// first run's start: half a bound comes due in half that window.
	half := max(starts[1].Sub(starts[0])/2, MinWait)
	if w := waits[2]; w < half || w > half+half/10 {
		t.Errorf("wait after a run that drained 5 claims due over %s = %s, want %s plus at most a tenth: "+
			"when half a bound came due at that pace, not the interval", starts[1].Sub(starts[0]), w, half)
	}
	if w := waits[3]; w < interval || w > interval+jitter {
		t.Errorf("wait after a run that found nothing = %s, want the interval %s plus at most %s", w, interval, jitter)
	}
	if n := b.count(t, TableClaims); n != 0 {
		t.Errorf("%d claims left, want none", n)
	}
}

// recorderFunc adapts a function to a Recorder.
type recorderFunc func(RunRecord)

func (f recorderFunc) RecordRun(_ context.Context, r RunRecord) { f(r) }

func TestSweepSkipsARowAWriterHolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A processing claim whose retention passes while its worker is still
	// completing it, inside a transaction that holds the row.
	c := b.claim(t, b.plane, "webhook.nylas", "held", idempotency.WebhookLease)
	b.seedExpired(t, "old", 3)
	b.clock.Advance(idempotency.WebhookRetention)
	tx, err := b.db.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(b.ctx)
	if ok, err := b.plane.CompleteTx(b.ctx, tx, c, answer("held")); !ok || err != nil {
		t.Fatalf("CompleteTx = %v, %v", ok, err)
	}

	// The sweep neither waits for the writer nor deletes under it.
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s := b.sweeper(t, Config{})
	rep, err := s.RunOnce(ctx)
	if err != nil || rep.Claims.Read != 3 || rep.Claims.Deleted != 3 {
		t.Fatalf("RunOnce while a writer holds a row = %+v, %v; want the 3 other rows deleted", rep.Claims, err)
	}
	if err := tx.Commit(b.ctx); err != nil {
		t.Fatal(err)
	}
	// Once the writer is done, the next run takes the row.
	if rep := b.runOnce(t, s); rep.Claims.Deleted != 1 || b.count(t, TableClaims) != 0 {
		t.Errorf("run after the writer committed = %+v, want the held row deleted", rep.Claims)
	}
}

func TestRunSweepsUntilTheContextEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The database's own clock: claims made 31 days ago have expired.
	b.clock.Set(time.Now().Add(-31 * day).UTC().Truncate(time.Microsecond))
	b.claimDone(t, "tool.email.send", "old-1", time.Minute)
	b.claimDone(t, "tool.email.send", "old-2", time.Minute)
	b.clock.Set(time.Now().UTC().Truncate(time.Microsecond))
	b.claimDone(t, "tool.email.send", "live", time.Minute)

	passes := make(chan int, 100)
	s, err := New(b.db, Config{
		Interval: 10 * time.Millisecond,
		Jitter:   5 * time.Millisecond,
		Logger:   slog.New(slog.NewTextHandler(b.logs, nil)),
		Observer: ObserverFunc(func(table string, read, _ int, _ time.Duration) {
			if table == TableClaims {
				select {
				case passes <- read:
				default:
				}
			}
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	// Two runs at least: the first deletes, a later one finds nothing.
	var reads []int
	for len(reads) < 2 {
		select {
		case n := <-passes:
			reads = append(reads, n)
		case <-time.After(10 * time.Second):
			t.Fatalf("Run made passes reading %v in 10 s, want at least two runs", reads)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if reads[0] != 2 || reads[1] != 0 {
		t.Errorf("passes read %v, want 2 then 0", reads)
	}
	if got := b.keys(t); !maps.Equal(got, map[string]bool{"live": true}) {
		t.Errorf("claims after Run = %v, want the live one alone", got)
	}
	if strings.Contains(b.logs.String(), "level=ERROR") {
		t.Errorf("log = %q, want no error: a cancelled run is not a failure", b.logs.String())
	}
}

func TestJitterStaysWithinItsBound(t *testing.T) {
	t.Parallel()
	s, err := New(nil, Config{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[time.Duration]bool{}
	for range 1000 {
		j := s.jitter()
		if j < 0 || j > 6*time.Minute {
			t.Fatalf("jitter() = %s, want 0 to 6m", j)
		}
		seen[j] = true
	}
	if len(seen) < 900 {
		t.Errorf("1000 jitters took %d values, want them spread", len(seen))
	}
	s, err = New(nil, Config{Interval: time.Hour, Jitter: -1})
	if err != nil {
		t.Fatal(err)
	}
	if j := s.jitter(); j != 0 {
		t.Errorf("jitter() with Jitter disabled = %s, want 0", j)
	}
}

func TestFailedTableDoesNotStopTheOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seedExpired(t, "old", 2)
	boom := errors.New("boom")
	s := b.sweeper(t, Config{beforeDelete: func(_ context.Context, table string, _ []uuid.UUID) error {
		if table == TableClaims {
			return boom
		}
		return nil
	}})
	rep, err := s.RunOnce(b.ctx)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), TableClaims) {
		t.Errorf("RunOnce = %v, want boom naming %s", err, TableClaims)
	}
	if rep.Claims.Deleted != 0 || rep.Runs.Passes != 1 || rep.Snapshots.Passes != 1 || rep.Drops.Passes != 1 {
		t.Errorf("report = %+v, want nothing deleted from claims and the other tables swept", rep)
	}
	if n := b.count(t, TableClaims); n != 2 {
		t.Errorf("%d claims left after a failed pass, want 2: it rolls back", n)
	}
}

// TestABoundHoldsAcrossShards: claims past retention in organizations on
// every node of a cluster (and on several shards of each), swept with a
// bound below their number. Each pass reads at most the bound, the oldest
// first whichever shard holds them, one transaction per shard (issue
// 25.4); a pass that reads a full bound is warned of; the run drains the
// rest. On PostgreSQL it is one table and one transaction a pass.
func TestABoundHoldsAcrossShards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	orgs, err := pgtest.OrganizationPerNode(b.ctx, b.db)
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		orgs = append(orgs, uuid.New())
	}
	const n = 24
	now := b.clock.Now()
	// Claim i expired i ms after claim i+1: the oldest is the last.
	for i := range n {
		b.exec(t, `
INSERT INTO agent.idempotency_keys
	(id, organization_id, scope, key, request_hash, status, lease_token,
	 resource_type, resource_id, response, claimed_at, lease_expires_at, retain_until)
VALUES (gen_random_uuid(), $1, 'webhook.nylas', $2, 'hash', 'completed', gen_random_uuid(),
	'test_resource', $2, '{}', $3::timestamptz - interval '25 hours', $3::timestamptz - interval '25 hours',
	$3::timestamptz - interval '1 hour' - $4 * interval '1 millisecond')`,
			orgs[i%len(orgs)], fmt.Sprintf("spread-%02d", i), now, i)
	}
	left := func() []string { return b.strings(t, `SELECT key FROM agent.idempotency_keys ORDER BY key`) }

	rep := b.runOnce(t, b.sweeper(t, Config{Bound: 10, Budget: time.Nanosecond}))
	if c := rep.Claims; c.Read != 10 || c.Deleted != 10 || c.Passes != 1 || !c.Backlog {
		t.Errorf("one pass of a bound of 10 = %+v, want 10 read, 10 deleted, a backlog", c)
	}
	var want []string
	for i := range n - 10 {
		want = append(want, fmt.Sprintf("spread-%02d", i))
	}
	if got := left(); !slices.Equal(got, want) {
		t.Errorf("claims left = %q, want the %d youngest %q: a pass takes the oldest, whichever shard holds them", got, n-10, want)
	}
	if logs := b.logs.String(); !strings.Contains(logs, "backlog remains") || !strings.Contains(logs, "read=10") {
		t.Errorf("log = %q, want a warning that a backlog remains after a pass that read 10", logs)
	}

	rep = b.runOnce(t, b.sweeper(t, Config{Bound: 10}))
	if c := rep.Claims; c.Read != 14 || c.Deleted != 14 || c.Passes != 2 || c.Backlog || c.FullPasses != 1 {
		t.Errorf("the rest = %+v, want 14 read and deleted in 2 passes, 1 full, no backlog", c)
	}
	if got := left(); len(got) != 0 {
		t.Errorf("claims left = %q, want none", got)
	}
}

// TestQuickRunsSweepEveryTableAnIntervalApart: claims come due before
// every run, four at a time (less than a bound, so no run leaves a
// backlog), so the loop keeps running quickly, on the claims alone; the
// other tables are still swept at least once an interval. The clock is a
// stub that moves by each wait alone.
func TestQuickRunsSweepEveryTableAnIntervalApart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const interval = 10 * time.Second
	var (
		now   = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		at    []time.Time // each run's start
		fulls []time.Time // the starts of the runs that swept the Runs too
		runs  int
	)
	s := b.sweeper(t, Config{Bound: 5, Interval: interval, Jitter: time.Second,
		Recorder: recorderFunc(func(r RunRecord) {
			if r.Report.Runs.Passes > 0 {
				fulls = append(fulls, at[len(at)-1])
			}
		}),
		now: func() time.Time { return now },
		wait: func(_ context.Context, d time.Duration) bool {
			if runs++; runs > 40 {
				return false
			}
			now = now.Add(d)
			b.seedExpired(t, fmt.Sprintf("r%d", runs), 4)
			at = append(at, now)
			return true
		},
	})
	s.Run(b.ctx)

	if len(fulls) < 3 {
		t.Fatalf("%d of %d runs swept every table (at %v), want one at least every %s", len(fulls), len(at), fulls, interval)
	}
	quick := len(at) - len(fulls)
	if quick < len(at)/2 {
		t.Errorf("%d of %d runs swept the claims alone, want most: rows keep coming due", quick, len(at))
	}
	// A wait is at most a bound's worth of due rows away (a few seconds)
	// and its tenth of jitter: every table is swept within an interval and
	// one such wait of the last full run.
	for i := 1; i < len(fulls); i++ {
		if gap := fulls[i].Sub(fulls[i-1]); gap > interval+2*time.Second {
			t.Errorf("full runs at %s then %s, %s apart: want at most the interval %s and one quick wait",
				fulls[i-1].Format(time.TimeOnly), fulls[i].Format(time.TimeOnly), gap, interval)
		}
	}
	if n := b.count(t, TableClaims); n != 0 {
		t.Errorf("%d claims left, want none", n)
	}
}
