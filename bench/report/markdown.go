package main

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/searchd/searchd/bench/internal/summary"
)

// httpTargetRatio and httpTargetReplayStmts are issue 17's targets, as
// bench/http prints them; the start benchmark's are below.
const (
	httpTargetRatio       = "≥ 0.90×"
	httpTargetReplayStmts = 1
	// headlineClients is the concurrency of the summary's HTTP figures:
	// bench/http's default.
	headlineClients = 16
)

type report struct {
	began                 time.Time
	elapsed               time.Duration
	quick                 bool
	machine               machine
	loadBefore, loadAfter string
	start                 startResult
	plane                 planeResult
	sweep                 sweepResult
	http                  []summary.Summary
	httpArgs              []string
	chartName             string
	// fairness is the lines TestFairnessBench printed: its setup and its
	// Markdown table, kept as the test wrote them.
	fairness []string
}

func verdictOf(ratio float64, target string) string {
	met, ok := meets(ratio, target)
	switch {
	case !ok:
		return "?"
	case met:
		return "met"
	}
	return "**missed**"
}

// markdown writes the report: its head, the machine, the summary, the
// fairness benchmark's table, then the starts against concurrency.
func (r *report) markdown() []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	r.head(p)
	r.machineTable(p)
	r.summary(p)
	r.fairnessSection(p)
	r.concurrency(p)
	return b.Bytes()
}

// head writes the title: the command that wrote the report, when, and how
// to read its ratios.
func (r *report) head(p func(string, ...any)) {
	cmd := "go -C bench run ./report"
	if r.quick {
		cmd += " -quick"
	}
	p("# searchd benchmark report\n\n")
	p("Written by `%s` on %s; the runs took %s.", cmd,
		r.began.Format("2006-01-02 15:04 MST"), r.elapsed.Round(time.Second))
	if r.quick {
		p(" **Quick mode**: every run was shrunk (fewer rounds, one 1 s HTTP round per concurrency, " +
			"100000 swept rows), so the figures are much noisier than those of a full run (`make bench`).")
	}
	p("\n\nEvery figure stands beside a baseline measured in the same run on the same machine, " +
		"and the ratio between them is what the targets bound; the absolute figures only describe this machine. " +
		"How each benchmark works: [benchmarks.md](benchmarks.md).\n\n")
}

// machineTable writes where the benchmarks ran.
func (r *report) machineTable(p func(string, ...any)) {
	p("## Machine\n\n| | |\n|---|---|\n")
	p("| CPUs | %d (%s) |\n", r.machine.cpus, r.machine.cpuModel)
	p("| memory | %s |\n", r.machine.memory)
	p("| OS | %s |\n", r.machine.kernel)
	p("| Go | %s |\n", r.machine.goVersion)
	if len(r.http) > 0 {
		p("| PostgreSQL | %s |\n", r.http[0].PGVersion)
		p("| PostgreSQL settings (HTTP runs) | %s |\n", r.http[0].PGSettings)
	}
	if r.start.database != "" {
		p("| PostgreSQL settings (in-process runs) | %s |\n", r.start.database)
	}
	p("| load average (1, 5, 15 min) | before %s, after %s |\n\n", r.loadBefore, r.loadAfter)
}

// summary writes the table of every headline figure beside its baseline,
// ratio, target and verdict, then what the baselines are.
func (r *report) summary(p func(string, ...any)) {
	p("## Summary\n\n")
	p("| benchmark | figure | searchd | baseline | ratio | target | |\n|---|---|---:|---:|---:|---|---|\n")
	r.summaryInProcess(p)
	for _, row := range r.plane.rows {
		p("| plane vs raw pgx | %s | %s | %s | %.2f× | %s | %s |\n", row.name,
			unitFigure(row.plane, row.unit), unitFigure(row.raw, row.unit), row.ratio, row.target,
			verdictOf(row.ratio, row.target))
	}
	r.summaryHTTP(p)
	s := r.sweep
	p("| sweeper vs no sweep | claim p99 | %s | %s | %.2f× | %s | %s |\n",
		dur(s.sweptP99), dur(s.baseP99), s.ratio, s.target, verdictOf(s.ratio, s.target))
	p("| sweeper vs no sweep | claim p50 | %s | %s | %.2f× | | |\n",
		dur(s.sweptP50), dur(s.baseP50), float64(s.sweptP50)/float64(s.baseP50))
	r.whyMissed(p)
	p("\nBaselines: the plane against raw pgx issuing the same SQL (%s); "+
		"searchd's HTTP start against a thin echo + pgx handler issuing the same SQL; "+
		"claims while the sweeper deletes expired rows against claims with no sweep (%s; %s).\n\n",
		r.plane.header, s.setup, s.load)
	p("The load average is the machine's: anything else running on it during the report shows there " +
		"and weighs on both sides of each ratio, but not always equally.\n\n")
	if s.rate != "" {
		p("Sweeper: %s.\n\n", s.rate)
	}
}

