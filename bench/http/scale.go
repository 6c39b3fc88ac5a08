package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/bench/internal/summary"
	"github.com/searchd/searchd/internal/ids"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/snapshot"
	"github.com/searchd/searchd/sweeper"
)

// The scale benchmark (-scale): the real server on a database holding
// -starts starts against the same server on an empty one, in one run on
// one durable cluster. See docs/benchmarks.md, "A large database".
const (
	// scaleTemplateStarts are the real starts the seed copies.
	scaleTemplateStarts = 10
	// scaleSpan is the time the seeded starts are spread over, before the
	// load: a year.
	scaleSpan = 365 * 24 * time.Hour
	// scaleSeedWAL is max_wal_size while the seed runs (see seedLarge).
	scaleSeedWAL = "8GB"
	// scalePageRequests are the requests per console page measured, after
	// scalePageWarm unmeasured ones.
	scalePageRequests, scalePageWarm = 30, 3
	// scaleDeepPage is the console page whose cursor the deep reads use.
	scaleDeepPage = 100
	// scaleSweepBudget bounds the sweep pass on each database.
	scaleSweepBudget = time.Minute
)

// Targets of issue 35: on the large database, new starts and replays at
// least 0.90× the empty one, p99 at most 1.5× the empty one's.
const (
	scaleTargetRatio = 0.90
	scaleTargetP99   = 1.5
)

// scaleDB is one of the two databases and what was measured on it.
type scaleDB struct {
	name string
	e    *env
	// rounds are the measured rounds per measure.
	rounds map[measure][]round
	// walBytes and storedBytes are what the new-start rounds wrote to the
	// WAL and added to the start's tables, and started their starts.
	walBytes, storedBytes, started int64
	// fpis are the full-page images of the new-start rounds, by relation.
	fpis []string
}

