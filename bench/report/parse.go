package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// planeRow is one line of the plane benchmark's table: the plane's figure,
// raw pgx's, their ratio and the target.
type planeRow struct {
	name        string
	plane, raw  float64
	unit        string // "µs" or "/s"
	ratio       float64
	target      string // e.g. "≤ 1.30×"
	description string
}

type planeResult struct {
	header string
	rows   []planeRow
}

// planeLine matches TestBenchReport's
// "%-36s %9.1f %-4s %9.1f %-4s %7.2f× %8s".
var planeLine = regexp.MustCompile(`^(\S.*?)\s+([\d.]+) (µs|/s)\s+([\d.]+) (µs|/s)\s+([\d.]+)×\s+(\S.*)$`)

func parsePlane(out string) (planeResult, error) {
	var r planeResult
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "idempotency plane vs raw pgx") {
			r.header = line
		}
		m := planeLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		row := planeRow{name: m[1], unit: m[3], target: strings.TrimSpace(m[7])}
		var err error
		if row.plane, err = strconv.ParseFloat(m[2], 64); err != nil {
			return r, err
		}
		if row.raw, err = strconv.ParseFloat(m[4], 64); err != nil {
			return r, err
		}
		if row.ratio, err = strconv.ParseFloat(m[6], 64); err != nil {
			return r, err
		}
		r.rows = append(r.rows, row)
	}
	if len(r.rows) == 0 {
		return r, fmt.Errorf("the plane benchmark printed no figures the report can read:\n%s", out)
	}
	return r, nil
}

// sweepResult is what TestSweepBench printed.
type sweepResult struct {
	setup, load, rate     string
	baseClaims, sweptClms int
	baseP50, baseP99      time.Duration
	sweptP50, sweptP99    time.Duration
	ratio                 float64
	target                string
}

var (
	sweepLatency = regexp.MustCompile(`^(without the sweep|with the sweep running)\s+(\d+)\s+(\S+)\s+(\S+)$`)
	sweepRatio   = regexp.MustCompile(`^p99 ratio ([\d.]+)× \(target (.+)\)$`)
)

func parseSweep(out string) (sweepResult, error) {
	var r sweepResult
	seen := 0
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "sweeper: inserted"):
			r.setup = strings.TrimPrefix(line, "sweeper: ")
		case strings.HasPrefix(line, "sweeper: ") && strings.Contains(line, "clients"):
			r.load = strings.TrimPrefix(line, "sweeper: ")
		case strings.HasPrefix(line, "swept "):
			r.rate = line
		}
		if m := sweepRatio.FindStringSubmatch(line); m != nil {
			var err error
			if r.ratio, err = strconv.ParseFloat(m[1], 64); err != nil {
				return r, err
			}
			r.target = m[2]
			seen++
		}
		m := sweepLatency.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, err1 := strconv.Atoi(m[2])
		p50, err2 := time.ParseDuration(m[3])
		p99, err3 := time.ParseDuration(m[4])
		if err1 != nil || err2 != nil || err3 != nil {
			return r, fmt.Errorf("reading the sweeper's line %q", line)
		}
		if m[1] == "without the sweep" {
			r.baseClaims, r.baseP50, r.baseP99 = n, p50, p99
		} else {
			r.sweptClms, r.sweptP50, r.sweptP99 = n, p50, p99
		}
		seen++
	}
	if seen != 3 {
		return r, fmt.Errorf("the sweeper benchmark printed no figures the report can read:\n%s", out)
	}
	return r, nil
}

// meets reports whether ratio meets a target written "≤ 1.30×" or
// "≥ 0.80×"; ok is false when the target cannot be read.
func meets(ratio float64, target string) (met, ok bool) {
	t := strings.TrimSpace(target)
	var le bool
	switch {
	case strings.HasPrefix(t, "≤"):
		le = true
		t = strings.TrimPrefix(t, "≤")
	case strings.HasPrefix(t, "≥"):
		t = strings.TrimPrefix(t, "≥")
	default:
		return false, false
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(t), "×"), 64)
	if err != nil {
		return false, false
	}
	if le {
		return ratio <= v, true
	}
	return ratio >= v, true
}

// parseFairness returns the lines TestFairnessBench printed for the report:
// those starting "fairness: " and its table rows.
func parseFairness(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "fairness: ") || strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "|---") {
			lines = append(lines, l)
		}
	}
	return lines
}
