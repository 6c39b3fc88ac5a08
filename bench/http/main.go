// Command http measures searchd's saved-search start through HTTP on
// loopback, against a thin baseline measured in the same run.
//
//	go -C bench run ./http [-clients 16] [-rounds 5] [-duration 3s] [-database-url URL] [-json FILE]
//	                       [-only new-starts|replays] [-explain]
//
// It creates a database (a fresh one cloned from the migrated template by
// internal/testkit/pgtest: a throwaway cluster, or the server SEARCHD_TEST_DATABASE_URL
// or DATABASE_URL names; or the migrated database -database-url names),
// seeds an organization and its saved searches, and serves two handlers on
// 127.0.0.1 ports of their own:
//
//   - real: the searchd API, assembled as `searchd serve` assembles it
//     (api.New with the stores, the admission.Starter and the admission
//     queue at its defaults, on a pool of searchd serve's default size
//     with its session bounds) behind a net/http server;
//   - thin: an echo handler issuing the same SQL straight through pgx, with
//     none of the rest (see thin.go).
//
// Before measuring, one start and one replay on each handler prove that
// both issue the same statements in the same order; the program stops if
// they do not. Then a load generator drives each handler with -clients
// keep-alive clients in rounds of -duration, alternating real and thin and
// which goes first: first new starts (a fresh Idempotency-Key on every
// request), then replays (keys those rounds started). Each measure starts
// with an unmeasured warm-up of both handlers and an ANALYZE, so both plan
// their statements on the same statistics (see env.analyze). At the end
// the database must hold one Run, one snapshot and one completed claim per
// admitted start, whichever handler admitted it.
//
// Nothing is raised or disabled: the program prints every limit the real
// server runs with at its top. An answer 429 rate_limited does not end a
// round: it is counted (and its client sends its next request at once,
// ignoring Retry-After), and the count is printed with the target of
// issue 23, none.
//
// It prints each round (p50, p99, p99.9, the slowest request and how many
// took 50 ms or more; for a round with such requests, where their time
// went and what else happened meanwhile, see phases.go and stalls.go),
// then the medians of the rounds: requests per
// second, p50, p99 and p99.9 latency, SQL statements per request (a pgx
// QueryTracer on each server's pool), the time spent inside statements,
// round trips and commits per request, the CPU time per request of this
// process and of the PostgreSQL server (when it runs on this machine), and
// the ratio real/thin against the targets of issue 17: new starts and
// replays at least 0.90x the thin handler, a replay one statement; and a
// log-scale latency histogram of each measure.
//
// With -json it also writes those medians to a file as JSON (see
// [summary.Summary]), for bench/report.
//
// With -scale it runs the scale benchmark instead (scale.go,
// scalequeries.go; make bench-scale): the real server on a database seeded
// with -starts starts against the same server on an empty database, both
// on one durable cluster, with -ids v7 (time-ordered keys) or v4 (random).
//
// Everything listens on loopback only, and the whole run is bounded: the
// program stops by itself, and on SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/searchd/searchd/bench/internal/summary"
)

type config struct {
	clients       int
	rounds        int
	duration      time.Duration
	warmup        time.Duration
	databaseURL   string
	savedSearches int
	baselineItems int
	maxConns      int
	accessLog     string
	cpuProfile    string
	jsonOut       string
	only          string
	explain       bool
	// The scale benchmark's (scale.go).
	scale     bool
	starts    int
	ids       string
	smallOrgs int
	seedBatch int
}