func runScale(ctx context.Context, cfg config, out io.Writer) error {
	loadStart := summary.LoadAverage()
	if cfg.ids == "v4" {
		// The server mints random keys, as before internal/ids; the seed
		// mints them too (see scaleIDFunction).
		ids.Random(true)
		defer ids.Random(false)
	}
	cluster, err := pgtest.StartWith(ctx, pgtest.Options{Durable: true})
	if err != nil {
		return err
	}
	defer func() { _ = cluster.Stop() }()
	var dbs [2]*scaleDB
	for i, name := range []string{"empty", "large"} {
		url, drop, err := cluster.CreateDB(ctx)
		if err != nil {
			return err
		}
		defer drop()
		c := cfg
		c.databaseURL = url
		e, err := setUp(ctx, c)
		if err != nil {
			return err
		}
		defer e.close()
		dbs[i] = &scaleDB{name: name, e: e, rounds: map[measure][]round{}}
	}
	empty, large := dbs[0], dbs[1]
	// Keep the load's WAL for pg_walinspect to read (readFPIs): it changes
	// which segments a checkpoint may recycle, not what is written.
	for _, q := range []string{"ALTER SYSTEM SET wal_keep_size = '4GB'", "SELECT pg_reload_conf()"} {
		if _, err := large.e.admin.Exec(ctx, q); err != nil {
			return fmt.Errorf("keeping the WAL: %w", err)
		}
	}
	var settings string
	if err := large.e.admin.QueryRow(ctx, scaleSettings).Scan(&settings); err != nil {
		return fmt.Errorf("reading the server's settings: %w", err)
	}
	fmt.Fprintf(out, "searchd scale benchmark: the real server on a database of %d starts against an empty one\n\n", cfg.starts)
	fmt.Fprintf(out, "machine     %d CPUs, GOMAXPROCS %d, %s; load average before setup: %s\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), loadStart)
	fmt.Fprintf(out, "cluster     a durable throwaway cluster (internal/testkit/pgtest), over a unix socket; %s\n", large.e.pgVersion)
	fmt.Fprintf(out, "            %s\n", settings)
	fmt.Fprintf(out, "changed     from PostgreSQL's defaults by internal/testkit/pgtest: max_connections=300 (the tests' pools); by this run:\n"+
		"            wal_keep_size=4GB (the load's WAL kept for pg_walinspect to read; it changes what a checkpoint may\n"+
		"            recycle, not what is written);\n"+
		"            and during the seed alone: max_wal_size=%s (fewer checkpoints while it copies, so fewer\n"+
		"            full-page images and a shorter seed), reset to the setting above and CHECKPOINT before the load.\n"+
		"            Nothing else: shared_buffers stays 128MB, so the large database's indexes do not fit in it.\n", scaleSeedWAL)
	fmt.Fprintf(out, "ids         %s keys, minted by the server and by the seed\n", map[string]string{
		"v7": "time-ordered (UUIDv7)", "v4": "random (UUIDv4, -ids v4: as before internal/ids)"}[cfg.ids])
	fmt.Fprintf(out, "server      %s\n", large.e.limits)
	fmt.Fprintf(out, "load        %d keep-alive clients, %d rounds of %s per database and measure, alternating which goes first, %s warm-up\n\n",
		cfg.clients, cfg.rounds, cfg.duration, cfg.warmup)

	if err := seedLarge(ctx, out, cfg, large.e); err != nil {
		return err
	}
	for _, m := range []measure{newStarts, replays} {
		if err := scaleRounds(ctx, out, cfg, dbs, m); err != nil {
			return err
		}
	}
	printScale(out, cfg, dbs)
	if err := scalePages(ctx, out, empty, large); err != nil {
		return err
	}
	if err := scaleSweep(ctx, out, empty, large); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nload average after: %s\n", summary.LoadAverage())
	return nil
}

// seedLarge makes scaleTemplateStarts real starts through e's server, then
// copies them into cfg.starts starts (scalequeries.go), one INSERT ...
// SELECT per table in slices of cfg.seedBatch starts, with every index in
// place as in production; then VACUUM ANALYZE and CHECKPOINT. It prints
// the time, the WAL and the bytes stored per start.
//
// For the seed alone it raises max_wal_size: at the default 1GB a
// checkpoint comes every gigabyte of WAL and each brings a full-page image
// of every page touched again, most of the seed's WAL and time with
// random keys. The load is measured at the setting the cluster started
// with.
func seedLarge(ctx context.Context, out io.Writer, cfg config, e *env) (err error) {
	for k := range scaleTemplateStarts {
		s := started{path: e.real.paths[k%len(e.real.paths)], key: fmt.Sprintf("template-%d", k)}
		status, body, _, err := e.real.post(ctx, s, false)
		if err != nil {
			return err
		}
		if status != http.StatusCreated {
			return fmt.Errorf("a template start answered %d: %s", status, body)
		}
	}
	conn, err := e.admin.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	exec := func(what, q string, args ...any) error {
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			return fmt.Errorf("seeding (%s): %w", what, err)
		}
		return nil
	}
	if err := exec("max_wal_size", "ALTER SYSTEM SET max_wal_size = '"+scaleSeedWAL+"'"); err != nil {
		return err
	}
	defer func() {
		_, rerr := e.admin.Exec(context.WithoutCancel(ctx), "ALTER SYSTEM RESET max_wal_size")
		if err == nil && rerr != nil {
			err = fmt.Errorf("resetting max_wal_size: %w", rerr)
		}
		_, _ = e.admin.Exec(context.WithoutCancel(ctx), "SELECT pg_reload_conf()")
	}()
	if err := exec("reload", "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	if err := exec("id function", scaleIDFunction); err != nil {
		return err
	}
	args := pgx.NamedArgs{"org": e.org, "searches": e.searches, "small": cfg.smallOrgs,
		"t0": time.Now().Add(-scaleSpan), "step": fmt.Sprintf("%d microseconds", (scaleSpan / time.Duration(cfg.starts)).Microseconds()),
		"v7": cfg.ids == "v7", "templates": scaleTemplateStarts, "starts": cfg.starts,
		"due": min(cfg.starts/10, 10000)}
	if err := exec("template", scaleTemplate, args); err != nil {
		return err
	}
	wal0, err := readWAL(ctx, e)
	if err != nil {
		return err
	}
	begin := time.Now()
	fmt.Fprintf(out, "seed        %d starts: half of the large organization's (%d saved searches), half of %d small organizations' "+
		"(one saved search each), spread over the last %s, copied from %d real starts; ids %s\n",
		cfg.starts, len(e.searches), cfg.smallOrgs, scaleSpan, scaleTemplateStarts, cfg.ids)
	if err := exec("small organizations", scaleSmallSearches, args); err != nil {
		return err
	}
	for _, step := range []struct{ table, sql string }{
		{"agent.saved_search_snapshots", scaleSnapshots},
		{"agent.runs", scaleRuns},
		{"agent.run_dispatches", scaleDispatches},
		{"agent.idempotency_keys", scaleClaims},
	} {
		t := time.Now()
		for from := 0; from < cfg.starts; from += cfg.seedBatch {
			args["from"], args["to"] = from, min(from+cfg.seedBatch, cfg.starts)-1
			if err := exec(step.table, step.sql, args); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "            %-30s %8s\n", step.table, time.Since(t).Round(time.Second))
	}
	copied := time.Since(begin)
	t := time.Now()
	for _, table := range scaleTables {
		if err := exec("vacuum", "VACUUM (ANALYZE) "+table); err != nil {
			return err
		}
	}
	if err := exec("checkpoint", "CHECKPOINT"); err != nil {
		return err
	}
	wal1, err := readWAL(ctx, e)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "            copied in %s, VACUUM ANALYZE and CHECKPOINT %s; WAL %s (%.0f bytes per start)\n",
		copied.Round(time.Second), time.Since(t).Round(time.Second), mib(wal1-wal0), float64(wal1-wal0)/float64(cfg.starts))
	sizes, err := readSizes(ctx, e)
	if err != nil {
		return err
	}
	var total, indexes int64
	for _, s := range sizes {
		fmt.Fprintf(out, "            %-30s %10s, of which indexes %10s: %6.0f bytes per start\n",
			s.table, mib(s.total), mib(s.indexes), float64(s.total)/float64(cfg.starts))
		total, indexes = total+s.total, indexes+s.indexes
	}
	fmt.Fprintf(out, "stored      %s for %d starts, of which indexes %s: %.0f bytes per start (%.0f in indexes)\n\n",
		mib(total), cfg.starts, mib(indexes), float64(total)/float64(cfg.starts), float64(indexes)/float64(cfg.starts))
	return nil
}

