// Command report runs searchd's three benchmarks in one go and writes a
// Markdown report of their figures, each beside its baseline and ratio,
// with an SVG chart of requests per second against concurrency.
//
//	cd bench && go run ./report [-out docs/bench-report.md] [-quick]
//
// bench is a Go module of its own (bench/go.mod), whose replace directive
// builds it against the searchd module of this checkout. The report works
// in that module's directory, the repository's root, wherever it is
// started: -out and the packages it tests are relative to it.
//
// It runs, one after the other so they do not share the CPUs:
//
//   - saved-search starts in process against raw SQL (admission's
//     TestStartBench): new starts against raw copies of the two-commit flow
//     and of the three-commit flow it replaced, replays against their one
//     statement, at 1, 4, 16 and 64 clients, on a durable cluster;
//   - the idempotency plane against raw pgx (idempotency's TestBenchReport,
//     as a `go test` subprocess with SEARCHD_BENCH=1);
//   - the sweeper's claim latency with and without a sweep (sweeper's
//     TestSweepBench, likewise);
//   - one organization's sequential starts while another hammers the API,
//     then the console, with 32 clients ignoring Retry-After (api's
//     TestFairnessBench, likewise);
//   - the HTTP start benchmark (bench/http, built once) at 1, 4, 16 and 64
//     clients, each a run of its own with -json.
//
// The start, plane and sweeper benchmarks and the HTTP runs use a durable
// throwaway cluster (fsync, synchronous_commit and full_page_writes on) and
// print its settings.
//
// The tests print their tables and the report parses them, so the tests
// stay the one definition of what is measured. -quick shrinks every run
// (fewer rounds, shorter phases, 100000 swept rows instead of a million)
// so the whole report takes a few minutes; its figures are noisier.
//
// The chart is written beside the report, with the same name and .svg.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/searchd/searchd/bench/internal/summary"
)

// clientCounts are the concurrencies of the HTTP sweep.
var clientCounts = []int{1, 4, 16, 64}

type config struct {
	out   string
	quick bool
}

func main() {
	var cfg config
	flag.StringVar(&cfg.out, "out", "docs/bench-report.md", "the Markdown report; the chart goes beside it as .svg")
	flag.BoolVar(&cfg.quick, "quick", false, "small runs (a few minutes in all), noisier figures")
	flag.Parse()
	if err := chdirService(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/report:", err)
		os.Exit(1)
	}
	// A full report takes about 20 minutes on a quiet 2-CPU machine; an
	// hour bounds a stuck run.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench/report:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config) error {
	began := time.Now()
	r := &report{began: began.UTC(), quick: cfg.quick}
	r.machine = readMachine(ctx)
	r.loadBefore = summary.LoadAverage()

	sz := sizes(cfg.quick)
	for _, b := range []struct {
		name, desc, pkg, test string
		env                   []string
		parse                 func(out string) error
	}{
		{"start benchmark in process", sz.startDesc, "./admission/", "TestStartBench", sz.startEnv,
			func(out string) (err error) { r.start, err = parseStart(out); return err }},
		{"plane benchmark", sz.planeDesc, "./idempotency/", "TestBenchReport", sz.planeEnv,
			func(out string) (err error) { r.plane, err = parsePlane(out); return err }},
		{"sweeper benchmark", sz.sweepDesc, "./sweeper/", "TestSweepBench", sz.sweepEnv,
			func(out string) (err error) { r.sweep, err = parseSweep(out); return err }},
		{"fairness benchmark", sz.fairDesc, "./api/", "TestFairnessBench", sz.fairEnv,
			func(out string) error { r.fairness = parseFairness(out); return nil }},
	} {
		logf("%s (%s)", b.name, b.desc)
		out, err := goTest(ctx, b.pkg, b.test, b.env)
		if err != nil {
			return err
		}
		if err := b.parse(out); err != nil {
			return err
		}
	}

	dir, err := os.MkdirTemp("", "searchd-bench-report-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "http")
	if err := command(ctx, nil, "go", "-C", "bench", "build", "-o", bin, "./http").Run(); err != nil {
		return fmt.Errorf("building bench/http: %w", err)
	}
	r.httpArgs = sz.httpArgs
	for _, c := range clientCounts {
		logf("HTTP benchmark, %d clients (%s)", c, strings.Join(sz.httpArgs, " "))
		res, err := runHTTP(ctx, bin, dir, c, sz.httpArgs)
		if err != nil {
			return err
		}
		r.http = append(r.http, res)
	}

	r.loadAfter = summary.LoadAverage()
	r.elapsed = time.Since(began)
	svgPath := strings.TrimSuffix(cfg.out, filepath.Ext(cfg.out)) + ".svg"
	r.chartName = filepath.Base(svgPath)
	if err := os.WriteFile(svgPath, chart(r), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(cfg.out, r.markdown(), 0o644); err != nil {
		return err
	}
	logf("wrote %s and %s in %s", cfg.out, svgPath, r.elapsed.Round(time.Second))
	return nil
}

// size is how big each run is.
type size struct {
	startEnv, planeEnv, sweepEnv, fairEnv     []string
	startDesc, planeDesc, sweepDesc, fairDesc string
	httpArgs                                  []string
}

func sizes(quick bool) size {
	if quick {
		return size{
			startEnv:  []string{"SEARCHD_BENCH_ROUNDS=2", "SEARCHD_BENCH_SECONDS=0.5"},
			startDesc: "2 rounds of 0.5 s at 1, 4, 16 and 64 clients",
			planeEnv:  []string{"SEARCHD_BENCH_ROUNDS=3", "SEARCHD_BENCH_OPS=500"},
			planeDesc: "3 rounds of 500 ops",
			sweepEnv: []string{"SEARCHD_BENCH_ROWS=100000", "SEARCHD_BENCH_SECONDS=2",
				"SEARCHD_BENCH_ROUNDS=2"},
			sweepDesc: "100000 rows, 2 pairs of 2 s phases",
			fairEnv:   []string{"SEARCHD_BENCH_ROUNDS=2", "SEARCHD_BENCH_SECONDS=2"},
			fairDesc:  "2 rounds of 2 s phases",
			httpArgs:  []string{"-rounds", "1", "-duration", "1s", "-warmup", "500ms"},
		}
	}
	return size{
		startEnv:  []string{"SEARCHD_BENCH_ROUNDS=7", "SEARCHD_BENCH_SECONDS=2"},
		startDesc: "7 rounds of 2 s per system at 1, 4, 16 and 64 clients",
		planeDesc: "the test's defaults: 7 rounds of 2000 ops",
		sweepDesc: "the test's defaults: 1000000 rows, pairs of 5 s phases until the sweep drains them (at most 40)",
		fairDesc:  "the test's defaults: 3 rounds of 4 s phases, 32 heavy clients",
		httpArgs:  []string{"-rounds", "7", "-duration", "3s"},
	}
}

// chdirService changes to the directory of the searchd module this bench
// module is built against (its replace directive: the repository's root).
func chdirService() error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/searchd/searchd").Output()
	if err != nil {
		return fmt.Errorf("finding the searchd module (run the report inside the bench module): %w", err)
	}
	return os.Chdir(strings.TrimSpace(string(out)))
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench/report: "+format+"\n", args...)
}