func main() {
	var cfg config
	flag.IntVar(&cfg.clients, "clients", 16, "concurrent clients, each with one request in flight")
	flag.IntVar(&cfg.rounds, "rounds", 5, "measured rounds per handler and measure")
	flag.DurationVar(&cfg.duration, "duration", 3*time.Second, "length of one round")
	flag.DurationVar(&cfg.warmup, "warmup", time.Second, "unmeasured warm-up per handler before each measure")
	flag.StringVar(&cfg.databaseURL, "database-url", "",
		"a migrated database to use; the run adds a new organization's rows and leaves them "+
			"(default: a fresh database from internal/testkit/pgtest, dropped at the end)")
	flag.IntVar(&cfg.savedSearches, "saved-searches", 100, "saved searches seeded; each start picks one at random")
	flag.IntVar(&cfg.baselineItems, "baseline-items", 50, "baseline items of each saved search, copied by every freeze")
	flag.IntVar(&cfg.maxConns, "max-conns", 0,
		fmt.Sprintf("pool size of each server; 0 is searchd serve's default, %d (and the real server's seats follow it)", serveMaxConns))
	flag.StringVar(&cfg.accessLog, "access-log", "json",
		"the real server's logger: json (searchd serve's JSON access log, formatted and discarded), stderr (the same, written to stderr) or off")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", "",
		"write a CPU profile of every measured round to PREFIX-<measure>-<handler>-r<N>.pprof")
	flag.StringVar(&cfg.jsonOut, "json", "", "also write the medians as JSON to this file (for bench/report)")
	flag.StringVar(&cfg.only, "only", "",
		"measure only new-starts or only replays (replays then replay the keys the new starts' warm-up started); default both")
	flag.BoolVar(&cfg.explain, "explain", false,
		"print every round's stalls and slow requests (default: only for rounds with a request ≥ 50ms)")
	flag.BoolVar(&cfg.scale, "scale", false,
		"the scale benchmark instead: the real server on a database seeded with -starts starts against an empty one")
	flag.IntVar(&cfg.starts, "starts", 10_000_000, "with -scale: starts seeded (claims, snapshots, Runs and their dispatches)")
	flag.StringVar(&cfg.ids, "ids", "v7", "with -scale: the keys the server and the seed mint, v7 (time-ordered) or v4 (random, as before)")
	flag.IntVar(&cfg.smallOrgs, "small-orgs", 10_000, "with -scale: the small organizations that hold half of the seeded starts")
	flag.IntVar(&cfg.seedBatch, "seed-batch", 1_000_000, "with -scale: starts per seed statement")
	flag.Parse()
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/http:", err)
		os.Exit(2)
	}
	// Setup, then two measures of rounds on two handlers, each with its
	// warm-up, plus slack for draining and the database's drop.
	budget := 3*time.Minute + time.Duration(2*2*(cfg.rounds+1))*(cfg.duration+cfg.warmup+5*time.Second)
	if cfg.scale {
		// The seed: at most a few minutes per million starts.
		budget += 2*budget + time.Duration(cfg.starts/1_000_000+1)*10*time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	runner := run
	if cfg.scale {
		runner = runScale
	}
	if err := runner(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/http:", err)
		os.Exit(1)
	}
}

func (c config) validate() error {
	switch {
	case c.clients < 1 || c.clients > 1024:
		return fmt.Errorf("-clients is %d, want 1 to 1024", c.clients)
	case c.rounds < 1 || c.rounds > 100:
		return fmt.Errorf("-rounds is %d, want 1 to 100", c.rounds)
	case c.duration < 100*time.Millisecond || c.duration > 5*time.Minute:
		return fmt.Errorf("-duration is %s, want 100ms to 5m", c.duration)
	case c.warmup < 0 || c.warmup > time.Minute:
		return fmt.Errorf("-warmup is %s, want 0 to 1m", c.warmup)
	case c.savedSearches < 1 || c.savedSearches > 10000:
		return fmt.Errorf("-saved-searches is %d, want 1 to 10000", c.savedSearches)
	case c.baselineItems < 0 || c.baselineItems > 10000:
		return fmt.Errorf("-baseline-items is %d, want 0 to 10000", c.baselineItems)
	case c.maxConns < 0:
		return fmt.Errorf("-max-conns is %d, want 0 (the default) or more", c.maxConns)
	case c.accessLog != "json" && c.accessLog != "stderr" && c.accessLog != "off":
		return fmt.Errorf("-access-log is %q, want json, stderr or off", c.accessLog)
	case c.only != "" && c.only != "new-starts" && c.only != "replays":
		return fmt.Errorf("-only is %q, want new-starts or replays (or nothing, for both)", c.only)
	case c.starts < 1000 || c.starts > 100_000_000:
		return fmt.Errorf("-starts is %d, want 1000 to 100000000", c.starts)
	case c.ids != "v7" && c.ids != "v4":
		return fmt.Errorf("-ids is %q, want v7 or v4", c.ids)
	case c.smallOrgs < 1 || c.smallOrgs > 1_000_000:
		return fmt.Errorf("-small-orgs is %d, want 1 to 1000000", c.smallOrgs)
	case c.seedBatch < 1000 || c.seedBatch > 10_000_000:
		return fmt.Errorf("-seed-batch is %d, want 1000 to 10000000", c.seedBatch)
	case c.scale && c.databaseURL != "":
		return errors.New("-scale makes its own cluster; -database-url is not for it")
	}
	return nil
}

