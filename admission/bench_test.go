package admission

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/runevents"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/pgtest/benchkit"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
)

// TestStartBench measures saved-search starts in process, on a durable
// PostgreSQL (fsync, synchronous_commit and full_page_writes on: a commit
// waits for its WAL flush, as users run it), against raw-SQL baselines
// measured in the same run:
//
//   - new starts: the Starter against a raw copy of today's two-commit flow
//     (the very statements and batches the Starter sends, checked before
//     measuring) and a raw copy of the three-commit flow it replaced (claim;
//     freeze, snapshot and completion; Run insert: nine statements, nine
//     round trips);
//   - replays: the Starter against its one statement, issued raw.
//
// At 1, 4, 16 and 64 concurrent clients, each system gets its own pool of
// as many connections as clients, each with a pgtest.Tracer; rounds
// alternate the systems, rotating which goes first. It prints PostgreSQL's
// settings, every round, medians with min and max, the ratios (of the
// medians, and the range of the rounds' own ratios), round trips,
// statements and commits per call from the tracers, and allocations per
// replay. A measurement, not a timed assertion, so it runs only when
// asked:
//
//	SEARCHD_BENCH=1 go test -run TestStartBench -v ./admission/
//
// SEARCHD_BENCH_ROUNDS (default 5), SEARCHD_BENCH_SECONDS (default 2 per
// round and system; fractions allowed), SEARCHD_BENCH_CLIENTS (default
// "1,4,16,64") and SEARCHD_BENCH_ONLY ("new starts" or "replays") size it.
// Profile the replay path with
//
//	SEARCHD_BENCH=1 SEARCHD_BENCH_ONLY=replays SEARCHD_BENCH_CLIENTS=16 \
//	  go test -run TestStartBench -cpuprofile /tmp/replay.pprof ./admission/
//	go tool pprof -top -cum admission.test /tmp/replay.pprof
func TestStartBench(t *testing.T) {
	benchkit.Asked(t)
	rounds := benchkit.Int("SEARCHD_BENCH_ROUNDS", 5)
	phase := benchPhase(t)
	var clientCounts []int
	for _, f := range strings.Split(cmp.Or(os.Getenv("SEARCHD_BENCH_CLIENTS"), "1,4,16,64"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 256 {
			t.Fatalf("SEARCHD_BENCH_CLIENTS=%q: want client counts from 1 to 256", os.Getenv("SEARCHD_BENCH_CLIENTS"))
		}
		clientCounts = append(clientCounts, n)
	}
	only := os.Getenv("SEARCHD_BENCH_ONLY")

	ctx := context.Background()
	dbURL := pgtest.NewDurableDBURL(t)
	fmt.Printf("\nsaved-search starts in process: the Starter against raw SQL, on a durable database\n")
	fmt.Printf("database    %s\n", pgtest.DurableSettings(t))
	fmt.Printf("load        load average %s; %d rounds of %s per system, alternating, first system rotating\n",
		benchkit.LoadAverage(), rounds, phase)

	admin := benchkit.Pool{}.Open(t, dbURL)
	org := uuid.New()
	searches := seedBench(t, admin, org, 100, 50)
	fmt.Printf("seed        1 organization, %d saved searches with %d baseline items each\n\n", len(searches), 50)

	// open returns a pool of n connections, opened up front, with a tracer.
	open := func(n int) (*pgxpool.Pool, *pgtest.Tracer) {
		tr := &pgtest.Tracer{}
		return benchkit.Pool{MaxConns: n, Eager: true, Tracer: tr}.Open(t, dbURL), tr
	}
	const actor = "bench"
	key := func(prefix string, n int) string { return fmt.Sprintf("%s-%d", prefix, n) }

	// The SQL check: the raw two-commit flow must send what the Starter
	// sends, batch for batch, or its ratio compares two workloads.
	{
		pool, tr := open(1)
		starter := mustStarter(depsOn(pool, nil), Config{})
		r := rawFlows{pool: pool, org: org, actor: actor}
		p := SavedSearchStart{Org: org, SavedSearchID: searches[0], IdempotencyKey: "probe-" + uuid.NewString(), Actor: actor}
		// Warm both: a statement's first use on a connection prepares it.
		if _, err := starter.StartSavedSearch(ctx, p); err != nil {
			t.Fatal(err)
		}
		if err := r.twoCommits(ctx, searches[0], "probe-"+uuid.NewString()); err != nil {
			t.Fatal(err)
		}
		p.IdempotencyKey = "probe-" + uuid.NewString()
		real, err := tr.Record(func() error { _, err := starter.StartSavedSearch(ctx, p); return err })
		if err != nil {
			t.Fatal(err)
		}
		raw, err := tr.Record(func() error { return r.twoCommits(ctx, searches[0], "probe-"+uuid.NewString()) })
		if err != nil {
			t.Fatal(err)
		}
		if d := diffSQL(real, raw); d != "" {
			t.Fatalf("the raw two-commit flow no longer sends the Starter's SQL (update bench_test.go from the queries.go files): %s", d)
		}
		fmt.Printf("SQL check   the raw two-commit flow sends the Starter's statements, batch for batch:\n            %s\n\n", roundTripList(real))
	}

	type system struct {
		name string
		call func(ctx context.Context, rng *rand.Rand) error
		tr   *pgtest.Tracer
	}
	var summary []benchRow
	var outboxRows []string
	for _, clients := range clientCounts {
		starterPool, starterTr := open(clients)
		rawPool, rawTr := open(clients)
		old3Pool, old3Tr := open(clients)
		noOutboxPool, noOutboxTr := open(clients)
		starter := mustStarter(depsOn(starterPool, nil), Config{})
		raw := rawFlows{pool: rawPool, org: org, actor: actor}
		old3 := rawFlows{pool: old3Pool, org: org, actor: actor}
		noOutbox := rawFlows{pool: noOutboxPool, org: org, actor: actor, noOutbox: true}
		prefix := uuid.NewString()[:8]
		var seq atomic.Int64
		next := func(system string) string { return key(prefix+"-"+system, int(seq.Add(1))) }

		// replayed are starts the Starter admitted, which replays repeat
		// exactly (the saved search is part of the request hash).
		type started struct {
			key    string
			search uuid.UUID
		}
		var (
			mu       sync.Mutex
			replayed []started
		)
		newStarts := []system{
			{"searchd", func(ctx context.Context, rng *rand.Rand) error {
				st := started{next("s"), searches[rng.IntN(len(searches))]}
				res, err := starter.StartSavedSearch(ctx, SavedSearchStart{Org: org, SavedSearchID: st.search,
					IdempotencyKey: st.key, Actor: actor})
				if err == nil && !res.Created {
					err = errors.New("a new key was not admitted")
				}
				if err == nil && rng.IntN(4) == 0 {
					mu.Lock()
					replayed = append(replayed, st)
					mu.Unlock()
				}
				return err
			}, starterTr},
			{"raw 2 commits", func(ctx context.Context, rng *rand.Rand) error {
				return raw.twoCommits(ctx, searches[rng.IntN(len(searches))], next("r2"))
			}, rawTr},
			{"raw 3 commits", func(ctx context.Context, rng *rand.Rand) error {
				return old3.threeCommits(ctx, searches[rng.IntN(len(searches))], next("r3"))
			}, old3Tr},
			{rawNoOutbox, func(ctx context.Context, rng *rand.Rand) error {
				return noOutbox.twoCommits(ctx, searches[rng.IntN(len(searches))], next("r0"))
			}, noOutboxTr},
		}
		replays := []system{
			{"searchd", func(ctx context.Context, rng *rand.Rand) error {
				st := replayed[rng.IntN(len(replayed))]
				res, err := starter.StartSavedSearch(ctx, SavedSearchStart{Org: org, SavedSearchID: st.search,
					IdempotencyKey: st.key, Actor: actor})
				if err == nil && res.Created {
					err = errors.New("a replay admitted a Run")
				}
				return err
			}, starterTr},
			{"raw", func(ctx context.Context, rng *rand.Rand) error {
				_, err := raw.replay(ctx, replayed[rng.IntN(len(replayed))].key)
				return err
			}, rawTr},
		}

		measures := []struct {
			name    string
			systems []system
		}{{"new starts", newStarts}, {"replays", replays}}
		for _, m := range measures {
			if only != "" && only != m.name {
				if m.name == "new starts" {
					// Replays alone: start the keys they repeat, unmeasured.
					runFor(ctx, t, clients, phase, m.systems[0].call)
				}
				continue
			}
			rates := map[string][]float64{}
			counts := map[string]pgtest.Counts{}
			calls := map[string]int{}
			// Warm-up, unmeasured: every connection prepares its statements.
			for _, s := range m.systems {
				runFor(ctx, t, clients, phase/4, s.call)
			}
			if _, err := admin.Exec(ctx, `ANALYZE agent.runs, agent.saved_search_snapshots, agent.idempotency_keys`); err != nil {
				t.Fatal(err)
			}
			for r := range rounds {
				line := fmt.Sprintf("%-10s %2d clients round %d:", m.name, clients, r+1)
				for j := range m.systems {
					s := m.systems[(j+r)%len(m.systems)]
					before := s.tr.Counts()
					n, d := runFor(ctx, t, clients, phase, s.call)
					counts[s.name] = counts[s.name].Add(s.tr.Counts().Sub(before))
					calls[s.name] += n
					rate := float64(n) / d.Seconds()
					rates[s.name] = append(rates[s.name], rate)
					line += fmt.Sprintf("  %s %6.0f/s", s.name, rate)
				}
				fmt.Println(line)
			}
			if m.name == "new starts" {
				// The outbox row's cost: the same raw flow with and without
				// it, measured in the same rounds.
				with, without := rates["raw 2 commits"], rates[rawNoOutbox]
				paired := make([]float64, len(with))
				for i := range with {
					paired[i] = with[i] / without[i]
				}
				outboxRows = append(outboxRows, fmt.Sprintf("%2d clients: raw 2 commits with the outbox row %.0f/s, without %.0f/s: %.2f× [rounds %.2f–%.2f]; "+
					"searchd over the flow without it %.2f×", clients, benchkit.Median(with), benchkit.Median(without), benchkit.Median(with)/benchkit.Median(without),
					slices.Min(paired), slices.Max(paired), benchkit.Median(rates["searchd"])/benchkit.Median(without)))
			}
			base := m.systems[0].name
			for _, s := range m.systems {
				rs, c := rates[s.name], counts[s.name]
				per := func(v int64) float64 { return float64(v) / float64(calls[s.name]) }
				row := benchRow{Measure: m.name, Clients: clients, System: s.name,
					Median: benchkit.Median(rs), Min: slices.Min(rs), Max: slices.Max(rs),
					RoundTrips: per(c.RoundTrips), Statements: per(c.Statements), Commits: per(c.Commits)}
				if s.name != base {
					row.Ratio = benchkit.Median(rates[base]) / row.Median
					paired := make([]float64, len(rs))
					for i := range rs {
						paired[i] = rates[base][i] / rs[i]
					}
					row.RatioMin, row.RatioMax = slices.Min(paired), slices.Max(paired)
				}
				summary = append(summary, row)
			}
		}
		if (only == "" || only == "replays") && clients == clientCounts[0] {
			// Allocations of one replay, measured alone.
			st := replayed[0]
			p := SavedSearchStart{Org: org, SavedSearchID: st.search, IdempotencyKey: st.key, Actor: actor}
			allocs := testing.AllocsPerRun(500, func() {
				if _, err := starter.StartSavedSearch(ctx, p); err != nil {
					t.Fatal(err)
				}
			})
			rawAllocs := testing.AllocsPerRun(500, func() {
				if _, err := raw.replay(ctx, st.key); err != nil {
					t.Fatal(err)
				}
			})
			summary = append(summary, benchRow{Measure: "allocs per replay", System: "searchd", Median: allocs},
				benchRow{Measure: "allocs per replay", System: "raw", Median: rawAllocs, Ratio: allocs / rawAllocs})
		}
	}

	fmt.Printf("\nmedians of %d rounds (min–max); ratio = searchd's median over the baseline's, [range of the rounds' own ratios]\n", rounds)
	fmt.Printf("%-18s %7s %-24s %9s %19s %8s %15s %6s %6s %7s\n", "measure", "clients", "system", "calls/s", "(min–max)",
		"ratio", "[rounds]", "trips", "stmts", "commits")
	for _, r := range summary {
		if r.Measure == "allocs per replay" {
			continue
		}
		ratio, rounds := "", ""
		if r.Ratio != 0 {
			ratio = fmt.Sprintf("%.2f×", r.Ratio)
			rounds = fmt.Sprintf("[%.2f–%.2f]", r.RatioMin, r.RatioMax)
		}
		fmt.Printf("%-18s %7d %-24s %9.0f %19s %8s %15s %6.2f %6.2f %7.2f\n", r.Measure, r.Clients, r.System, r.Median,
			fmt.Sprintf("(%.0f–%.0f)", r.Min, r.Max), ratio, rounds, r.RoundTrips, r.Statements, r.Commits)
	}
	for _, r := range summary {
		if r.Measure == "allocs per replay" {
			fmt.Printf("allocations per replay: %s %.0f\n", r.System, r.Median)
		}
	}
	if len(outboxRows) > 0 {
		fmt.Printf("\nwhat the outbox row (the Run's dispatch, migration 00016) costs a new start: the raw two-commit flow with it " +
			"over the same flow without it (< 1× is slower)\n")
		for _, l := range outboxRows {
			fmt.Println(l)
		}
	}
	fmt.Printf("load average after: %s\n", benchkit.LoadAverage())
	b, err := json.Marshal(summary)
	if err != nil {
		t.Fatal(err)
	}
	// One line for bench/report.
	fmt.Printf("start-bench-json: %s\n", b)
}

// benchRow is one figure of TestStartBench.
type benchRow struct {
	Measure    string  `json:"measure"`
	Clients    int     `json:"clients,omitempty"`
	System     string  `json:"system"`
	Median     float64 `json:"median"`
	Min        float64 `json:"min,omitempty"`
	Max        float64 `json:"max,omitempty"`
	Ratio      float64 `json:"ratio,omitempty"` // searchd over this baseline
	RatioMin   float64 `json:"ratio_min,omitempty"`
	RatioMax   float64 `json:"ratio_max,omitempty"`
	RoundTrips float64 `json:"round_trips,omitempty"`
	Statements float64 `json:"statements,omitempty"`
	Commits    float64 `json:"commits,omitempty"`
}

// runFor runs call from clients goroutines, each with its own random
// source, for d and returns the calls made and the time taken. An error
// fails the test.
func runFor(ctx context.Context, t *testing.T, clients int, d time.Duration, call func(ctx context.Context, rng *rand.Rand) error) (int, time.Duration) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	rngs := make([]*rand.Rand, clients)
	for c := range rngs {
		rngs[c] = rand.New(rand.NewPCG(uint64(c), seed))
	}
	return clientLoop(t, clients, d, func(c, _ int) error { return call(ctx, rngs[c]) })
}

