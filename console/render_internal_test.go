package console

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/internal/ids"
)

// Ids minted in the same minute share their first 8 characters when they
// are time-ordered: the short form must still tell them apart.
func TestShortIDTellsApartIdsOfTheSameMinute(t *testing.T) {
	a, b := ids.New(), ids.New()
	if shortID(a) == shortID(b) {
		t.Errorf("shortID(%s) = shortID(%s) = %q, want them different", a, b, shortID(a))
	}
	if got, want := shortID(a), a.String()[28:]; got != want {
		t.Errorf("shortID(%s) = %q, want %q (its random tail)", a, got, want)
	}
	old := uuid.MustParse("490a1e1f-6cde-4c6d-a671-eff565a1698f")
	if got := shortID(old); got != "490a1e1f" {
		t.Errorf("shortID(%s) = %q, want its first 8, as before", old, got)
	}
}

// TestAgoReadsEveryStorableTime: the relative times of the console's
// pages, at the extremes a record can hold (a schedule due in year 9999
// read "in -9223372036854 ms"; issue 36).
func TestAgoReadsEveryStorableTime(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(9999, 12, 24, 23, 59, 59, 0, time.UTC), "in 7973 years"},
		{time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), "56 years ago"},
		{now.Add(90 * time.Second), "in 1 min"},
		{now.Add(-3 * time.Hour), "3 h ago"},
		{now.AddDate(1, 0, 0), "in 365 d 0 h"},
	} {
		if got := strings.ReplaceAll(ago(now, tc.t), "\u00a0", " "); got != tc.want {
			t.Errorf("ago(%s) = %q, want %q", tc.t, got, tc.want)
		}
	}
}

// TestPluralSaysOneItem: a count of one takes the singular, every other
// count (none included) the plural, whatever integer type the page holds.
func TestPluralSaysOneItem(t *testing.T) {
	for _, tt := range []struct {
		n    any
		want string
	}{
		{1, "1 item"}, {int64(1), "1 item"}, {int32(1), "1 item"}, {0, "0 items"}, {2, "2 items"}, {int64(10000), "10000 items"}, {-1, "-1 items"},
	} {
		if got := plural(tt.n, "item", "items"); got != tt.want {
			t.Errorf("plural(%v) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