// Targets of issue 17: both measures at least 0.90x the thin handler, a
// replay one statement.
const (
	targetRatio       = 0.90
	targetReplayStmts = 1
	ratioLabel        = "≥ 0.90×"
)

// figures are the measured rounds of one measure on each handler.
type figures struct{ real, thin []round }

func run(ctx context.Context, cfg config, out io.Writer) error {
	loadStart := summary.LoadAverage()
	env, err := setUp(ctx, cfg)
	if err != nil {
		return err
	}
	defer env.close()
	printSetup(out, cfg, env, loadStart)
	if err := checkSQL(ctx, out, env.real, env.thin); err != nil {
		return err
	}
	results := map[measure]*figures{}
	for _, m := range cfg.measures() {
		if results[m], err = measureRounds(ctx, out, cfg, env, m); err != nil {
			return err
		}
	}
	loadEnd := summary.LoadAverage()
	if err := env.checkRows(ctx, len(env.real.keys)+len(env.thin.keys)+2); err != nil {
		return err
	}
	sum := summary.Summary{Clients: cfg.clients, Rounds: cfg.rounds, Duration: cfg.duration.String(),
		MaxConns: env.maxConns, PGVersion: env.pgVersion, PGSettings: env.pgSettings,
		LoadBefore: loadStart, LoadAfter: loadEnd}
	printMedians(out, cfg, env, results, &sum)
	if cfg.jsonOut != "" {
		if err := writeJSON(cfg.jsonOut, sum); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nSQL ms/req: time inside statements, from the driver's call to the answer, waits for the CPU included.\n"+
		"Go µs/req: CPU time of this whole process (servers and load generator) per request.\n"+
		"PG µs/req: CPU time of the PostgreSQL server's processes per request.\n")
	return nil
}

// measures returns the measures -only asks for.
func (c config) measures() []measure {
	switch c.only {
	case "new-starts":
		return []measure{newStarts}
	case "replays":
		return []measure{replays}
	}
	return []measure{newStarts, replays}
}