// clientLoop runs call(c, i) from clients goroutines for d, c the client
// and i its call's number from 0, and returns the calls that succeeded and
// the time taken. A client stops at its first error, which fails the test.
func clientLoop(t *testing.T, clients int, d time.Duration, call func(c, i int) error) (int, time.Duration) {
	t.Helper()
	lat, elapsed, err := benchkit.Clients(clients, d, nil, call)
	if err != nil {
		t.Fatal(err)
	}
	return len(lat), elapsed
}

// benchPhase is SEARCHD_BENCH_SECONDS (default 2; fractions allowed) as a
// duration; any other value fails t.
func benchPhase(t *testing.T) time.Duration {
	v := cmp.Or(os.Getenv("SEARCHD_BENCH_SECONDS"), "2")
	seconds, err := strconv.ParseFloat(v, 64)
	if err != nil || seconds <= 0 {
		t.Fatalf("SEARCHD_BENCH_SECONDS=%q: want a positive number", v)
	}
	return time.Duration(seconds * float64(time.Second))
}

// seedBench creates n saved searches of org with items baseline items.
func seedBench(t *testing.T, db *pgxpool.Pool, org uuid.UUID, n, items int) []uuid.UUID {
	t.Helper()
	store := savedsearch.NewStore(db)
	ids := make([]uuid.UUID, n)
	for i := range ids {
		list := make([]string, items)
		for j := range list {
			list[j] = fmt.Sprintf("https://example.com/results/%d/%d", i, j)
		}
		ss, err := store.Create(context.Background(), org, savedsearch.CreateParams{
			Name:     fmt.Sprintf("bench saved search %d", i),
			Brief:    savedsearch.Brief{Query: fmt.Sprintf("laptops under 1000 euros, batch %d", i), Filters: map[string]any{"lang": "en", "max_age_days": 30}},
			Baseline: savedsearch.Baseline{Items: list},
			Actor:    "bench",
		})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = ss.ID
	}
	return ids
}