// summaryInProcess writes the summary's rows of the start benchmark in
// process: the ratios to the raw flows, commits, round trips, statements
// and allocations.
func (r *report) summaryInProcess(p func(string, ...any)) {
	for _, t := range []struct {
		measure, system, figure, target string
	}{
		{"new starts", "raw 3 commits", "new starts, 16 clients, vs raw three-commit flow", "≥ 1.30×"},
		{"new starts", "raw 2 commits", "new starts, 16 clients, vs raw two-commit flow", "≥ 0.90×"},
		{"replays", "raw", "replays, 16 clients, vs raw statement", "≥ 0.90×"},
	} {
		base, ok1 := r.start.row(t.measure, headlineClients, t.system)
		own, ok2 := r.start.row(t.measure, headlineClients, "searchd")
		if ok1 && ok2 {
			p("| in process | %s | %.0f/s | %.0f/s | %.2f× | %s | %s |\n", t.figure, own.Median, base.Median,
				base.Ratio, t.target, verdictOf(base.Ratio, t.target))
		}
	}
	if own, ok := r.start.row("new starts", headlineClients, "searchd"); ok {
		p("| in process | commits and round trips per new start (tracer) | %.2f and %.2f | | | ≤ 2 and ≤ 5 | %s |\n",
			own.Commits, own.RoundTrips, metUnless(own.Commits > 2 || own.RoundTrips > 5))
	}
	if own, ok := r.start.row("replays", headlineClients, "searchd"); ok {
		p("| in process | statements per replay (tracer) | %.2f | | | 1 | %s |\n", own.Statements, metUnless(own.Statements > 1))
	}
	if own, ok := r.start.row("allocs per replay", 0, "searchd"); ok {
		base, _ := r.start.row("allocs per replay", 0, "raw")
		p("| in process | allocations per replay | %.0f | %.0f | %.2f× | | |\n", own.Median, base.Median, base.Ratio)
	}
}

// summaryHTTP writes the summary's rows of bench/http at headlineClients.
func (r *report) summaryHTTP(p func(string, ...any)) {
	h, ok := r.httpAt(headlineClients)
	if !ok {
		return
	}
	for _, name := range []string{"new starts", "replays"} {
		m := h.Measure(name)
		p("| HTTP, %d clients, vs thin handler | %s, req/s | %.0f/s | %.0f/s | %.2f× | %s | %s |\n",
			h.Clients, name, m.Real.RPS, m.Thin.RPS, m.Ratio, httpTargetRatio, verdictOf(m.Ratio, httpTargetRatio))
	}
	p("| HTTP | SQL statements per replay | %.2f | %.2f | | ≤ %d | %s |\n",
		h.ReplayStatements, h.Measure("replays").Thin.Stmts, httpTargetReplayStmts,
		metUnless(h.ReplayStatements > httpTargetReplayStmts))
}

// metUnless is a verdict: met, or missed when missed.
func metUnless(missed bool) string {
	if missed {
		return "**missed**"
	}
	return "met"
}

// fairnessSection writes api's TestFairnessBench as it printed it, when
// it ran.
func (r *report) fairnessSection(p func(string, ...any)) {
	if len(r.fairness) == 0 {
		return
	}
	p("## One organization hammering, another starting\n\n")
	p("api's `TestFairnessBench`: one organization makes sequential starts while another hammers the API " +
		"(lists of 200 and starts), then the console (its largest page), with clients that ignore Retry-After; " +
		"the light organization's p50 and p99 beside its latency alone, its 429s, and the heavy organization's " +
		"2xx. The server runs at its defaults (the seat queue, the pool) on a durable cluster of its own.\n\n")
	for _, l := range r.fairness {
		if strings.HasPrefix(l, "|") {
			p("%s\n", l)
		} else {
			p("%s\n\n", strings.TrimPrefix(l, "fairness: "))
		}
	}
	p("\n")
}

