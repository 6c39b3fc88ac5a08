package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// jsonSummary is what -json writes: the medians the text report prints,
// for bench/report to chart and tabulate.
type jsonSummary struct {
	Clients          int           `json:"clients"`
	Rounds           int           `json:"rounds"`
	Duration         string        `json:"duration"`
	MaxConns         int32         `json:"max_conns"`
	PGVersion        string        `json:"pg_version"`
	PGSettings       string        `json:"pg_settings"`
	LoadBefore       string        `json:"load_before"`
	LoadAfter        string        `json:"load_after"`
	Measures         []jsonMeasure `json:"measures"`
	ReplayStatements float64       `json:"replay_statements"`
	StartStatements  float64       `json:"start_statements"`
	// Refused is the real server's 429 answers in the measured rounds.
	Refused int `json:"refused"`
}

// jsonMeasure is one measure (new starts or replays): each handler's
// medians and the ratio of median real req/s over median thin req/s.
type jsonMeasure struct {
	Measure string   `json:"measure"`
	Real    jsonSide `json:"real"`
	Thin    jsonSide `json:"thin"`
	Ratio   float64  `json:"ratio"`
}

// jsonSide is one handler's medians over the rounds of a measure.
type jsonSide struct {
	RPS     float64 `json:"rps"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	Stmts   float64 `json:"stmts_per_req"`
	Trips   float64 `json:"round_trips_per_req"`
	Commits float64 `json:"commits_per_req"`
}

func sideSummary(rs []round) jsonSide {
	msOf := func(q float64) float64 {
		return medianOf(rs, func(r round) float64 { return float64(r.quantile(q)) }) / float64(time.Millisecond)
	}
	return jsonSide{RPS: medianOf(rs, round.rate), P50Ms: msOf(0.50), P99Ms: msOf(0.99),
		Stmts: medianOf(rs, round.statementsPerRequest), Trips: medianOf(rs, round.roundTripsPerRequest),
		Commits: medianOf(rs, round.commitsPerRequest)}
}

func writeJSON(path string, s jsonSummary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing -json: %w", err)
	}
	return nil
}