// diffSQL describes the first difference between two recordings of round
// trips, "" when they are the same.
func diffSQL(a, b [][]string) string {
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	if len(a) != len(b) {
		return fmt.Sprintf("%d round trips against %d:\n%s\n%s", len(a), len(b), roundTripList(a), roundTripList(b))
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return fmt.Sprintf("round trip %d: %d statements against %d", i+1, len(a[i]), len(b[i]))
		}
		for j := range a[i] {
			if norm(a[i][j]) != norm(b[i][j]) {
				return fmt.Sprintf("round trip %d, statement %d:\n  Starter: %s\n  raw:     %s", i+1, j+1, norm(a[i][j]), norm(b[i][j]))
			}
		}
	}
	return ""
}

// roundTripList names the statements of each round trip.
func roundTripList(trips [][]string) string {
	parts := make([]string, len(trips))
	for i, trip := range trips {
		names := make([]string, len(trip))
		for j, s := range trip {
			names[j] = rawNames[strings.Join(strings.Fields(s), " ")]
			if names[j] == "" {
				names[j] = "«" + strings.Join(strings.Fields(s), " ")[:min(30, len(strings.Join(strings.Fields(s), " ")))] + "…»"
			}
		}
		parts[i] = "[" + strings.Join(names, ", ") + "]"
	}
	return strings.Join(parts, " ")
}

