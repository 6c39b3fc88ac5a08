// Package summary is what bench/http -json writes and bench/report reads:
// the medians of a load run, and the machine's load around it.
package summary

import (
	"os"
	"strings"
)

// Summary is the medians the text report prints, for bench/report to
// chart and tabulate.
type Summary struct {
	Clients          int       `json:"clients"`
	Rounds           int       `json:"rounds"`
	Duration         string    `json:"duration"`
	MaxConns         int32     `json:"max_conns"`
	PGVersion        string    `json:"pg_version"`
	PGSettings       string    `json:"pg_settings"`
	LoadBefore       string    `json:"load_before"`
	LoadAfter        string    `json:"load_after"`
	Measures         []Measure `json:"measures"`
	ReplayStatements float64   `json:"replay_statements"`
	StartStatements  float64   `json:"start_statements"`
	// Refused is the real server's 429 answers in the measured rounds.
	Refused int `json:"refused"`
}

// Measure is one measure (new starts or replays): each handler's
// medians and the ratio of median real req/s over median thin req/s.
type Measure struct {
	Measure string  `json:"measure"`
	Real    Side    `json:"real"`
	Thin    Side    `json:"thin"`
	Ratio   float64 `json:"ratio"`
}

// Side is one handler's medians over the rounds of a measure, and its
// tail.
type Side struct {
	RPS   float64 `json:"rps"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	// P999Ms is the median of the rounds' 99.9th percentiles; MaxMs the
	// slowest request of every round; Slow the requests of 50 ms or more,
	// summed over the rounds.
	P999Ms  float64 `json:"p999_ms"`
	MaxMs   float64 `json:"max_ms"`
	Slow    int     `json:"slow"`
	Stmts   float64 `json:"stmts_per_req"`
	Trips   float64 `json:"round_trips_per_req"`
	Commits float64 `json:"commits_per_req"`
}

// Measure returns the named measure ("new starts" or "replays"), zero
// when absent.
func (s Summary) Measure(name string) Measure {
	for _, m := range s.Measures {
		if m.Measure == name {
			return m
		}
	}
	return Measure{}
}

// LoadAverage returns the 1, 5 and 15 minute load averages, or "unknown".
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
