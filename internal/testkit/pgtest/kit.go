package pgtest

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Count returns the count query reads on db; an error fails t.
func Count(t testing.TB, db Querier, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// SyncBuffer is a bytes.Buffer safe for concurrent use, for logs a test
// reads while a server writes them. The zero value is ready to use.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// String returns what has been written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// ClosedPool returns a closed pool on db's database: every call fails at
// once, as when the database is gone.
func ClosedPool(t testing.TB, db *pgxpool.Pool) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	return pool
}

// RunUntilLogged runs run until log (slog JSON) holds n lines with msg, or
// 20 s pass, then cancels run, waits for it, and returns attribute key of
// each such line decoded into T, in order (fewer than n on timeout).
func RunUntilLogged[T any](run func(context.Context), log *SyncBuffer, msg, key string, n int) []T {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); run(ctx) }()
	var vals []T
	for deadline := time.Now().Add(20 * time.Second); len(vals) < n && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		vals = logAttr[T](log.String(), msg, key)
	}
	cancel()
	<-done
	return logAttr[T](log.String(), msg, key)
}

// logAttr decodes attribute key of each line of log with msg into T,
// skipping lines that do not decode.
func logAttr[T any](log, msg, key string) []T {
	var vals []T
	for line := range strings.Lines(log) {
		var rec map[string]json.RawMessage
		var m string
		if json.Unmarshal([]byte(line), &rec) != nil || json.Unmarshal(rec["msg"], &m) != nil || m != msg {
			continue
		}
		var v T
		if json.Unmarshal(rec[key], &v) == nil {
			vals = append(vals, v)
		}
	}
	return vals
}

// Holds reports whether cond holds continuously for stretch, polling, at
// some point within within: for a settled state that a passing moment
// would not prove.
func Holds(cond func() bool, stretch, within time.Duration) bool {
	deadline := time.Now().Add(within)
	since := time.Now()
	for time.Now().Before(deadline) {
		if !cond() {
			since = time.Now()
		} else if time.Since(since) >= stretch {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
