package keyset

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	want := Position{CreatedAt: time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC), ID: uuid.New()}
	got, err := Decode(Encode(want))
	if err != nil {
		t.Fatalf("Decode(Encode(%v)) error %v", want, err)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) || got.ID != want.ID {
		t.Errorf("Decode(Encode(%v)) = %v", want, *got)
	}
}

func TestDecodeEmptyIsFirstPage(t *testing.T) {
	t.Parallel()
	p, err := Decode("")
	if p != nil || err != nil {
		t.Errorf(`Decode("") = %v, %v; want nil, nil`, p, err)
	}
}

func TestDecodeRefusesForeignCursors(t *testing.T) {
	t.Parallel()
	valid := Encode(Position{CreatedAt: time.Now(), ID: uuid.New()})
	for _, c := range []string{"x", "!!!!", valid[:len(valid)-2], valid + "AA", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		if p, err := Decode(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("Decode(%q) = %v, %v; want ErrInvalid", c, p, err)
		}
	}
}

func TestPageTrimsTheRowMoreAndNamesTheLastRowKept(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rows := []Position{{at, uuid.New()}, {at.Add(-time.Second), uuid.New()}, {at.Add(-2 * time.Second), uuid.New()}}
	pos := func(i int) Position { return rows[i] }
	got, next := Page(rows, 2, pos)
	if len(got) != 2 || got[1] != rows[1] {
		t.Fatalf("Page(3 rows, limit 2) kept %v, want the first 2", got)
	}
	if p, err := Decode(next); err != nil || p == nil || *p != rows[1] {
		t.Errorf("next cursor decodes to %v, %v; want the last row kept, %v", p, err, rows[1])
	}
	for _, limit := range []int{3, 4} {
		if got, next := Page(rows, limit, pos); len(got) != 3 || next != "" {
			t.Errorf("Page(3 rows, limit %d) = %d rows, next %q; want all and no next page", limit, len(got), next)
		}
	}
}