type tableSize struct {
	table          string
	total, indexes int64
}

func readSizes(ctx context.Context, e *env) ([]tableSize, error) {
	rows, _ := e.admin.Query(ctx, scaleSizes, pgx.NamedArgs{"tables": scaleTables})
	sizes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (tableSize, error) {
		var s tableSize
		return s, r.Scan(&s.table, &s.total, &s.indexes)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the tables' sizes: %w", err)
	}
	return sizes, nil
}

func readStored(ctx context.Context, e *env) (int64, error) {
	sizes, err := readSizes(ctx, e)
	var total int64
	for _, s := range sizes {
		total += s.total
	}
	return total, err
}

func readWAL(ctx context.Context, e *env) (int64, error) {
	var lsn int64
	if err := e.admin.QueryRow(ctx, scaleWAL).Scan(&lsn); err != nil {
		return 0, fmt.Errorf("reading the WAL position: %w", err)
	}
	return lsn, nil
}

// scaleRounds runs measure m on both databases' real servers: a warm-up
// of each and an ANALYZE, then the rounds, alternating which goes first.
// Around each new-start round it reads the WAL position and the start's
// tables' sizes: the WAL is the cluster's, and only one database is
// loaded at a time.
func scaleRounds(ctx context.Context, out io.Writer, cfg config, dbs [2]*scaleDB, m measure) error {
	for _, db := range dbs {
		if cfg.warmup > 0 {
			if _, err := db.e.real.run(ctx, m, cfg.clients, cfg.warmup); err != nil {
				return fmt.Errorf("warm-up on %s: %w", db.name, err)
			}
		}
		if err := db.e.analyze(ctx); err != nil {
			return err
		}
	}
	var lsn0 string
	if err := dbs[0].e.admin.QueryRow(ctx, scaleLSN).Scan(&lsn0); err != nil {
		return err
	}
	for r := range cfg.rounds {
		order := []*scaleDB{dbs[0], dbs[1]}
		if r%2 == 1 {
			order = []*scaleDB{dbs[1], dbs[0]}
		}
		line := fmt.Sprintf("%-10s round %d:", m, r+1)
		for _, db := range order {
			wal0, err := readWAL(ctx, db.e)
			if err != nil {
				return err
			}
			stored0, err := readStored(ctx, db.e)
			if err != nil {
				return err
			}
			res, err := db.e.real.run(ctx, m, cfg.clients, cfg.duration)
			if err != nil {
				return fmt.Errorf("%s round %d on %s: %w", m, r+1, db.name, err)
			}
			wal1, err := readWAL(ctx, db.e)
			if err != nil {
				return err
			}
			stored1, err := readStored(ctx, db.e)
			if err != nil {
				return err
			}
			db.rounds[m] = append(db.rounds[m], res)
			line += fmt.Sprintf("  %s %5.0f/s p50 %7s p99 %7s", db.name, res.rate(), ms(res.quantile(0.50)), ms(res.quantile(0.99)))
			if m == newStarts {
				db.walBytes += wal1 - wal0
				db.storedBytes += stored1 - stored0
				db.started += int64(res.requests)
				line += fmt.Sprintf(" WAL %5.0f B/start", float64(wal1-wal0)/float64(max(res.requests, 1)))
			}
		}
		fmt.Fprintf(out, "%s  large/empty %.2f×\n", line, dbs[1].rounds[m][r].rate()/dbs[0].rounds[m][r].rate())
	}
	if m == newStarts {
		return readFPIs(ctx, dbs, lsn0)
	}
	return nil
}