// concurrency writes the chart and the tables of starts at each
// concurrency: in process against raw SQL, over HTTP against the thin
// handler.
func (r *report) concurrency(p func(string, ...any)) {
	p("## Starts against concurrency\n\n")
	p("![calls per second against concurrent clients: in process against raw SQL, and over HTTP against the thin handler](%s)\n\n", r.chartName)
	p("### In process, against raw SQL\n\n")
	p("`SEARCHD_BENCH=1 go test -run TestStartBench -v ./admission/` (%s): %s. "+
		"Medians of the rounds (min–max); a ratio is searchd's median over the baseline's, "+
		"[the range of the rounds' own ratios]; round trips, statements and commits per call come from a pgx tracer on each pool.\n\n",
		r.start.load, r.start.database)
	p("| measure | clients | system | calls/s (min–max) | searchd ÷ it [rounds] | round trips | statements | commits |\n")
	p("|---|---:|---|---:|---:|---:|---:|---:|\n")
	for _, x := range r.start.rows {
		if x.Measure == "allocs per replay" {
			continue
		}
		ratio := ""
		if x.Ratio != 0 {
			ratio = fmt.Sprintf("%.2f× [%.2f–%.2f]", x.Ratio, x.RatioMin, x.RatioMax)
		}
		p("| %s | %d | %s | %.0f (%.0f–%.0f) | %s | %.2f | %.2f | %.2f |\n", x.Measure, x.Clients, x.System,
			x.Median, x.Min, x.Max, ratio, x.RoundTrips, x.Statements, x.Commits)
	}
	p("\n### Over HTTP, against the thin handler\n\n")
	p("Each concurrency is a separate `bench/http -clients N %s` run on a fresh database; "+
		"the figures are medians of its rounds, and the ratio is searchd's median req/s over the thin handler's. "+
		"Both servers use pgxpool's default pool (MaxConns %d here).\n\n",
		strings.Join(r.httpArgs, " "), r.maxConns())
	p("| clients | new starts: searchd | thin | ratio | p99, p99.9 searchd (thin) | trips, commits | replays: searchd | thin | ratio | p99, p99.9 searchd (thin) |\n")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	tail := func(m summary.Measure) string {
		return fmt.Sprintf("%.1f, %.1f ms (%.1f, %.1f)", m.Real.P99Ms, m.Real.P999Ms, m.Thin.P99Ms, m.Thin.P999Ms)
	}
	for _, h := range r.http {
		n, rp := h.Measure("new starts"), h.Measure("replays")
		p("| %d | %.0f/s | %.0f/s | %.2f× | %s | %.2f, %.2f | %.0f/s | %.0f/s | %.2f× | %s |\n", h.Clients,
			n.Real.RPS, n.Thin.RPS, n.Ratio, tail(n), n.Real.Trips, n.Real.Commits, rp.Real.RPS, rp.Thin.RPS, rp.Ratio, tail(rp))
	}
	p("\nThe whole run shares %d CPUs between the load generator, both servers and PostgreSQL, "+
		"so requests per second flatten once those CPUs are busy; the ratio is the figure to compare "+
		"between machines. The percentiles are medians of the rounds'; bench/http's own output has each round's, "+
		"the slowest request and a histogram.\n", r.machine.cpus)
}

func (r *report) httpAt(clients int) (summary.Summary, bool) {
	for _, h := range r.http {
		if h.Clients == clients {
			return h, true
		}
	}
	return summary.Summary{}, false
}

func (r *report) maxConns() int32 {
	if len(r.http) == 0 {
		return 0
	}
	return r.http[0].MaxConns
}

func unitFigure(v float64, unit string) string {
	if unit == "/s" {
		return fmt.Sprintf("%.0f/s", v)
	}
	return fmt.Sprintf("%.1f µs", v)
}

func dur(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// whyMissed says, under the summary, why the figure of new starts against
// the raw three-commit flow misses when it does: what the raw two-commit
// copy itself reaches against that flow in the same run bounds every
// two-commit implementation of the same statements.
func (r *report) whyMissed(p func(string, ...any)) {
	raw3, ok1 := r.start.row("new starts", headlineClients, "raw 3 commits")
	raw2, ok2 := r.start.row("new starts", headlineClients, "raw 2 commits")
	if !ok1 || !ok2 || raw3.Median == 0 || verdictOf(raw3.Ratio, "≥ 1.30×") == "met" || raw2.Median/raw3.Median >= 1.3 {
		return // met, or missed for a reason of searchd's own
	}
	p("\n**Why new starts miss 1.30× the raw three-commit flow:** in the same run the raw two-commit copy "+
		"(the same statements, no Go beyond pgx; it differs from the three-commit copy only in the commit saved) "+
		"reaches %.2f× the three-commit flow at %d clients (%.0f/s against %.0f/s). "+
		"On this machine's disk the commit saved is worth less than 1.30×, so the two-commit flow, in "+
		"these statements and round trips, could reach 1.30× only by costing less than its own raw copy; "+
		"the figure that measures searchd's own cost is the ratio to that copy, %.2f× (target ≥ 0.90×).\n",
		raw2.Median/raw3.Median, headlineClients, raw2.Median, raw3.Median, raw2.Ratio)
}