// The statements of a start, copied from the queries.go files of runs,
// savedsearch, idempotency and snapshot (and admission's begin and
// commit). The SQL check fails when the Starter sends anything else.
const (
	rawRunColumns = `r.id, r.organization_id, r.kind, r.start_key, r.request_hash,
	r.saved_search_id, r.snapshot_id, r.name, r.status, r.options, r.input,
	r.created_by, r.created_at, r.retain_until,
	r.version, coalesce(r.updated_at, r.created_at), r.result_ref, r.error_code, r.error_message`
	rawLookup = `
SELECT ` + rawRunColumns + `,
	sn.id, sn.saved_search_id, sn.saved_search_version, sn.content_hash, sn.created_at
FROM agent.runs r
LEFT JOIN agent.saved_search_snapshots sn
	ON sn.organization_id = r.organization_id AND sn.id = r.snapshot_id
WHERE r.organization_id = $1 AND r.start_key = $2
	AND r.retain_until > coalesce($3::timestamptz, now())`
	rawExists = `
SELECT EXISTS (
	SELECT 1 FROM agent.saved_searches s
	WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL)`
	rawRecordColumns = `k.id, k.organization_id, k.scope, k.key, k.request_hash, k.status,
	k.lease_token, k.resource_type, k.resource_id, k.response,
	k.claimed_at, k.lease_expires_at, k.retain_until, k.waited`
	rawClaimInsert = `
INSERT INTO agent.idempotency_keys AS k
	(id, organization_id, scope, key, request_hash, status, lease_token,
	 claimed_at, lease_expires_at, retain_until)
VALUES (@id::uuid, @org::uuid, @scope::text, @key::text, @request_hash::text, 'processing', @lease_token::uuid,
	coalesce(@now::timestamptz, now()),
	coalesce(@now::timestamptz, now()) + @lease_us::bigint * interval '1 microsecond',
	coalesce(@now::timestamptz, now()) + greatest(@lease_us::bigint, @retention_us::bigint) * interval '1 microsecond')
ON CONFLICT (organization_id, scope, key) DO NOTHING
RETURNING ` + rawRecordColumns + `, k.claimed_at`
	rawFreezeRead = `
SELECT s.name, s.brief, s.version, b.items, b.cursor, now()
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.organization_id = s.organization_id AND b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL`
	rawSnapshotInsert = `
INSERT INTO agent.saved_search_snapshots
	(id, organization_id, saved_search_id, saved_search_version, saved_search_name,
	 brief, baseline, content_hash, created_by, origin, created_at, claim_id)
VALUES (@id::uuid, @org::uuid, @saved_search_id::uuid, @version::bigint, @name::text,
	@brief::jsonb, @baseline::jsonb, @content_hash::text, @created_by::text, @origin::text, @created_at::timestamptz,
	@claim_id::uuid)`
	rawCompleteOrAbort = `
WITH done AS (
	UPDATE agent.idempotency_keys AS k
	SET status = 'completed', resource_type = $4, resource_id = $5, response = $6
	WHERE k.organization_id = $1 AND k.id = $2 AND k.lease_token = $3 AND k.status = 'processing'
	RETURNING k.waited)
SELECT CASE WHEN EXISTS (SELECT FROM done) THEN (SELECT d.waited FROM done d)
	ELSE agent.idempotency_fence_lost($2::uuid) END`
	rawRunInsert = `
INSERT INTO agent.runs AS r
	(id, organization_id, kind, start_key, request_hash, saved_search_id, snapshot_id,
	 name, status, options, input, created_by, created_at, retain_until)
VALUES (@id::uuid, @org::uuid, @kind::text, @start_key::text, @request_hash::text,
	@saved_search_id::uuid, @snapshot_id::uuid, @name::text, 'queued', @options::jsonb,
	@input::jsonb, @created_by::text, coalesce(@now::timestamptz, now()),
	coalesce(@now::timestamptz, now()) + @retention_us::bigint * interval '1 microsecond')
ON CONFLICT (organization_id, start_key) DO NOTHING
RETURNING ` + rawRunColumns
	// rawDispatchInsert writes the admitted Run's outbox row (migration
	// 00016), the statement after rawRunInsert in the same transaction; a
	// flow without it is the baseline of what the outbox row costs a new
	// start.
	rawDispatchInsert = `
INSERT INTO agent.run_dispatches (run_id, organization_id, next_attempt_at, created_at)
SELECT r.id, r.organization_id, r.created_at, r.created_at
FROM agent.runs r
WHERE r.organization_id = @org::uuid AND r.id = @id::uuid`

	// The three-commit flow's own statements, as they stood before it was
	// replaced: the freeze read without the clock, the snapshot stamped by
	// its insert, the completion answering the whole row.
	oldFreezeRead = `
SELECT s.name, s.brief, s.version, b.items, b.cursor
FROM agent.saved_searches s
JOIN agent.saved_search_baselines b ON b.saved_search_id = s.id
WHERE s.organization_id = $1 AND s.id = $2 AND s.archived_at IS NULL`
	oldSnapshotInsert = `
INSERT INTO agent.saved_search_snapshots
	(id, organization_id, saved_search_id, saved_search_version, saved_search_name,
	 brief, baseline, content_hash, created_by, created_at)
VALUES ($1::uuid, $2::uuid, $3::uuid, $4::bigint, $5::text,
	$6::jsonb, $7::jsonb, $8::text, $9::text, now())
RETURNING created_at`
	oldClaimComplete = `
UPDATE agent.idempotency_keys AS k
SET status = 'completed', resource_type = $4, resource_id = $5, response = $6
WHERE k.organization_id = $1 AND k.id = $2 AND k.lease_token = $3 AND k.status = 'processing'
RETURNING ` + rawRecordColumns + `, coalesce($7::timestamptz, now())`
)

