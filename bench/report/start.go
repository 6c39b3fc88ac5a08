package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// startRow is one figure of admission's TestStartBench (its benchRow).
type startRow struct {
	Measure    string  `json:"measure"`
	Clients    int     `json:"clients"`
	System     string  `json:"system"`
	Median     float64 `json:"median"`
	Min        float64 `json:"min"`
	Max        float64 `json:"max"`
	Ratio      float64 `json:"ratio"`
	RatioMin   float64 `json:"ratio_min"`
	RatioMax   float64 `json:"ratio_max"`
	RoundTrips float64 `json:"round_trips"`
	Statements float64 `json:"statements"`
	Commits    float64 `json:"commits"`
}

// startResult is what TestStartBench printed: its settings line, its load
// line and its rows.
type startResult struct {
	database, load string
	rows           []startRow
}

func parseStart(out string) (startResult, error) {
	var r startResult
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "database "):
			r.database = strings.TrimSpace(strings.TrimPrefix(line, "database"))
		case strings.HasPrefix(line, "load ") && r.load == "":
			r.load = strings.TrimSpace(strings.TrimPrefix(line, "load"))
		case strings.HasPrefix(line, "start-bench-json: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "start-bench-json: ")), &r.rows); err != nil {
				return r, fmt.Errorf("reading the start benchmark's figures: %w", err)
			}
		}
	}
	if len(r.rows) == 0 {
		return r, fmt.Errorf("the start benchmark printed no figures the report can read:\n%s", out)
	}
	return r, nil
}

// row returns the figure of system for measure at clients.
func (r startResult) row(measure string, clients int, system string) (startRow, bool) {
	for _, x := range r.rows {
		if x.Measure == measure && x.Clients == clients && x.System == system {
			return x, true
		}
	}
	return startRow{}, false
}

// clients returns the client counts of measure, in the order measured.
func (r startResult) clients(measure string) []int {
	var cs []int
	seen := map[int]bool{}
	for _, x := range r.rows {
		if x.Measure == measure && !seen[x.Clients] {
			seen[x.Clients] = true
			cs = append(cs, x.Clients)
		}
	}
	return cs
}
