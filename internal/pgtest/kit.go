package pgtest

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
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

// LogAttr returns, in order, the value of the attribute key of each line
// of log (slog's JSONHandler) whose msg is msg, decoded into T (a
// time.Duration from slog's nanoseconds, say). Lines that are not JSON, or
// whose attribute does not decode, are passed over.
func LogAttr[T any](log, msg, key string) []T {
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