// readFPIs reads, through pg_walinspect, the full-page images each
// database's relations got in the WAL since lsn0, per start.
func readFPIs(ctx context.Context, dbs [2]*scaleDB, lsn0 string) error {
	var lsn1 string
	if err := dbs[0].e.admin.QueryRow(ctx, scaleLSN).Scan(&lsn1); err != nil {
		return err
	}
	for _, db := range dbs {
		if _, err := db.e.admin.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_walinspect"); err != nil {
			return fmt.Errorf("pg_walinspect: %w", err)
		}
		rows, _ := db.e.admin.Query(ctx, scaleFPIs, pgx.NamedArgs{"from": lsn0, "to": lsn1})
		fpis, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			var rel string
			var b int64
			err := r.Scan(&rel, &b)
			return fmt.Sprintf("%s %.0f", rel, float64(b)/float64(max(db.started, 1))), err
		})
		if err != nil {
			return fmt.Errorf("reading the full-page images: %w", err)
		}
		db.fpis = fpis
	}
	return nil
}

// printScale prints the medians of both databases' rounds, the ratios
// against the targets, and the WAL and bytes per new start.
func printScale(out io.Writer, cfg config, dbs [2]*scaleDB) {
	empty, large := dbs[0], dbs[1]
	fmt.Fprintf(out, "\nmedians of %d rounds; the ratio is the large database's median over the empty one's\n", cfg.rounds)
	fmt.Fprintf(out, "%-11s %-6s %7s %9s %9s %9s\n", "measure", "", "req/s", "p50", "p99", "p99.9")
	q := func(rs []round, p float64) time.Duration {
		return time.Duration(medianOf(rs, func(r round) float64 { return float64(r.quantile(p)) }))
	}
	for _, m := range []measure{newStarts, replays} {
		for _, db := range dbs {
			rs := db.rounds[m]
			fmt.Fprintf(out, "%-11s %-6s %7.0f %9s %9s %9s\n", m, db.name, medianOf(rs, round.rate),
				ms(q(rs, 0.50)), ms(q(rs, 0.99)), ms(q(rs, 0.999)))
		}
		rate := medianOf(large.rounds[m], round.rate) / medianOf(empty.rounds[m], round.rate)
		p99 := float64(q(large.rounds[m], 0.99)) / float64(q(empty.rounds[m], 0.99))
		fmt.Fprintf(out, "%-11s %-6s %6.2f×  target ≥ %.2f×: %s; p99 %.2f×, target ≤ %.1f×: %s\n", m, "ratio",
			rate, scaleTargetRatio, verdict(rate >= scaleTargetRatio), p99, scaleTargetP99, verdict(p99 <= scaleTargetP99))
	}
	fmt.Fprintf(out, "\nper new start, over all new-start rounds (ids %s):\n", cfg.ids)
	for _, db := range dbs {
		n := float64(max(db.started, 1))
		fmt.Fprintf(out, "  %-6s %7d starts: WAL %6.0f bytes, stored %6.0f bytes (the growth of the start's tables, "+
			"heap, TOAST and indexes)\n", db.name, db.started, float64(db.walBytes)/n, float64(db.storedBytes)/n)
		fmt.Fprintf(out, "         of the WAL, full-page images by relation, bytes per start: %s\n", strings.Join(db.fpis, ", "))
	}
}

