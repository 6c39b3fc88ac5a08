package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/pgtest"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type bundle struct {
	ctx      context.Context
	db       *pgxpool.Pool
	clock    *dbclocktest.Stub // every store of deps runs at it
	deps     Deps
	plane    *idempotency.Service
	searches *savedsearch.Store
	starter  *Starter
	org      uuid.UUID
	search   *savedsearch.SavedSearch
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := pgtest.NewDB(t)
	return newBundle(t, db)
}

func newBundle(t *testing.T, db *pgxpool.Pool) bundle {
	t.Helper()
	c := dbclocktest.New(time.Now().UTC().Truncate(time.Microsecond))
	deps := depsOn(db, c.Clock())
	b := bundle{
		ctx:      context.Background(),
		db:       db,
		clock:    c,
		deps:     deps,
		plane:    deps.Plane,
		searches: deps.SavedSearches,
		org:      uuid.New(),
	}
	b.starter = b.newStarter(nil)
	ss, err := b.searches.Create(b.ctx, b.org, savedsearch.CreateParams{
		Name:     "rust jobs",
		Brief:    savedsearch.Brief{Query: "rust", Filters: map[string]any{"remote": true}},
		Baseline: savedsearch.Baseline{Items: []string{"seen-1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.search = ss
	return b
}

// depsOn returns the dependencies of a Starter on db, each store built
// once, all at clock.
func depsOn(db *pgxpool.Pool, clock *dbclock.Clock) Deps {
	return Deps{
		Pool:          db,
		Plane:         idempotency.NewService(db, idempotency.Config{Clock: clock}),
		SavedSearches: savedsearch.NewStore(db),
		Snapshots:     snapshot.NewStore(db),
		Runs:          runs.NewStore(db, runs.Config{Clock: clock}),
	}
}

// mustStarter is [NewStarter] for a test whose dependencies and config are
// valid; it panics otherwise.
func mustStarter(d Deps, cfg Config) *Starter {
	s, err := NewStarter(d, cfg)
	if err != nil {
		panic(err)
	}
	return s
}

// newStarter returns a starter on the bundle's stores and clock, with a
// hook that runs inside the preparation transaction just before the
// freeze.
func (b bundle) newStarter(beforeFreeze func(ctx context.Context) error) *Starter {
	return withHooks(mustStarter(b.deps, Config{}), beforeFreeze, nil)
}

func (b bundle) start(key string) SavedSearchStart {
	return SavedSearchStart{Org: b.org, SavedSearchID: b.search.ID, IdempotencyKey: key, Actor: "user-1"}
}

// claim claims p's key in the plane as another worker starting p would:
// the start's scope, p's request hash, the default lease.
func (b bundle) claim(ctx context.Context, p SavedSearchStart) (idempotency.Outcome, error) {
	return b.plane.Claim(ctx, p.Org, idempotency.ScopeSavedSearchStart, p.IdempotencyKey,
		SavedSearchRequestHash(p.SavedSearchID, p.Options), idempotency.SavedSearchStartLease)
}

// count returns the number of rows of table (one of the three below).
func (b bundle) count(t *testing.T, table string) int {
	t.Helper()
	queries := map[string]string{
		"snapshots": `SELECT count(*) FROM agent.saved_search_snapshots`,
		"runs":      `SELECT count(*) FROM agent.runs`,
		"claims":    `SELECT count(*) FROM agent.idempotency_keys`,
	}
	return pgtest.Count(t, b.db, queries[table])
}

func (b bundle) wantCounts(t *testing.T, snapshots, runs int) {
	t.Helper()
	if s, r := b.count(t, "snapshots"), b.count(t, "runs"); s != snapshots || r != runs {
		t.Errorf("%d snapshots and %d runs, want %d and %d", s, r, snapshots, runs)
	}
}

// claimRow reads the stored claim of key.
func (b bundle) claimRow(t *testing.T, key string) *idempotency.Record {
	t.Helper()
	rec, err := b.plane.Repository().Get(b.ctx, b.org, idempotency.ScopeSavedSearchStart, key)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func wantInFlight(t *testing.T, err error) *idempotency.InFlightError {
	t.Helper()
	var inFlight *idempotency.InFlightError
	if !errors.As(err, &inFlight) {
		t.Fatalf("error = %v, want an *idempotency.InFlightError", err)
	}
	if inFlight.RetryAfter < time.Second {
		t.Errorf("RetryAfter = %v, want at least 1s", inFlight.RetryAfter)
	}
	return inFlight
}

func TestStartAdmitsARunOnAFrozenSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := b.starter.StartSavedSearch(b.ctx, b.start("k1"))
	if err != nil {
		t.Fatal(err)
	}
	run, snap := res.Run, res.Snapshot
	if !res.Created || run.Kind != runs.KindSavedSearch || *run.SavedSearchID != b.search.ID ||
		*run.SnapshotID != snap.ID || *run.Name != "rust jobs" || run.Input != nil || run.Status != runs.StatusQueued {
		t.Errorf("StartSavedSearch = %+v, %+v", run, snap)
	}
	var opts StartOptions
	if err := json.Unmarshal(run.Options, &opts); err != nil || opts != (StartOptions{MaxResults: 100}) {
		t.Errorf("Run options = %s, %v; want the normalized defaults", run.Options, err)
	}
	if snap.SavedSearchID != b.search.ID || snap.SavedSearchVersion != 1 || len(snap.ContentHash) != 64 {
		t.Errorf("snapshot = %+v", snap)
	}
	if !run.RetainUntil.Equal(run.CreatedAt.Add(runs.Retention)) || !run.CreatedAt.Equal(b.clock.Now()) {
		t.Errorf("created_at %v retain_until %v; want the stubbed now and 396 days after", run.CreatedAt, run.RetainUntil)
	}
	rec := b.claimRow(t, "k1")
	if rec == nil || rec.Status != idempotency.StatusCompleted || rec.ResourceType != ResourceType || rec.ResourceID != snap.ID.String() {
		t.Errorf("claim = %+v, want completed naming snapshot %s", rec, snap.ID)
	}
	b.wantCounts(t, 1, 1)

	again, err := b.starter.StartSavedSearch(b.ctx, b.start("k1"))
	if err != nil || again.Created || again.Run.ID != run.ID || *again.Snapshot != *snap {
		t.Errorf("repeat = %+v, %v; want Run %s replayed with the same snapshot", again, err, run.ID)
	}
	b.wantCounts(t, 1, 1)
}

// The keys a start mints are primary keys, time-ordered so that each
// lands at the right edge of its index (internal/ids); the claim's lease
// token is a fence, random.
func TestStartMintsTimeOrderedKeysAndARandomLeaseToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if v := b.search.ID.Version(); v != 7 {
		t.Errorf("saved search id %s is version %d, want 7", b.search.ID, v)
	}
	var prev []uuid.UUID
	for _, key := range []string{"k1", "k2"} {
		res, err := b.starter.StartSavedSearch(b.ctx, b.start(key))
		if err != nil {
			t.Fatal(err)
		}
		rec := b.claimRow(t, key)
		keys := []uuid.UUID{rec.ID, res.Snapshot.ID, res.Run.ID}
		for i, id := range keys {
			name := []string{"claim", "snapshot", "Run"}[i]
			if id.Version() != 7 {
				t.Errorf("start %s: %s id %s is version %d, want 7", key, name, id, id.Version())
			}
			if prev != nil && bytes.Compare(prev[i][:], id[:]) >= 0 {
				t.Errorf("start %s: %s id %s is not after the previous start's %s", key, name, id, prev[i])
			}
		}
		if v := rec.LeaseToken.Version(); v != 4 {
			t.Errorf("start %s: lease token %s is version %d, want 4 (random)", key, rec.LeaseToken, v)
		}
		prev = keys
	}
}

func TestConcurrentStartsMakeOneSnapshotAndOneRun(t *testing.T) {
	t.Parallel()
	const callers = 20
	tests := []struct {
		name string
		// hold keeps the caller that won the claim inside its preparation
		// until every other caller has answered, so they all meet the live
		// lease; without it the callers race freely.
		hold bool
	}{
		{"racing", false},
		{"winner holds the claim", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var answered atomic.Int32
			starter := b.starter
			if tt.hold {
				starter = b.newStarter(func(context.Context) error {
					deadline := time.Now().Add(10 * time.Second)
					for answered.Load() < callers-1 && time.Now().Before(deadline) {
						time.Sleep(5 * time.Millisecond)
					}
					return nil
				})
			}
			var (
				wg       sync.WaitGroup
				mu       sync.Mutex
				ready    = make(chan struct{})
				runIDs   = map[uuid.UUID]int{}
				created  int
				inFlight int
			)
			for range callers {
				wg.Go(func() {
					<-ready
					res, err := starter.StartSavedSearch(b.ctx, b.start("same"))
					answered.Add(1)
					mu.Lock()
					defer mu.Unlock()
					var ife *idempotency.InFlightError
					switch {
					case errors.As(err, &ife):
						inFlight++
						if ife.RetryAfter < time.Second {
							t.Errorf("RetryAfter = %v, want at least 1s", ife.RetryAfter)
						}
					case err != nil:
						t.Errorf("StartSavedSearch: %v", err)
					default:
						runIDs[res.Run.ID]++
						if res.Created {
							created++
						}
						if *res.Run.SnapshotID != res.Snapshot.ID {
							t.Errorf("answer names snapshot %s, its Run %s", res.Snapshot.ID, *res.Run.SnapshotID)
						}
					}
				})
			}
			close(ready)
			wg.Wait()
			t.Logf("%d callers: %d got the Run, %d in progress", callers, callers-inFlight, inFlight)
			if len(runIDs) != 1 || created != 1 {
				t.Errorf("answers named %d Runs with %d created; want 1 and 1", len(runIDs), created)
			}
			if tt.hold && inFlight != callers-1 {
				t.Errorf("%d callers answered in progress while the winner held the claim, want %d", inFlight, callers-1)
			}
			b.wantCounts(t, 1, 1)
		})
	}
}

func TestLivePreparationAnswersInProgressThenOneCallerReclaims(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.start("k")
	held, err := b.claim(b.ctx, p)
	if err != nil || held.Kind != idempotency.KindClaimed {
		t.Fatalf("Claim = %v, %v", held.Kind, err)
	}

	_, err = b.starter.StartSavedSearch(b.ctx, p)
	if ife := wantInFlight(t, err); ife.RetryAfter != 30*time.Second {
		t.Errorf("RetryAfter = %v, want 30s (the whole lease)", ife.RetryAfter)
	}
	b.wantCounts(t, 0, 0)

	b.clock.Advance(idempotency.SavedSearchStartLease + time.Second)
	const callers = 8
	var (
		wg      sync.WaitGroup
		created atomic.Int32
		ids     sync.Map
	)
	for range callers {
		wg.Go(func() {
			res, err := b.starter.StartSavedSearch(b.ctx, p)
			var ife *idempotency.InFlightError
			switch {
			case errors.As(err, &ife):
			case err != nil:
				t.Errorf("StartSavedSearch after the lease: %v", err)
			default:
				ids.Store(res.Run.ID, true)
				if res.Created {
					created.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if created.Load() != 1 {
		t.Errorf("%d callers created a Run, want exactly 1", created.Load())
	}
	b.wantCounts(t, 1, 1)
	if ok, err := b.plane.Complete(b.ctx, held.Claim, idempotency.Completion{Response: json.RawMessage(`{}`)}); ok || err != nil {
		t.Errorf("the replaced worker's Complete = %v, %v; want false", ok, err)
	}
	if rec := b.claimRow(t, "k"); rec == nil || rec.Status != idempotency.StatusCompleted || rec.ResourceType != ResourceType {
		t.Errorf("claim = %+v, want completed by the reclaimer", rec)
	}
}

func TestPreparationWithLostFenceWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.start("k")
	var thief *idempotency.Claim
	var once sync.Once
	// The worker stalls inside its preparation past its lease, and another
	// worker reclaims the key meanwhile.
	stalled := b.newStarter(func(ctx context.Context) error {
		var err error
		once.Do(func() {
			b.clock.Advance(idempotency.SavedSearchStartLease + time.Second)
			var out idempotency.Outcome
			out, err = b.claim(ctx, p)
			if err == nil && out.Kind != idempotency.KindClaimed {
				err = errors.New("the second worker did not reclaim: " + out.Kind.String())
			}
			thief = out.Claim
		})
		return err
	})
	res, err := stalled.StartSavedSearch(b.ctx, p)
	if err == nil {
		t.Fatalf("the stalled worker's start = %+v, nil after its claim was reclaimed; "+
			"the fenced completion (claimCompleteOrAbort) must abort its transaction", res)
	}
	wantInFlight(t, err)
	b.wantCounts(t, 0, 0)
	rec := b.claimRow(t, "k")
	if thief == nil || !thief.Reclaimed || rec == nil || rec.Status != idempotency.StatusProcessing || rec.LeaseToken != thief.LeaseToken {
		t.Fatalf("claim = %+v, want it still processing under the reclaimer's token", rec)
	}

	// The reclaimer dies too; after its lease the next start completes.
	b.clock.Advance(idempotency.SavedSearchStartLease + time.Second)
	res, err = b.starter.StartSavedSearch(b.ctx, p)
	if err != nil || !res.Created {
		t.Fatalf("start after both leases = %+v, %v; want a new Run", res, err)
	}
	b.wantCounts(t, 1, 1)
}

func TestPreparationClaimsWithTheConfiguredLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.start("k")
	const lease = 5 * time.Second
	var retryAfter time.Duration
	var reclaimed idempotency.Outcome
	var once sync.Once
	// While the short-leased starter prepares, another start of the key is
	// told to come back when that lease ends, and once it has passed
	// (long before the default 30 s) the key can be reclaimed.
	short := withHooks(mustStarter(b.deps, Config{Lease: lease}), func(ctx context.Context) error {
		var err error
		once.Do(func() {
			_, serr := b.starter.StartSavedSearch(ctx, p)
			var ife *idempotency.InFlightError
			if !errors.As(serr, &ife) {
				err = fmt.Errorf("a start during the preparation = %v, want in progress", serr)
				return
			}
			retryAfter = ife.RetryAfter
			b.clock.Advance(lease + time.Second)
			reclaimed, err = b.claim(ctx, p)
		})
		return err
	}, nil)
	_, err := short.StartSavedSearch(b.ctx, p)
	if retryAfter != lease {
		t.Errorf("RetryAfter during a preparation with Lease %s = %s, want %s", lease, retryAfter, lease)
	}
	if reclaimed.Kind != idempotency.KindClaimed || reclaimed.Claim == nil || !reclaimed.Claim.Reclaimed {
		t.Errorf("Claim %s after a %s lease = %v, want the key reclaimed", lease+time.Second, lease, reclaimed.Kind)
	}
	wantInFlight(t, err) // its completion is fenced off by the reclaim
}

func TestConfigValidateBoundsTheLease(t *testing.T) {
	t.Parallel()
	tests := []struct {
		lease   time.Duration
		wantErr bool
	}{
		{0, false}, // the default
		{time.Second, false},
		{idempotency.MaxLease, false},
		{-time.Second, true},
		{idempotency.MaxLease + time.Second, true},
	}
	for _, tt := range tests {
		err := Config{Lease: tt.lease}.Validate()
		if (err != nil) != tt.wantErr || (err != nil && !strings.Contains(err.Error(), "Lease")) {
			t.Errorf("Config{Lease: %s}.Validate() = %v, want an error naming Lease: %v", tt.lease, err, tt.wantErr)
		}
	}
	if got := (Config{}).WithDefaults().Lease; got != idempotency.SavedSearchStartLease {
		t.Errorf("Config{}.WithDefaults().Lease = %s, want %s", got, idempotency.SavedSearchStartLease)
	}
}

func TestDirectStartWritesNoClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := DirectStart{Org: b.org, Kind: runs.KindCapability, Name: "enrich.company",
		Input: json.RawMessage(`{"domain":"example.com","depth":2}`), IdempotencyKey: "dk", Actor: "user-1"}
	res, err := b.starter.StartDirect(b.ctx, d)
	if err != nil || !res.Created || res.Snapshot != nil {
		t.Fatalf("StartDirect = %+v, %v; want a new Run and no snapshot", res, err)
	}
	if run := res.Run; run.Kind != runs.KindCapability || *run.Name != "enrich.company" || run.SavedSearchID != nil ||
		run.SnapshotID != nil || run.Options != nil {
		t.Errorf("Run = %+v", run)
	}

	// Written differently, the same request replays.
	d.Input = json.RawMessage("{ \"depth\" : 2,\n \"domain\": \"example.com\" }")
	again, err := b.starter.StartDirect(b.ctx, d)
	if err != nil || again.Created || again.Run.ID != res.Run.ID {
		t.Errorf("repeat = %+v, %v; want Run %s replayed", again, err, res.Run.ID)
	}
	d.Input = json.RawMessage(`{"domain":"example.org","depth":2}`)
	if _, err := b.starter.StartDirect(b.ctx, d); !errors.Is(err, ErrKeyReused) {
		t.Errorf("same key, other input = %v, want ErrKeyReused", err)
	}
	d.Input, d.Kind = json.RawMessage(`{"domain":"example.com","depth":2}`), runs.KindDefinition
	if _, err := b.starter.StartDirect(b.ctx, d); !errors.Is(err, ErrKeyReused) {
		t.Errorf("same key, other kind = %v, want ErrKeyReused", err)
	}
	if n := b.count(t, "claims"); n != 0 {
		t.Errorf("%d rows in agent.idempotency_keys after direct starts, want 0", n)
	}

	for name, bad := range map[string]DirectStart{
		"unknown kind":     {Org: b.org, Kind: "saved_search", Name: "n", IdempotencyKey: "x"},
		"no name":          {Org: b.org, Kind: runs.KindCapability, IdempotencyKey: "x"},
		"array input":      {Org: b.org, Kind: runs.KindCapability, Name: "n", Input: json.RawMessage(`[1]`), IdempotencyKey: "x"},
		"malformed input":  {Org: b.org, Kind: runs.KindCapability, Name: "n", Input: json.RawMessage(`{"a":`), IdempotencyKey: "x"},
		"no key":           {Org: b.org, Kind: runs.KindCapability, Name: "n"},
		"control char key": {Org: b.org, Kind: runs.KindCapability, Name: "n", IdempotencyKey: "a\nb"},
	} {
		if _, err := b.starter.StartDirect(b.ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("StartDirect(%s) = %v, want ErrInvalid", name, err)
		}
	}
}

func TestOneKeyOnBothSurfacesNamesTwoRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ss, err := b.starter.StartSavedSearch(b.ctx, b.start("shared"))
	if err != nil || !ss.Created {
		t.Fatalf("saved-search start = %v, %v", ss.Created, err)
	}
	d, err := b.starter.StartDirect(b.ctx, DirectStart{Org: b.org, Kind: runs.KindDefinition, Name: "digest",
		IdempotencyKey: "shared"})
	if err != nil || !d.Created || d.Run.ID == ss.Run.ID {
		t.Errorf("direct start with the same key = %+v, %v; want a second, new Run", d, err)
	}
	b.wantCounts(t, 1, 2)
}

func TestStableKeyReplaysTheRunAfterTheClaimIsGone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, err := b.starter.StartSavedSearch(b.ctx, b.start("k"))
	if err != nil {
		t.Fatal(err)
	}
	// A day later the claim's retention has passed; the saved search has
	// changed since, which must not matter to the replay.
	b.clock.Advance(25 * time.Hour)
	if _, err := b.searches.ReplaceBaseline(b.ctx, b.org, b.search.ID, savedsearch.Baseline{Items: []string{"new"}}); err != nil {
		t.Fatal(err)
	}
	res, err := b.starter.StartSavedSearch(b.ctx, b.start("k"))
	if err != nil || res.Created || res.Run.ID != first.Run.ID || *res.Snapshot != *first.Snapshot {
		t.Errorf("replay after 25 h = %+v, %v; want Run %s", res, err, first.Run.ID)
	}
	// The sweeper deletes the claim: the Run still answers.
	if _, err := b.db.Exec(b.ctx, `DELETE FROM agent.idempotency_keys`); err != nil {
		t.Fatal(err)
	}
	res, err = b.starter.StartSavedSearch(b.ctx, b.start("k"))
	if err != nil || res.Created || res.Run.ID != first.Run.ID {
		t.Errorf("replay after the sweep = %+v, %v; want Run %s", res, err, first.Run.ID)
	}
	if _, err := b.starter.StartSavedSearch(b.ctx, SavedSearchStart{Org: b.org, SavedSearchID: b.search.ID,
		IdempotencyKey: "k", Options: StartOptions{MaxResults: 5}}); !errors.Is(err, ErrKeyReused) {
		t.Errorf("same key, other options, after the sweep = %v, want ErrKeyReused", err)
	}
	b.wantCounts(t, 1, 1)
	if n := b.count(t, "claims"); n != 0 {
		t.Errorf("replays wrote %d claims, want 0", n)
	}
}

// queryCounter counts the statements a pool sends.
type queryCounter struct{ n atomic.Int64 }

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func TestReplayCostsOneStatement(t *testing.T) {
	t.Parallel()
	counter := &queryCounter{}
	db := pgtest.NewTracedDB(t, counter)
	b := newBundle(t, db)
	if _, err := b.starter.StartSavedSearch(b.ctx, b.start("k")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.starter.StartDirect(b.ctx, DirectStart{Org: b.org, Kind: runs.KindCapability, Name: "n", IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	for name, replay := range map[string]func() (Result, error){
		"saved search": func() (Result, error) { return b.starter.StartSavedSearch(b.ctx, b.start("k")) },
		"direct": func() (Result, error) {
			return b.starter.StartDirect(b.ctx, DirectStart{Org: b.org, Kind: runs.KindCapability, Name: "n", IdempotencyKey: "k"})
		},
	} {
		before := counter.n.Load()
		res, err := replay()
		if err != nil || res.Created {
			t.Fatalf("%s replay = %+v, %v", name, res, err)
		}
		if n := counter.n.Load() - before; n > 2 {
			t.Errorf("%s replay sent %d statements, want at most 2", name, n)
		}
	}
}

func TestAbsentSavedSearchAnswersNotFoundBeforeAnyClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	archived, err := b.searches.Create(b.ctx, b.org, savedsearch.CreateParams{Name: "old", Brief: savedsearch.Brief{Query: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.searches.Archive(b.ctx, b.org, archived.ID); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]SavedSearchStart{
		"absent":    {Org: b.org, SavedSearchID: uuid.New(), IdempotencyKey: "k1"},
		"archived":  {Org: b.org, SavedSearchID: archived.ID, IdempotencyKey: "k2"},
		"other org": {Org: uuid.New(), SavedSearchID: b.search.ID, IdempotencyKey: "k3"},
	} {
		if _, err := b.starter.StartSavedSearch(b.ctx, p); !errors.Is(err, ErrNotFound) {
			t.Errorf("StartSavedSearch(%s) = %v, want ErrNotFound", name, err)
		}
	}
	if n := b.count(t, "claims"); n != 0 {
		t.Errorf("%d claims written for absent saved searches, want 0", n)
	}
	b.wantCounts(t, 0, 0)
}

func TestSavedSearchVanishingBeforeTheFreezeCompletesNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var once sync.Once
	archiving := b.newStarter(func(ctx context.Context) error {
		var err error
		once.Do(func() { err = b.searches.Archive(ctx, b.org, b.search.ID) })
		return err
	})
	if _, err := archiving.StartSavedSearch(b.ctx, b.start("k")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("start whose saved search vanished = %v, want ErrNotFound", err)
	}
	rec := b.claimRow(t, "k")
	if rec == nil || rec.Status != idempotency.StatusCompleted || rec.ResourceID != "" {
		t.Fatalf("claim = %+v, want completed with no resource", rec)
	}
	var answer map[string]any
	if err := json.Unmarshal(rec.Response, &answer); err != nil || answer["error"] != "not_found" {
		t.Errorf("stored answer = %s, want {\"error\":\"not_found\"}", rec.Response)
	}

	// Even once the saved search is back, the key answers what it answered.
	if _, err := b.db.Exec(b.ctx, `UPDATE agent.saved_searches SET archived_at = NULL WHERE id = $1`, b.search.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.starter.StartSavedSearch(b.ctx, b.start("k")); !errors.Is(err, ErrNotFound) {
		t.Errorf("repeat = %v, want the stored ErrNotFound", err)
	}
	b.wantCounts(t, 0, 0)
}

func TestRetryableFailureReleasesTheClaim(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fail func(cancel context.CancelFunc) error
		want error
	}{
		{"cancelled context", func(cancel context.CancelFunc) error { cancel(); return context.Canceled }, context.Canceled},
		{"lost connection", func(context.CancelFunc) error { return errLostConnection }, errLostConnection},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx, cancel := context.WithCancel(b.ctx)
			defer cancel()
			var once sync.Once
			failing := b.newStarter(func(context.Context) error {
				var err error
				once.Do(func() { err = tt.fail(cancel) })
				return err
			})
			_, err := failing.StartSavedSearch(ctx, b.start("k"))
			if !errors.Is(err, tt.want) {
				t.Fatalf("start = %v, want %v", err, tt.want)
			}
			if n := b.count(t, "claims"); n != 0 {
				t.Errorf("%d claims left after a retryable failure, want 0 (released)", n)
			}
			b.wantCounts(t, 0, 0)
			res, err := failing.StartSavedSearch(b.ctx, b.start("k"))
			if err != nil || !res.Created {
				t.Errorf("retry = %+v, %v; want a new Run", res, err)
			}
			b.wantCounts(t, 1, 1)
		})
	}
}

var errLostConnection = errors.New("test: connection lost")

// prepareWithoutRun prepares p's start and takes its Run away again: the
// state a start of an earlier version of searchd left when it crashed
// between its preparation's commit and its Run's. The claim, completed by
// the production code, stays as it stored it.
func (b bundle) prepareWithoutRun(t *testing.T, p SavedSearchStart, hash string) *prepared {
	t.Helper()
	options, err := json.Marshal(p.Options.Normalize())
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.starter.prepare(b.ctx, admit{SavedSearchStart: p, hash: hash, options: options})
	if err != nil || !res.Created {
		t.Fatalf("prepare = %+v, %v; want a Run admitted with its preparation", res, err)
	}
	tag, err := b.db.Exec(b.ctx, `DELETE FROM agent.runs WHERE id = $1`, res.Run.ID)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("deleting Run %s: %v, %v", res.Run.ID, tag, err)
	}
	return &prepared{Snapshot: res.Snapshot, SavedSearchName: *res.Run.Name}
}

func TestCompletedPreparationIsAdmittedWithoutANewSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.start("k")
	hash := SavedSearchRequestHash(b.search.ID, p.Options)
	// A start of an earlier version of searchd (which admitted the Run in a
	// transaction of its own) that crashed after its preparation, before
	// admission.
	prep := b.prepareWithoutRun(t, p, hash)
	b.wantCounts(t, 1, 0)
	// The Run is admitted now, on the stored snapshot; the start that
	// prepared it was the one to answer 201, so this one is a repeat.
	res, err := b.starter.StartSavedSearch(b.ctx, p)
	if err != nil || res.Created || res.Run == nil || res.Snapshot.ID != prep.Snapshot.ID {
		t.Errorf("start after the crash = %+v, %v; want a Run on snapshot %s, answered as a repeat (200)", res, err, prep.Snapshot.ID)
	}
	b.wantCounts(t, 1, 1)
}

func TestKeyReusedForDifferentOptions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Conflict at the claim: the key is claimed for other options.
	other := SavedSearchRequestHash(b.search.ID, StartOptions{MaxResults: 7})
	if _, err := b.plane.Claim(b.ctx, b.org, idempotency.ScopeSavedSearchStart, "k1", other, idempotency.SavedSearchStartLease); err != nil {
		t.Fatal(err)
	}
	if _, err := b.starter.StartSavedSearch(b.ctx, b.start("k1")); !errors.Is(err, ErrKeyReused) {
		t.Errorf("start on a key claimed for other options = %v, want ErrKeyReused", err)
	}
	// Conflict at the Run.
	if _, err := b.starter.StartSavedSearch(b.ctx, b.start("k2")); err != nil {
		t.Fatal(err)
	}
	p := b.start("k2")
	p.Options.Note = "different"
	if _, err := b.starter.StartSavedSearch(b.ctx, p); !errors.Is(err, ErrKeyReused) || !errors.Is(err, runs.ErrKeyReused) {
		t.Errorf("start with other options = %v, want ErrKeyReused", err)
	}
	for name, bad := range map[string]StartOptions{
		"max_results 0 after defaults is fine, 1001 is not": {MaxResults: 1001},
		"negative max_results":                              {MaxResults: -1},
		"long note":                                         {Note: string(make([]byte, 501))},
	} {
		p := b.start("k3")
		p.Options = bad
		if _, err := b.starter.StartSavedSearch(b.ctx, p); !errors.Is(err, ErrInvalid) {
			t.Errorf("start(%s) = %v, want ErrInvalid", name, err)
		}
	}
}