// rawEventInsert writes the admitted Run's webhook deliveries (migration
// 00027), the statement after rawDispatchInsert: the very SQL runs sends
// (internal/runevents), which writes nothing for an organization without
// endpoints, as the benchmark's has none.
var rawEventInsert = runevents.Insert

// rawNoOutbox names the baseline without the outbox row.
const rawNoOutbox = "raw 2 commits, no outbox"

var rawNames = func() map[string]string {
	m := map[string]string{}
	for name, sql := range map[string]string{
		"runWithSnapshotByStartKey": rawLookup, "savedSearchExists": rawExists, "claimInsert": rawClaimInsert,
		"begin": "begin", "savedSearchFreezeRead": rawFreezeRead, "claimCompleteOrAbort": rawCompleteOrAbort,
		"snapshotInsert": rawSnapshotInsert, "runInsert": rawRunInsert, "dispatchInsert": rawDispatchInsert,
		"eventInsert": rawEventInsert,
		"commit":      "commit",
	} {
		m[strings.Join(strings.Fields(sql), " ")] = name
	}
	return m
}()

// rawFlows are the baselines: a start's statements straight through pgx,
// with the least Go around them (a plain SHA-256 for the hashes, no
// validation, no canonical JSON).
type rawFlows struct {
	pool  *pgxpool.Pool
	org   uuid.UUID
	actor string
	// noOutbox admits the Run without its outbox rows (rawDispatchInsert,
	// rawEventInsert): the baseline of what they cost.
	noOutbox bool
}