// scalePages times the console's list reads of the large organization,
// through the stores the console's list pages call: the first page of its
// Runs, of one saved search's Runs and of one saved search's snapshots
// (the timeline), and page scaleDeepPage+1 of the Runs and of the
// timeline, on both databases.
func scalePages(ctx context.Context, out io.Writer, dbs ...*scaleDB) error {
	fmt.Fprintf(out, "\nconsole list reads of the large organization (the stores behind /console/runs and "+
		"/console/saved-searches/{id}), %d each after %d warm-ups: median and p95\n", scalePageRequests, scalePageWarm)
	fmt.Fprintf(out, "%-34s", "read")
	for _, db := range dbs {
		fmt.Fprintf(out, " %10s %10s", db.name, "p95")
	}
	fmt.Fprintf(out, " %12s\n", "large/empty")
	type page struct {
		name string
		read func(e *env, cursor string) (string, error)
	}
	pages := []page{
		{"Runs", func(e *env, c string) (string, error) {
			_, next, err := runs.NewStore(e.admin, runs.Config{}).List(ctx, e.org, runs.ListParams{Cursor: c})
			return next, err
		}},
		{"Runs of a saved search", func(e *env, c string) (string, error) {
			_, next, err := runs.NewStore(e.admin, runs.Config{}).List(ctx, e.org,
				runs.ListParams{SavedSearchID: &e.searches[0], Cursor: c})
			return next, err
		}},
		{"snapshots of a saved search", func(e *env, c string) (string, error) {
			_, next, err := snapshot.NewStore(e.admin).ListBySavedSearch(ctx, e.org, e.searches[0], snapshot.ListParams{Cursor: c})
			return next, err
		}},
	}
	for _, p := range pages {
		for _, deep := range []bool{false, true} {
			name := p.name + ", first page"
			if deep {
				name = fmt.Sprintf("%s, page %d", p.name, scaleDeepPage+1)
			}
			line := fmt.Sprintf("%-34s", name)
			var medians []time.Duration
			for _, db := range dbs {
				cursor := ""
				pages := 0
				for deep && pages < scaleDeepPage {
					next, err := p.read(db.e, cursor)
					if err != nil {
						return fmt.Errorf("%s on %s: %w", name, db.name, err)
					}
					if next == "" {
						break
					}
					cursor, pages = next, pages+1
				}
				if deep && pages < scaleDeepPage {
					line += fmt.Sprintf(" %21s", fmt.Sprintf("(%d pages only)", pages+1))
					continue
				}
				d := make([]time.Duration, 0, scalePageRequests)
				for i := range scalePageWarm + scalePageRequests {
					t := time.Now()
					if _, err := p.read(db.e, cursor); err != nil {
						return fmt.Errorf("%s on %s: %w", name, db.name, err)
					}
					if i >= scalePageWarm {
						d = append(d, time.Since(t))
					}
				}
				slices.Sort(d)
				medians = append(medians, d[len(d)/2])
				line += fmt.Sprintf(" %10s %10s", ms(d[len(d)/2]), ms(d[len(d)*95/100]))
			}
			if len(medians) == 2 {
				line += fmt.Sprintf(" %11.2f×", float64(medians[1])/float64(medians[0]))
			}
			fmt.Fprintln(out, line)
		}
	}
	return nil
}

// scaleSweep times one sweeper run of one pass per table (a budget of
// 1 ns: a run's first round, one pass per table, is always made in full;
// the rest at the defaults) on each database: on the large one, the
// seed's oldest starts are past retention (see scaleRuns and scaleClaims).
// A run still going after scaleSweepBudget is stopped and printed as far
// as it went.
func scaleSweep(ctx context.Context, out io.Writer, dbs ...*scaleDB) error {
	fmt.Fprintf(out, "\none sweep pass (sweeper.RunOnce with a 1 ns budget: its first round alone, one pass per table; the defaults otherwise: a bound of %d rows per table)\n",
		sweeper.DefaultBound)
	for _, db := range dbs {
		sw, err := sweeper.New(db.e.admin, sweeper.Config{Budget: time.Nanosecond, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		sweepCtx, cancel := context.WithTimeout(ctx, scaleSweepBudget)
		t := time.Now()
		rep, err := sw.RunOnce(sweepCtx)
		stopped := sweepCtx.Err() != nil
		cancel()
		line := fmt.Sprintf("  %-6s %8s:", db.name, ms(time.Since(t)))
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case stopped:
			line = fmt.Sprintf("  %-6s STOPPED after %s, unfinished:", db.name, scaleSweepBudget)
		case err != nil:
			return fmt.Errorf("sweeping %s: %w", db.name, err)
		}
		for _, t := range rep.Tables() {
			if t.Deleted > 0 || t.Table == sweeper.TableClaims || t.Table == sweeper.TableRuns {
				line += fmt.Sprintf(" %s %d deleted in %s;", t.Table, t.Deleted, ms(t.Duration))
			}
		}
		fmt.Fprintln(out, line)
	}
	return nil
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
