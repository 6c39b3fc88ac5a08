// Package outbound holds what the senders of signed POSTs (packages
// dispatch and webhooks) share: the lease-pass loop, the POST, the retry
// wait and the cleaning of answers; the schedule drain also takes its
// occurrences with [Lease].
package outbound

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryAfter reads a Retry-After header sent at now: delay seconds or an
// HTTP date; 0 when absent or unreadable.
func RetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(min(n, 1<<20)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Retry is the wait before the attempt after attempt (counted from 1): lo
// doubling per attempt up to hi, drawn between half and all of it, and at
// least after (the receiver's Retry-After), up to hi.
func Retry(attempt int, lo, hi, after time.Duration) time.Duration {
	delay := hi
	if shift := attempt - 1; shift >= 0 && shift < 32 {
		if v := lo << shift; v > 0 && v < delay {
			delay = v
		}
	}
	delay = delay/2 + rand.N(delay/2+1)
	if after > delay {
		delay = min(after, hi)
	}
	return delay
}

// Clean returns s as storable text of at most n characters: valid UTF-8,
// with control characters but newline and tab replaced by spaces.
func Clean(s string, n int) string {
	var b strings.Builder
	count := 0
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if count == n {
			break
		}
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
			r = ' '
		}
		b.WriteRune(r)
		count++
	}
	return b.String()
}