type rawRun struct {
	ID, Org                  uuid.UUID
	Kind, StartKey, Hash     string
	SavedSearch, Snapshot    *uuid.UUID
	Name                     *string
	Status                   string
	Options, Input           json.RawMessage
	CreatedBy                *string
	CreatedAt, RetainUntil   time.Time
	Version                  int64
	UpdatedAt                time.Time
	ResultRef, ErrCode       *string
	ErrMessage               *string
	SnapID, SnapSearch       *uuid.UUID
	SnapVersion              *int64
	SnapHash                 *string
	SnapCreated              *time.Time
	claimID, token           uuid.UUID
	snapshot                 rawSnapshot
	leaseExpires, retain, at time.Time
}

func (r *rawRun) runDest() []any {
	return []any{&r.ID, &r.Org, &r.Kind, &r.StartKey, &r.Hash, &r.SavedSearch, &r.Snapshot, &r.Name, &r.Status,
		&r.Options, &r.Input, &r.CreatedBy, &r.CreatedAt, &r.RetainUntil,
		&r.Version, &r.UpdatedAt, &r.ResultRef, &r.ErrCode, &r.ErrMessage}
}

type rawSnapshot struct {
	ID                 uuid.UUID       `json:"id"`
	OrganizationID     uuid.UUID       `json:"organization_id"`
	SavedSearchID      uuid.UUID       `json:"saved_search_id"`
	SavedSearchVersion int64           `json:"saved_search_version"`
	Brief              json.RawMessage `json:"brief"`
	Baseline           struct {
		Items  []string `json:"items"`
		Cursor *string  `json:"cursor"`
	} `json:"baseline"`
	ContentHash string    `json:"content_hash"`
	CreatedBy   *string   `json:"created_by"`
	CreatedAt   time.Time `json:"created_at"`
	name        string
}

