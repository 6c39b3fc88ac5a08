package idempotency_test

import (
	"testing"
	"time"

	"github.com/searchd/searchd/idempotency"
)

// TestRetryAfterSecondsRoundsUpToAWholeSecond: the one rounding of every
// Retry-After, never 0 (a client would meet the same live lease at once).
func TestRetryAfterSecondsRoundsUpToAWholeSecond(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		d    time.Duration
		want int
	}{
		{-time.Second, 1}, {0, 1}, {time.Nanosecond, 1}, {time.Second, 1},
		{time.Second + time.Nanosecond, 2}, {1500 * time.Millisecond, 2}, {5 * time.Second, 5}, {29*time.Second + 1, 30},
	} {
		if got := idempotency.RetryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("RetryAfterSeconds(%s) = %d, want %d", tt.d, got, tt.want)
		}
	}
}
