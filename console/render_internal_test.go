package console

import (
	"testing"

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