// replay is the floor of a replay: the one statement and its scan, with
// pgx's cheapest uuid encoding and decoding (pgtype.UUID, [16]byte).
func (f rawFlows) replay(ctx context.Context, key string) (*rawReplay, error) {
	var r rawReplay
	err := f.pool.QueryRow(ctx, rawLookup, pgtype.UUID{Bytes: f.org, Valid: true}, "saved_search:"+key, nil).Scan(
		&r.ID, &r.Org, &r.Kind, &r.StartKey, &r.Hash, &r.SavedSearch, &r.Snapshot, &r.Name, &r.Status,
		&r.Options, &r.Input, &r.CreatedBy, &r.CreatedAt, &r.RetainUntil,
		&r.Version, &r.UpdatedAt, &r.ResultRef, &r.ErrCode, &r.ErrMessage,
		&r.SnapID, &r.SnapSearch, &r.SnapVersion, &r.SnapHash, &r.SnapCreated)
	return &r, err
}

type rawReplay struct {
	ID, Org                                   [16]byte
	Kind, StartKey, Hash, Status              string
	SavedSearch, Snapshot, SnapID, SnapSearch pgtype.UUID
	Name, CreatedBy, SnapHash                 *string
	Options, Input                            json.RawMessage
	CreatedAt, RetainUntil                    time.Time
	Version                                   int64
	UpdatedAt                                 time.Time
	ResultRef, ErrCode, ErrMessage            *string
	SnapVersion                               *int64
	SnapCreated                               *time.Time
}

func rawHash(ssID uuid.UUID) string {
	sum := sha256.Sum256([]byte(ssID.String() + "\n100\n"))
	return hex.EncodeToString(sum[:])
}

// begin runs what both flows start with: the lookup (a miss), the check
// that the saved search is live, and the claim.
func (f rawFlows) begin(ctx context.Context, ssID uuid.UUID, key string, r *rawRun) error {
	hash := rawHash(ssID)
	err := f.pool.QueryRow(ctx, rawLookup, f.org, "saved_search:"+key, nil).
		Scan(append(r.runDest(), &r.SnapID, &r.SnapSearch, &r.SnapVersion, &r.SnapHash, &r.SnapCreated)...)
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("lookup of a new key: %v", err)
	}
	var live bool
	if err := f.pool.QueryRow(ctx, rawExists, f.org, ssID).Scan(&live); err != nil || !live {
		return fmt.Errorf("exists: %v %v", live, err)
	}
	var (
		org                               uuid.UUID
		scope, k, h, status               string
		resType, resID                    *string
		response                          json.RawMessage
		claimedAt, leaseExpires, retained time.Time
		waited                            bool
	)
	return f.pool.QueryRow(ctx, rawClaimInsert, pgx.StrictNamedArgs{
		"id": uuid.New(), "org": f.org, "scope": idempotency.ScopeSavedSearchStart, "key": key, "request_hash": hash,
		"lease_token": uuid.New(), "lease_us": idempotency.SavedSearchStartLease.Microseconds(),
		"retention_us": idempotency.SavedSearchStartRetention.Microseconds(), "now": nil,
	}).
		Scan(&r.claimID, &org, &scope, &k, &h, &status, &r.token, &resType, &resID, &response,
			&claimedAt, &leaseExpires, &retained, &waited, &r.at)
}

func (f rawFlows) scanFreeze(row pgx.Row, r *rawRun, ssID uuid.UUID, withClock bool) error {
	s := &r.snapshot
	*s = rawSnapshot{ID: uuid.New(), OrganizationID: f.org, SavedSearchID: ssID, CreatedBy: &f.actor}
	dest := []any{&s.name, &s.Brief, &s.SavedSearchVersion, &s.Baseline.Items, &s.Baseline.Cursor}
	if withClock {
		dest = append(dest, &s.CreatedAt)
	}
	return row.Scan(dest...)
}

func (s *rawSnapshot) hashAndAnswer() (baseline []byte, answer []byte, err error) {
	if baseline, err = json.Marshal(s.Baseline); err != nil {
		return nil, nil, err
	}
	h := sha256.New()
	h.Write(s.Brief)
	h.Write(baseline)
	s.ContentHash = hex.EncodeToString(h.Sum(nil))
	answer, err = json.Marshal(struct {
		Snapshot        *rawSnapshot `json:"snapshot"`
		SavedSearchName string       `json:"saved_search_name"`
	}{s, s.name})
	return baseline, answer, err
}

