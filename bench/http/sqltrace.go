package main

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// sqlTrace is a pgx QueryTracer that counts the statements a pool runs
// (Query, QueryRow and Exec, including a transaction's begin and commit)
// and, while recording, keeps their text. Both servers' pools carry one, so
// its small cost falls on both sides of every ratio.
type sqlTrace struct {
	n         atomic.Int64
	busy      atomic.Int64 // nanoseconds from the start to the end of statements
	recording atomic.Bool
	mu        sync.Mutex
	recorded  []string
}

func (t *sqlTrace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.n.Add(1)
	if t.recording.Load() {
		t.mu.Lock()
		t.recorded = append(t.recorded, d.SQL)
		t.mu.Unlock()
	}
	return context.WithValue(ctx, startedAtKey{}, time.Now())
}

func (t *sqlTrace) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if at, ok := ctx.Value(startedAtKey{}).(time.Time); ok {
		t.busy.Add(int64(time.Since(at)))
	}
}

type startedAtKey struct{}

// record runs f and returns the statements the pool ran meanwhile. f must
// be the only user of the pool.
func (t *sqlTrace) record(f func() error) ([]string, error) {
	t.mu.Lock()
	t.recorded = nil
	t.mu.Unlock()
	t.recording.Store(true)
	err := f()
	t.recording.Store(false)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.recorded, err
}

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

func statementList(stmts []string) string {
	names := make([]string, len(stmts))
	for i, s := range stmts {
		names[i] = statementName(s)
	}
	return strings.Join(names, ", ")
}