func TestRequestHashNormalization(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	decode := func(body string) StartOptions {
		var o StartOptions
		if body != "" {
			if err := json.Unmarshal([]byte(body), &o); err != nil {
				t.Fatalf("decoding %q: %v", body, err)
			}
		}
		return o
	}
	base := SavedSearchRequestHash(id, decode(`{"max_results":100,"note":""}`))
	tests := []struct {
		name  string
		id    uuid.UUID
		body  string
		equal bool
	}{
		{"key order and white space", id, "{ \"note\" : \"\",\n\t\"max_results\" : 100 }", true},
		{"omitted max_results", id, `{"note":""}`, true},
		{"omitted note", id, `{"max_results":100}`, true},
		{"empty object", id, `{}`, true},
		{"no body", id, ``, true},
		{"other max_results", id, `{"max_results":99}`, false},
		{"other note", id, `{"note":"x"}`, false},
		{"other saved search", uuid.New(), `{}`, false},
	}
	for _, tt := range tests {
		got := SavedSearchRequestHash(tt.id, decode(tt.body))
		if (got == base) != tt.equal {
			t.Errorf("SavedSearchRequestHash(%s: %s) = %s, base %s; want equal %v", tt.name, tt.body, got, base, tt.equal)
		}
	}

	direct := func(kind, name, input string) string {
		h, err := DirectRequestHash(kind, name, json.RawMessage(input))
		if err != nil {
			t.Fatalf("DirectRequestHash(%s): %v", input, err)
		}
		return h
	}
	dbase := direct("capability", "n", `{"a":1,"b":{"c":[1,2],"d":"x"}}`)
	directTests := []struct {
		name               string
		kind, cname, input string
		equal              bool
	}{
		{"key order and white space", "capability", "n", "{ \"b\": {\"d\":\"x\", \"c\":[1, 2]},\n\"a\":1 }", true},
		{"escaped character", "capability", "n", `{"a":1,"b":{"c":[1,2],"d":"\u0078"}}`, true},
		{"array order", "capability", "n", `{"a":1,"b":{"c":[2,1],"d":"x"}}`, false},
		{"other value", "capability", "n", `{"a":2,"b":{"c":[1,2],"d":"x"}}`, false},
		{"other kind", "definition", "n", `{"a":1,"b":{"c":[1,2],"d":"x"}}`, false},
		{"other name", "capability", "m", `{"a":1,"b":{"c":[1,2],"d":"x"}}`, false},
	}
	for _, tt := range directTests {
		if got := direct(tt.kind, tt.cname, tt.input); (got == dbase) != tt.equal {
			t.Errorf("DirectRequestHash(%s) = %s, base %s; want equal %v", tt.name, got, dbase, tt.equal)
		}
	}
	if empty, null, obj := direct("capability", "n", ""), direct("capability", "n", "null"), direct("capability", "n", "{}"); empty != obj || null != obj {
		t.Errorf("empty, null and {} inputs hash %s, %s, %s; want equal", empty, null, obj)
	}
	if direct("capability", "n", "{}") == SavedSearchRequestHash(uuid.Nil, StartOptions{}) {
		t.Error("a direct hash equals a saved-search hash")
	}
	if _, err := DirectRequestHash("capability", "n", json.RawMessage(`[]`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("DirectRequestHash([]) = %v, want ErrInvalid", err)
	}
}

func TestLargeSnapshotIsStoredInTheClaimByReference(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// 4000 items of 200 characters: 800 KB, twelve times the store limit
	// and within savedsearch.MaxBaselineBytes.
	items := make([]string, 4000)
	for i := range items {
		items[i] = strings.Repeat(fmt.Sprintf("%08d", i), 25)
	}
	if _, err := b.searches.ReplaceBaseline(b.ctx, b.org, b.search.ID, savedsearch.Baseline{Items: items}); err != nil {
		t.Fatal(err)
	}
	small := b.start("small")
	other, err := b.searches.Create(b.ctx, b.org, savedsearch.CreateParams{Name: "small", Brief: savedsearch.Brief{Query: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	small.SavedSearchID = other.ID
	for _, tt := range []struct {
		p      SavedSearchStart
		inline bool
	}{
		{b.start("large"), false},
		{small, true},
	} {
		prep := b.prepareWithoutRun(t, tt.p, SavedSearchRequestHash(tt.p.SavedSearchID, tt.p.Options))
		rec := b.claimRow(t, tt.p.IdempotencyKey)
		var stored struct {
			Snapshot map[string]json.RawMessage `json:"snapshot"`
			Ref      *idempotency.ResourceRef   `json:"resource_ref"`
		}
		if err := json.Unmarshal(rec.Response, &stored); err != nil {
			t.Fatal(err)
		}
		_, hasBrief := stored.Snapshot["brief"]
		if hasBrief != tt.inline || len(rec.Response) > idempotency.DefaultMaxResponseBytes {
			t.Errorf("%s: stored answer of %d bytes holds the brief %v, want %v", tt.p.IdempotencyKey, len(rec.Response), hasBrief, tt.inline)
		}
		if !tt.inline && (stored.Ref == nil || stored.Ref.Type != ResourceType || stored.Ref.ID != prep.Snapshot.ID.String()) {
			t.Errorf("%s: stored answer %.200s, want a reference to snapshot %s", tt.p.IdempotencyKey, rec.Response, prep.Snapshot.ID)
		}
		if rec.ResourceType != ResourceType || rec.ResourceID != prep.Snapshot.ID.String() {
			t.Errorf("%s: claim names resource %s/%s, want the snapshot", tt.p.IdempotencyKey, rec.ResourceType, rec.ResourceID)
		}
		// The start resumes from the completed claim, through the
		// reference for the large one, and its replay answers the same.
		res, err := b.starter.StartSavedSearch(b.ctx, tt.p)
		if err != nil || res.Created || res.Snapshot.ID != prep.Snapshot.ID || *res.Run.Name != prep.SavedSearchName {
			t.Errorf("%s: start from the stored answer = %+v, %v; want a Run on snapshot %s", tt.p.IdempotencyKey, res, err, prep.Snapshot.ID)
		}
		again, err := b.starter.StartSavedSearch(b.ctx, tt.p)
		if err != nil || again.Created || again.Run.ID != res.Run.ID || again.Snapshot.ID != prep.Snapshot.ID ||
			again.Snapshot.ContentHash != prep.Snapshot.ContentHash {
			t.Errorf("%s: replay = %+v, %v; want Run %s on snapshot %s", tt.p.IdempotencyKey, again, err, res.Run.ID, prep.Snapshot.ID)
		}
	}
	b.wantCounts(t, 2, 2)
}

// TestNewStartCommitsTwiceInFiveRoundTrips counts, with a tracer on the
// pool, what a new saved-search start costs the database: the claim's
// commit and the preparation's, in at most five round trips; a replay is
// one statement and commits nothing. PostgreSQL's own count of write
// transactions (transaction ids handed out) must agree with the tracer.
// Not parallel, so no other test of this binary hands out transaction ids
// meanwhile.
func TestNewStartCommitsTwiceInFiveRoundTrips(t *testing.T) {
	tracer := &pgtest.Tracer{}
	db := pgtest.NewTracedDB(t, tracer)
	b := newBundle(t, db)
	xid := func() int64 {
		t.Helper()
		var x int64
		// txid_current() hands out an id itself, so consecutive calls
		// differ by one plus the write transactions in between.
		if err := b.db.QueryRow(b.ctx, `SELECT txid_current()`).Scan(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	// Warm the connection's statement cache: a statement's first use on a
	// connection costs one more round trip, to prepare it.
	if _, err := b.starter.StartSavedSearch(b.ctx, b.start("warm")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		key := fmt.Sprintf("k%d", i)
		x0 := xid()
		before := tracer.Counts()
		res, err := b.starter.StartSavedSearch(b.ctx, b.start(key))
		got := tracer.Counts().Sub(before)
		writes := xid() - x0 - 1
		if err != nil || !res.Created {
			t.Fatalf("new start = %+v, %v", res, err)
		}
		t.Logf("new start %s: %d commits, %d round trips, %d statements", key, got.Commits, got.RoundTrips, got.Statements)
		if pgtest.Citus() {
			// The transactions run on a worker: the coordinator's
			// transaction ids do not count them (and the Citus
			// maintenance daemons of every database of the cluster hand
			// out their own meanwhile). The tracer's counts stand.
			writes = 2
		}
		if got.Commits != 2 || got.RoundTrips > 5 || writes != 2 {
			t.Errorf("new start %s: %d commits (PostgreSQL: %d write transactions) in %d round trips (%d statements); want 2 commits in at most 5",
				key, got.Commits, writes, got.RoundTrips, got.Statements)
		}

		x0 = xid()
		before = tracer.Counts()
		again, err := b.starter.StartSavedSearch(b.ctx, b.start(key))
		got = tracer.Counts().Sub(before)
		writes = xid() - x0 - 1
		if err != nil || again.Created || again.Run.ID != res.Run.ID {
			t.Fatalf("replay = %+v, %v", again, err)
		}
		if pgtest.Citus() {
			writes = 0 // as above
		}
		if got.Statements != 1 || got.RoundTrips != 1 || got.Commits != 0 || writes != 0 {
			t.Errorf("replay %s: %d statements in %d round trips, %d commits (PostgreSQL: %d write transactions); want 1 statement and no commit",
				key, got.Statements, got.RoundTrips, got.Commits, writes)
		}
	}
	b.wantCounts(t, 4, 4)
}

// TestSavedSearchRequestHashWritesCanonjsonsBytes pins the direct writer of
// the saved-search request document to canonjson's bytes, so no stored
// hash changes: notes that take the direct path and notes that need
// escaping, every max_results bound, random ids.
func TestSavedSearchRequestHashWritesCanonjsonsBytes(t *testing.T) {
	t.Parallel()
	notes := []string{"", "a", "plain ASCII note, with punctuation: ~!@#$%^&*()_+`-={}[]|:;'<>?,./",
		`quote "x"`, `back\slash`, "tab\there", "line\nbreak", "ctrl\x01", "del\x7f", "é accent", "emoji 🎉",
		"\u2028 separator", "<html>&amp;", strings.Repeat("x", MaxNoteLen)}
	for i := range 200 {
		b := make([]byte, i%40)
		for j := range b {
			b[j] = byte(0x20 + (i*31+j*7)%95)
		}
		notes = append(notes, string(b))
	}
	for _, note := range notes {
		for _, max := range []int{0, 1, 50, DefaultMaxResults, MaxMaxResults} {
			id := uuid.New()
			o := StartOptions{MaxResults: max, Note: note}
			want := hashDoc(savedSearchHashDomain, canonicalSavedSearchRequest(id, o.Normalize()))
			if got := SavedSearchRequestHash(id, o); got != want {
				t.Errorf("SavedSearchRequestHash(%s, %+v) = %s, canonjson's document hashes %s", id, o, got, want)
			}
		}
	}
}

// TestAdmittedIsCalledOncePerNewRun: Config.Admitted (the binary wakes its
// dispatcher with it) is called once for each start that admitted a new
// Run, after its commit, and never for a replay, a refusal or concurrent
// callers of one key that found the Run admitted.
func TestAdmittedIsCalledOncePerNewRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var calls atomic.Int32
	starter := mustStarter(b.deps, Config{Admitted: func() {
		// After the commit: the Run (and its dispatch) is visible to
		// another connection.
		var n int
		if err := b.db.QueryRow(context.Background(), `SELECT count(*) FROM agent.run_dispatches WHERE organization_id = $1`,
			b.org).Scan(&n); err != nil || n <= int(calls.Load()) {
			t.Errorf("Admitted called with %d dispatches committed (%v), want more than %d", n, err, calls.Load())
		}
		calls.Add(1)
	}})
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if _, err := starter.StartSavedSearch(b.ctx, b.start("one")); err != nil && !errors.As(err, new(*idempotency.InFlightError)) {
				t.Errorf("StartSavedSearch: %v", err)
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("10 concurrent starts of one key called Admitted %d times, want 1", n)
	}
	if _, err := starter.StartSavedSearch(b.ctx, b.start("one")); err != nil {
		t.Fatal(err)
	}
	direct := DirectStart{Org: b.org, Kind: runs.KindCapability, Name: "enrich.company", IdempotencyKey: "d1"}
	for range 2 {
		if _, err := starter.StartDirect(b.ctx, direct); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := starter.StartSavedSearch(b.ctx, SavedSearchStart{Org: b.org, SavedSearchID: uuid.New(), IdempotencyKey: "gone"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("start of an absent saved search = %v, want ErrNotFound", err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("Admitted called %d times after a replay, a new direct Run, its replay and a refusal, want 2", n)
	}
}