// twoCommits is the Starter's flow of a new start: the claim, then one
// transaction of two batches.
func (f rawFlows) twoCommits(ctx context.Context, ssID uuid.UUID, key string) error {
	var r rawRun
	if err := f.begin(ctx, ssID, key, &r); err != nil {
		return err
	}
	conn, err := f.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	first := &pgx.Batch{}
	first.Queue("begin")
	first.Queue(rawFreezeRead, f.org, ssID).QueryRow(func(row pgx.Row) error { return f.scanFreeze(row, &r, ssID, true) })
	if err := conn.SendBatch(ctx, first).Close(); err != nil {
		return err
	}
	s := &r.snapshot
	baseline, answer, err := s.hashAndAnswer()
	if err != nil {
		return err
	}
	options := `{"max_results":100,"note":""}`
	second := &pgx.Batch{}
	second.Queue(rawSnapshotInsert, pgx.StrictNamedArgs{
		"id": s.ID, "org": f.org, "saved_search_id": ssID, "version": s.SavedSearchVersion, "name": s.name,
		"brief": string(s.Brief), "baseline": string(baseline), "content_hash": s.ContentHash,
		"created_by": f.actor, "origin": snapshot.OriginAPI, "created_at": s.CreatedAt, "claim_id": r.claimID,
	})
	f.queueRun(second, ssID, s.ID, key, s.name, options, &r)
	second.Queue(rawCompleteOrAbort, f.org, r.claimID, r.token, ResourceType, s.ID.String(), string(answer))
	second.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return fmt.Errorf("ended with %s", tag)
		}
		return nil
	})
	if err := conn.SendBatch(ctx, second).Close(); err != nil {
		if conn.Conn().PgConn().TxStatus() != 'I' {
			_, _ = conn.Exec(ctx, "rollback")
		}
		return err
	}
	return nil
}

// threeCommits is the flow the Starter replaced: the claim; BEGIN, freeze
// read, snapshot insert, completion, COMMIT, one round trip each; the Run
// insert in a transaction of its own.
func (f rawFlows) threeCommits(ctx context.Context, ssID uuid.UUID, key string) error {
	var r rawRun
	if err := f.begin(ctx, ssID, key, &r); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		if err := f.scanFreeze(tx.QueryRow(ctx, oldFreezeRead, f.org, ssID), &r, ssID, false); err != nil {
			return err
		}
		s := &r.snapshot
		baseline, err := json.Marshal(s.Baseline)
		if err != nil {
			return err
		}
		h := sha256.New()
		h.Write(s.Brief)
		h.Write(baseline)
		s.ContentHash = hex.EncodeToString(h.Sum(nil))
		if err := tx.QueryRow(ctx, oldSnapshotInsert, s.ID, f.org, ssID, s.SavedSearchVersion, s.name, string(s.Brief),
			string(baseline), s.ContentHash, f.actor).Scan(&s.CreatedAt); err != nil {
			return err
		}
		answer, err := json.Marshal(struct {
			Snapshot        *rawSnapshot `json:"snapshot"`
			SavedSearchName string       `json:"saved_search_name"`
		}{s, s.name})
		if err != nil {
			return err
		}
		var (
			id, org, token                              uuid.UUID
			scope, k, h2, status                        string
			resType, resID                              *string
			response                                    json.RawMessage
			claimedAt, leaseExpires, retained, observed time.Time
			waited                                      bool
		)
		return tx.QueryRow(ctx, oldClaimComplete, f.org, r.claimID, r.token, ResourceType, s.ID.String(), string(answer), nil).
			Scan(&id, &org, &scope, &k, &h2, &status, &token, &resType, &resID, &response, &claimedAt, &leaseExpires, &retained,
				&waited, &observed)
	})
	if err != nil {
		return err
	}
	s := &r.snapshot
	b := &pgx.Batch{}
	b.Queue("begin")
	f.queueRun(b, ssID, s.ID, key, s.name, `{"max_results":100,"note":""}`, &r)
	b.Queue("commit")
	return f.pool.SendBatch(ctx, b).Close()
}

// queueRun queues the Run's insert, and its outbox row's unless noOutbox.
func (f rawFlows) queueRun(b *pgx.Batch, ssID, snapID uuid.UUID, key, name, options string, r *rawRun) {
	args := f.runArgs(ssID, snapID, key, name, options)
	b.Queue(rawRunInsert, args).QueryRow(func(row pgx.Row) error { return row.Scan(r.runDest()...) })
	if !f.noOutbox {
		b.Queue(rawDispatchInsert, pgx.StrictNamedArgs{"id": args["id"], "org": args["org"]})
		b.Queue(rawEventInsert, pgx.StrictNamedArgs{"id": args["id"], "org": args["org"]})
	}
}

// runArgs are rawRunInsert's parameters for a saved-search Run.
func (f rawFlows) runArgs(ssID, snapID uuid.UUID, key, name, options string) pgx.StrictNamedArgs {
	return pgx.StrictNamedArgs{
		"id": uuid.New(), "org": f.org, "kind": runs.KindSavedSearch, "start_key": "saved_search:" + key,
		"request_hash": rawHash(ssID), "saved_search_id": ssID, "snapshot_id": snapID, "name": name,
		"options": options, "input": nil, "created_by": f.actor, "retention_us": runs.Retention.Microseconds(),
		"now": nil,
	}
}
