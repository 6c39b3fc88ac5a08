package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/searchd/searchd/bench/internal/summary"
)

func sideSummary(rs []round) summary.Side {
	msOf := func(q float64) float64 {
		return medianOf(rs, func(r round) float64 { return float64(r.quantile(q)) }) / float64(time.Millisecond)
	}
	var slowest time.Duration
	slow := 0
	for _, r := range rs {
		slowest = max(slowest, r.maxLatency())
		slow += len(r.slow)
	}
	return summary.Side{RPS: medianOf(rs, round.rate), P50Ms: msOf(0.50), P99Ms: msOf(0.99), P999Ms: msOf(0.999),
		MaxMs: float64(slowest) / float64(time.Millisecond), Slow: slow,
		Stmts: medianOf(rs, round.statementsPerRequest), Trips: medianOf(rs, round.roundTripsPerRequest),
		Commits: medianOf(rs, round.commitsPerRequest)}
}

func writeJSON(path string, s summary.Summary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing -json: %w", err)
	}
	return nil
}
