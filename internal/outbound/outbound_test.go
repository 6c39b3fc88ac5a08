package outbound

import (
	"net/http"
	"testing"
	"time"
)

// TestRetry: the wait before a retry doubles from lo per attempt, drawn
// in its upper half, up to hi; a longer Retry-After wins, up to hi.
func TestRetry(t *testing.T) {
	for _, c := range []struct {
		attempt         int
		after, from, to time.Duration
	}{
		{1, 0, 5, 10}, {2, 0, 10, 20}, {3, 0, 20, 40}, {9, 0, 50, 100}, {40, 0, 50, 100},
		{1, 70, 70, 70}, {1, time.Hour, 100, 100},
	} {
		for range 50 {
			if d := Retry(c.attempt, 10, 100, c.after); d < c.from || d > c.to {
				t.Fatalf("Retry(%d, 10, 100, %d) = %d, want %d to %d", c.attempt, c.after, d, c.from, c.to)
			}
		}
	}
}

// TestRetryAfter reads delay seconds and HTTP dates, and nothing else.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "7": 7 * time.Second, " 7 ": 7 * time.Second, "-1": 0, "soon": 0,
		now.Add(time.Minute).Format(http.TimeFormat): time.Minute, now.Add(-time.Minute).Format(http.TimeFormat): 0,
		"99999999999": (1 << 20) * time.Second,
	} {
		if got := RetryAfter(v, now); got != want {
			t.Errorf("RetryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}

// TestClean keeps newline and tab, replaces other controls and invalid
// bytes, and cuts at n characters.
func TestClean(t *testing.T) {
	if got, want := Clean("a\x00b\nc\td\xffé\x7fzz", 10), "a b\nc\td\uFFFDé "; got != want {
		t.Errorf("Clean = %q, want %q", got, want)
	}
}
