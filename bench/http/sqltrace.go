package main

import (
	"strings"

	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// sqlTrace is the tracer on each server's pool: a pgtest.Tracer, which
// counts round trips (a batch is one), statements (a transaction's begin and
// commit count) and commits, and records the statements of each round trip
// while asked. Both servers' pools carry one, so its small cost falls on
// both sides of every ratio.
type sqlTrace = pgtest.Tracer

// normalizeSQL folds white space, so statements compare by their words.
func normalizeSQL(sql string) string { return strings.Join(strings.Fields(sql), " ") }

// statementName names a statement for the report: its queries.go name when
// the thin handler knows it, else its first words.
func statementName(sql string) string {
	n := normalizeSQL(sql)
	if name, ok := statementNames[n]; ok {
		return name
	}
	if len(n) > 40 {
		n = n[:40] + "…"
	}
	return "«" + n + "»"
}

// statementList names the statements of each round trip, a batch in
// brackets.
func statementList(trips [][]string) string {
	parts := make([]string, len(trips))
	for i, trip := range trips {
		names := make([]string, len(trip))
		for j, s := range trip {
			names[j] = statementName(s)
		}
		parts[i] = strings.Join(names, ", ")
		if len(trip) > 1 {
			parts[i] = "[" + parts[i] + "]"
		}
	}
	return strings.Join(parts, " ")
}

// statementCount is the number of statements of a recording.
func statementCount(trips [][]string) int {
	n := 0
	for _, trip := range trips {
		n += len(trip)
	}
	return n
}