// printSetup prints what the run measures on: the machine, the database,
// the pools, the limits, the seed and the load.
func printSetup(out io.Writer, cfg config, env *env, loadStart string) {
	fmt.Fprintf(out, "searchd HTTP start benchmark: the real handler against a thin echo+pgx handler issuing the same SQL\n\n")
	fmt.Fprintf(out, "machine     %d CPUs, GOMAXPROCS %d, %s %s/%s; load average before setup: %s\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH, loadStart)
	fmt.Fprintf(out, "database    %s\n", env.dbDescription)
	fmt.Fprintf(out, "            %s\n", env.pgVersion)
	fmt.Fprintf(out, "            %s\n", env.pgSettings)
	fmt.Fprintf(out, "pools       MaxConns %d per server (%s), statements counted by a pgx QueryTracer on each\n",
		env.maxConns, map[bool]string{true: "-max-conns, changed on the command line", false: "searchd serve's default"}[cfg.maxConns > 0])
	fmt.Fprintf(out, "limits      %s\n", env.limits)
	if env.pg.ok() {
		fmt.Fprintf(out, "PG CPU      every process of the server whose postmaster is PID %d, read from /proc\n", env.pg.postmaster)
	}
	fmt.Fprintf(out, "seed        1 organization, %d saved searches with %d baseline items each\n",
		cfg.savedSearches, cfg.baselineItems)
	fmt.Fprintf(out, "load        %d keep-alive clients on 127.0.0.1, %d rounds of %s per handler and measure, "+
		"alternating which handler goes first, %s warm-up; real access log: %s\n\n",
		cfg.clients, cfg.rounds, cfg.duration, cfg.warmup, cfg.accessLog)
}

// checkSQL proves, with one start and one replay on each handler, that
// both issue the same statements in the same round trips: the same SQL,
// or no measurement.
func checkSQL(ctx context.Context, out io.Writer, realT, thinT *target) error {
	realStart, realReplay, err := realT.probe(ctx)
	if err != nil {
		return err
	}
	thinStart, thinReplay, err := thinT.probe(ctx)
	if err != nil {
		return err
	}
	if err := sameSQL("new start", realStart, thinStart); err != nil {
		return err
	}
	if err := sameSQL("replay", realReplay, thinReplay); err != nil {
		return err
	}
	fmt.Fprintf(out, "SQL check   both handlers issue the same statements in the same round trips ([a batch])\n")
	fmt.Fprintf(out, "            new start (%d statements, %d round trips): %s\n", statementCount(realStart), len(realStart), statementList(realStart))
	fmt.Fprintf(out, "            replay (%d statements, %d round trips): %s\n\n", statementCount(realReplay), len(realReplay), statementList(realReplay))
	return nil
}

// measureRounds runs measure m: the warm-up of both handlers, an ANALYZE,
// then the rounds, alternating which handler goes first, each printed.
func measureRounds(ctx context.Context, out io.Writer, cfg config, env *env, m measure) (*figures, error) {
	realT, thinT := env.real, env.thin
	f := &figures{}
	if m == replays && len(realT.keys) == 0 {
		// -only replays: start the keys to replay, unmeasured.
		for _, t := range []*target{realT, thinT} {
			if _, err := t.run(ctx, newStarts, cfg.clients, max(cfg.warmup, time.Second)); err != nil {
				return nil, fmt.Errorf("starting keys to replay: %w", err)
			}
		}
	}
	if cfg.warmup > 0 {
		for _, t := range []*target{realT, thinT} {
			if _, err := t.run(ctx, m, cfg.clients, cfg.warmup); err != nil {
				return nil, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	if err := env.analyze(ctx); err != nil {
		return nil, err
	}
	if m == replays {
		plan, err := env.replayPlan(ctx)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "replay plan (generic, after ANALYZE): %s\n", plan)
	}
	for r := range cfg.rounds {
		order := []*target{realT, thinT}
		if r%2 == 1 {
			order = []*target{thinT, realT}
		}
		line := fmt.Sprintf("%-10s round %d:", m, r+1)
		var why []string
		for _, t := range order {
			res, err := measureRound(ctx, cfg, env, t, m, r)
			if err != nil {
				return nil, err
			}
			if t == realT {
				f.real = append(f.real, res)
			} else {
				f.thin = append(f.thin, res)
			}
			line += fmt.Sprintf("  %s %5.0f/s p50 %s p99 %s p99.9 %s max %s ≥50ms %d 429s %d%s", t.name, res.rate(),
				msShort(res.quantile(0.50)), msShort(res.quantile(0.99)), msShort(res.quantile(0.999)),
				msShort(res.maxLatency()), len(res.slow), res.refused, res.stalls.pressure())
			if cfg.explain || len(res.slow) > 0 {
				why = append(why, fmt.Sprintf("    %s: %s\n    %s  meanwhile: %s", t.name, slowSummary(res.slow), t.name, res.stalls))
			}
		}
		last := len(f.real) - 1
		fmt.Fprintf(out, "%s  real/thin %.2f×\n", line, f.real[last].rate()/f.thin[last].rate())
		for _, w := range why {
			fmt.Fprintln(out, w)
		}
	}
	return f, nil
}

// printMedians prints the medians of the rounds and the verdicts against
// the targets, and fills sum with them.
func printMedians(out io.Writer, cfg config, env *env, results map[measure]*figures, sum *summary.Summary) {
	fmt.Fprintf(out, "\nmedians of %d rounds; the ratio is median real req/s over median thin req/s; max is the slowest of all rounds\n", cfg.rounds)
	fmt.Fprintf(out, "%-11s %-5s %7s %9s %9s %9s %9s %9s %9s %9s %10s %10s %10s\n", "measure", "", "req/s", "p50", "p99", "p99.9", "max",
		"stmts/req", "trips/req", "commits", "SQL ms/req", "Go µs/req", "PG µs/req")
	var verdicts []string
	for _, m := range cfg.measures() {
		f := results[m]
		printSide(out, m, "real", f.real, env.pg.ok())
		printSide(out, m, "thin", f.thin, env.pg.ok())
		ratio := printRatio(out, m, f, env.pg.ok())
		verdicts = append(verdicts, fmt.Sprintf("%s %.2f× (%s)", m, ratio, verdict(ratio >= targetRatio)))
		sum.Measures = append(sum.Measures, summary.Measure{
			Measure: m.String(), Real: sideSummary(f.real), Thin: sideSummary(f.thin), Ratio: ratio})
	}
	fmt.Fprintln(out)
	for _, m := range cfg.measures() {
		printHistograms(out, m, results[m])
	}
	var refused int
	for _, m := range cfg.measures() {
		for _, r := range results[m].real {
			refused += r.refused
		}
	}
	fmt.Fprintf(out, "\nreal 429 rate_limited answers in all measured rounds: %d, target 0: %s\n", refused, verdict(refused == 0))
	verdicts = append(verdicts, fmt.Sprintf("%d × 429 (%s)", refused, verdict(refused == 0)))
	sum.Refused = refused
	if f, ok := results[replays]; ok {
		replayStmts := medianOf(f.real, round.statementsPerRequest)
		fmt.Fprintf(out, "real replay: %.2f SQL statements per request, target ≤ %d: %s\n",
			replayStmts, targetReplayStmts, verdict(replayStmts <= targetReplayStmts))
		sum.ReplayStatements = replayStmts
	}
	if f, ok := results[newStarts]; ok {
		fmt.Fprintf(out, "real new start: %.2f SQL statements in %.2f round trips and %.2f commits per request, target ≤ 5 round trips and ≤ 2 commits\n",
			medianOf(f.real, round.statementsPerRequest), medianOf(f.real, round.roundTripsPerRequest),
			medianOf(f.real, round.commitsPerRequest))
		sum.StartStatements = medianOf(f.real, round.statementsPerRequest)
	}
	fmt.Fprintf(out, "summary: %s; load average after: %s\n", strings.Join(verdicts, ", "), sum.LoadAfter)
}

// printSide prints the medians of one handler's rounds of measure m.
func printSide(out io.Writer, m measure, name string, rs []round, pgOK bool) {
	med := func(f func(round) time.Duration) time.Duration {
		return time.Duration(medianOf(rs, func(r round) float64 { return float64(f(r)) }))
	}
	pg := "n/a"
	if pgOK {
		pg = us(med(round.pgCPUPerRequest))
	}
	var slowest time.Duration
	for _, r := range rs {
		slowest = max(slowest, r.maxLatency())
	}
	fmt.Fprintf(out, "%-11s %-5s %7.0f %9s %9s %9s %9s %9.2f %9.2f %9.2f %10s %10s %10s\n", m, name, medianOf(rs, round.rate),
		ms(med(func(r round) time.Duration { return r.quantile(0.50) })),
		ms(med(func(r round) time.Duration { return r.quantile(0.99) })),
		ms(med(func(r round) time.Duration { return r.quantile(0.999) })), ms(slowest),
		medianOf(rs, round.statementsPerRequest), medianOf(rs, round.roundTripsPerRequest),
		medianOf(rs, round.commitsPerRequest), ms(med(round.dbPerRequest)),
		us(med(round.cpuPerRequest)), pg)
}

// printRatio prints and returns measure m's ratio real/thin with the
// rounds' own ratios, and (when the server's CPU is read) the ratio of
// CPU per request.
func printRatio(out io.Writer, m measure, f *figures, pgOK bool) float64 {
	ratio := medianOf(f.real, round.rate) / medianOf(f.thin, round.rate)
	paired := make([]float64, len(f.real))
	for i := range f.real {
		paired[i] = f.real[i].rate() / f.thin[i].rate()
	}
	slices.Sort(paired)
	fmt.Fprintf(out, "%-11s %-5s %6.2f×  target %s: %s; rounds' real/thin, sorted: %s\n", m, "ratio", ratio,
		ratioLabel, verdict(ratio >= targetRatio), ratios(paired))
	if pgOK {
		cpu := func(rs []round) float64 {
			return medianOf(rs, func(r round) float64 { return float64(r.cpuPerRequest() + r.pgCPUPerRequest()) })
		}
		fmt.Fprintf(out, "%-11s %-5s %6.2f×  thin/real CPU per request (Go + PG): the ratio when the CPUs are the limit\n",
			m, "", cpu(f.thin)/cpu(f.real))
	}
	return ratio
}

// measureRound runs one measured round on t, under a CPU profile when
// asked.
func measureRound(ctx context.Context, cfg config, env *env, t *target, m measure, r int) (round, error) {
	if cfg.cpuProfile != "" {
		name := fmt.Sprintf("%s-%s-%s-r%d.pprof", cfg.cpuProfile, strings.ReplaceAll(m.String(), " ", "-"), t.name, r+1)
		f, err := os.Create(name)
		if err != nil {
			return round{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return round{}, err
		}
		defer pprof.StopCPUProfile()
	}
	before := env.takeSample(ctx, t)
	res, err := t.run(ctx, m, cfg.clients, cfg.duration)
	if err != nil {
		return round{}, fmt.Errorf("%s round %d on %s: %w", m, r+1, t.name, err)
	}
	res.stalls = env.stallsBetween(before, env.takeSample(ctx, t), t, res.elapsed, res.cpu, res.pgCPU)
	return res, nil
}

// sameSQL returns an error naming the first difference between the round
// trips of the real and the thin handler.
func sameSQL(what string, realSQL, thinSQL [][]string) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("the thin handler no longer issues the real handler's SQL for a %s: %s\n"+
			"update bench/http/thin.go from the queries.go files\nreal: %s\nthin: %s",
			what, fmt.Sprintf(format, args...), statementList(realSQL), statementList(thinSQL))
	}
	if len(realSQL) != len(thinSQL) {
		return fail("%d round trips against %d", len(realSQL), len(thinSQL))
	}
	for i := range realSQL {
		if len(realSQL[i]) != len(thinSQL[i]) {
			return fail("round trip %d holds %d statements against %d", i+1, len(realSQL[i]), len(thinSQL[i]))
		}
		for j := range realSQL[i] {
			if r, t := normalizeSQL(realSQL[i][j]), normalizeSQL(thinSQL[i][j]); r != t {
				return fail("round trip %d, statement %d is\n  real: %s\n  thin: %s", i+1, j+1, r, t)
			}
		}
	}
	return nil
}

func medianOf(rs []round, f func(round) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	slices.Sort(xs)
	if len(xs) == 0 {
		return 0
	}
	if len(xs)%2 == 0 {
		return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	return xs[len(xs)/2]
}

func ratios(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, " ")
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Microsecond)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
