package admission

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/pgtest/benchkit"
)

// TestCitusStartBench measures saved-search starts through the Starter on
// one durable PostgreSQL and on a durable Citus cluster (a coordinator and
// two workers, every node with fsync, synchronous_commit and
// full_page_writes on), side by side in one process, on the same machine:
//
//   - new starts: a fresh key each, spread over many organizations, so on
//     Citus over every shard of both workers;
//   - replays: the keys of the new starts again, each answered by its one
//     statement.
//
// Each system gets a pool of as many connections as clients; rounds
// alternate the systems, rotating which goes first. It prints both
// servers' settings, every round, the medians with min and max, and the
// ratio of Citus to PostgreSQL (of the medians, and the range of the
// rounds' own ratios). On one machine Citus can only cost: every statement
// takes a hop through the coordinator, and three servers share the same
// cores and disk; the figure is that overhead, the price of a cluster that
// grows by adding workers (docs/scaling.md). A measurement, not a timed
// assertion, so it runs only when asked (and needs the citus extension):
//
//	SEARCHD_BENCH=1 go test -run TestCitusStartBench -v ./admission/
//
// SEARCHD_BENCH_ROUNDS (default 5), SEARCHD_BENCH_SECONDS (default 2 per
// round, system and workload; fractions allowed), SEARCHD_BENCH_CITUS_CLIENTS
// (default 16) and SEARCHD_BENCH_CITUS_SHARDS (citus.shard_count, default
// Citus's 32) size it.
func TestCitusStartBench(t *testing.T) {
	benchkit.Asked(t)
	if pgtest.Citus() {
		t.Skip("starts its own PostgreSQL and Citus side by side; run it without " + pgtest.EnvCitus)
	}
	rounds := benchkit.Int("SEARCHD_BENCH_ROUNDS", 5)
	phase := benchPhase(t)
	clients := benchkit.Int("SEARCHD_BENCH_CITUS_CLIENTS", 16)
	shards := benchkit.Int("SEARCHD_BENCH_CITUS_SHARDS", 0)
	const orgs, searchesPerOrg = 32, 4

	ctx := context.Background()
	type system struct {
		name    string
		cluster *pgtest.Cluster
		starter *Starter
		orgs    []benchOrg
		newRate []float64
		replay  []float64
		keys    [][]benchKey // per client, the keys its new starts admitted
	}
	var systems []*system
	for _, opts := range []pgtest.Options{{Durable: true}, {Durable: true, Citus: true, ShardCount: shards}} {
		name := "PostgreSQL"
		if opts.Citus {
			name = "Citus (2 workers)"
		}
		c, err := pgtest.StartWith(ctx, opts)
		if err != nil {
			t.Fatalf("starting %s: %v", name, err)
		}
		t.Cleanup(func() { _ = c.Stop() })
		dbURL, drop, err := c.CreateDB(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(func() { _ = drop() })
		cfg, err := pgxpool.ParseConfig(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns, cfg.MinConns = int32(clients), int32(clients)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s := &system{name: name, cluster: c, starter: mustStarter(depsOn(pool, nil), Config{})}
		for range orgs {
			o := benchOrg{id: uuid.New()}
			o.searches = seedBench(t, pool, o.id, searchesPerOrg, 50)
			s.orgs = append(s.orgs, o)
		}
		settings, err := c.Settings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("%-18s %s\n", name, settings)
		if opts.Citus {
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'agent.idempotency_keys'::regclass`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%-18s a coordinator and 2 workers on this machine, %d shards per distributed table; every node as above\n",
				"", n)
		}
		systems = append(systems, s)
	}
	fmt.Printf("load               load average %s; %d clients; %d organizations with %d saved searches (50 baseline items) each\n",
		benchkit.LoadAverage(), clients, orgs, searchesPerOrg)
	fmt.Printf("rounds             %d of %s per system and workload, alternating, first system rotating\n\n", rounds, phase)

	for r := range rounds {
		order := []*system{systems[r%2], systems[(r+1)%2]}
		for _, s := range order {
			n, keys := benchNewStarts(ctx, t, s.starter, s.orgs, clients, phase, fmt.Sprintf("r%d", r))
			s.newRate = append(s.newRate, n)
			s.keys = keys
		}
		for _, s := range order {
			s.replay = append(s.replay, benchReplays(ctx, t, s.starter, s.keys, phase))
		}
		fmt.Printf("round %d            new starts %s %.0f/s, %s %.0f/s; replays %s %.0f/s, %s %.0f/s\n", r+1,
			systems[0].name, systems[0].newRate[r], systems[1].name, systems[1].newRate[r],
			systems[0].name, systems[0].replay[r], systems[1].name, systems[1].replay[r])
	}
	fmt.Println()
	fmt.Printf("%-12s %-26s %-26s %s\n", "per second", systems[0].name, systems[1].name, "Citus / PostgreSQL")
	for _, w := range []struct {
		name string
		of   func(*system) []float64
	}{
		{"new starts", func(s *system) []float64 { return s.newRate }},
		{"replays", func(s *system) []float64 { return s.replay }},
	} {
		a, b := w.of(systems[0]), w.of(systems[1])
		ratios := make([]float64, len(a))
		for i := range a {
			ratios[i] = b[i] / a[i]
		}
		fmt.Printf("%-12s %-26s %-26s %.2fx (rounds %.2f-%.2f)\n", w.name, spread(a), spread(b),
			benchkit.Median(b)/benchkit.Median(a), slices.Min(ratios), slices.Max(ratios))
	}
}

// benchOrg is an organization of the benchmark and its saved searches.
type benchOrg struct {
	id       uuid.UUID
	searches []uuid.UUID
}

// benchKey is a start a client admitted, to replay.
type benchKey struct {
	org, search uuid.UUID
	key         string
}

// benchNewStarts runs clients that start saved searches of random
// organizations with fresh keys for d, and returns the rate of admitted
// starts and each client's keys. Any failure fails the test.
func benchNewStarts(ctx context.Context, t *testing.T, starter *Starter, orgs []benchOrg, clients int, d time.Duration, prefix string) (float64, [][]benchKey) {
	t.Helper()
	keys := make([][]benchKey, clients)
	n, elapsed := clientLoop(t, clients, d, func(c, i int) error {
		o := orgs[rand.N(len(orgs))]
		k := benchKey{org: o.id, search: o.searches[rand.N(len(o.searches))], key: fmt.Sprintf("%s-c%d-%d", prefix, c, i)}
		res, err := starter.StartSavedSearch(ctx, SavedSearchStart{Org: k.org, SavedSearchID: k.search,
			IdempotencyKey: k.key, Actor: "bench"})
		if err != nil || !res.Created {
			return cmp.Or(err, fmt.Errorf("start %s was not created", k.key))
		}
		keys[c] = append(keys[c], k)
		return nil
	})
	return float64(n) / elapsed.Seconds(), keys
}

// benchReplays replays the keys of each client, in turn, for d, and
// returns the rate. Any failure fails the test.
func benchReplays(ctx context.Context, t *testing.T, starter *Starter, keys [][]benchKey, d time.Duration) float64 {
	t.Helper()
	keys = slices.DeleteFunc(slices.Clone(keys), func(mine []benchKey) bool { return len(mine) == 0 })
	n, elapsed := clientLoop(t, len(keys), d, func(c, i int) error {
		k := keys[c][i%len(keys[c])]
		res, err := starter.StartSavedSearch(ctx, SavedSearchStart{Org: k.org, SavedSearchID: k.search,
			IdempotencyKey: k.key, Actor: "bench"})
		if err != nil || res.Created {
			return cmp.Or(err, fmt.Errorf("replay of %s created a Run", k.key))
		}
		return nil
	})
	return float64(n) / elapsed.Seconds()
}

// spread is a median with its range, for the table.
func spread(xs []float64) string {
	return fmt.Sprintf("%.0f (%.0f-%.0f)", benchkit.Median(xs), slices.Min(xs), slices.Max(xs))
}
