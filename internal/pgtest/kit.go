package pgtest

import (
	"bytes"
	"context"
	"sync"
	"testing"
)

// Count returns the number read by query (a SELECT count(*) ...) with
// args on db; an error fails t at once, naming the query.
func Count(t testing.TB, db Querier, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// SyncBuffer is a bytes.Buffer safe for concurrent use: a server or a
// command writes to it (its log, its stdout) while the test reads it. The
// zero value is an empty buffer ready to use.
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
