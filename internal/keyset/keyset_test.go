package keyset

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/errs"
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

// cursorAt writes a version-1 cursor for an instant given in microseconds,
// as a crafted cursor would: Encode itself only ever writes stored rows'.
func cursorAt(us int64, id uuid.UUID) string {
	b := []byte{version}
	b = binary.BigEndian.AppendUint64(b, uint64(us))
	return base64.RawURLEncoding.EncodeToString(append(b, id[:]...))
}

// TestDecodeRangeChecksTheInstant holds Decode to the instants a query can
// take: the ends of [MinInstant, MaxInstant] decode, one microsecond
// beyond either is refused, and so is a well-formed cursor crafted with an
// instant before PostgreSQL's first (4713 BC), which once reached the SQL
// and failed there with SQLSTATE 22008 (a 500 on every console list).
func TestDecodeRangeChecksTheInstant(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	lo, hi := MinInstant.UnixMicro(), MaxInstant.UnixMicro()
	for _, tt := range []struct {
		name string
		us   int64
		ok   bool
	}{
		{"the first instant", lo, true},
		{"the last instant", hi, true},
		{"the Unix epoch", 0, true},
		{"one microsecond before the first", lo - 1, false},
		{"one microsecond after the last", hi + 1, false},
		{"before 4713 BC", -211_000_000_000_000_000, false},
		{"the least int64", math.MinInt64, false},
		{"the greatest int64", math.MaxInt64, false},
	} {
		p, err := Decode(cursorAt(tt.us, id))
		switch {
		case tt.ok && (err != nil || p == nil || p.CreatedAt.UnixMicro() != tt.us || p.ID != id):
			t.Errorf("%s: Decode = %v, %v; want the position back", tt.name, p, err)
		case !tt.ok && (!errors.Is(err, ErrInvalid) || p != nil):
			t.Errorf("%s: Decode = %v, %v; want ErrInvalid", tt.name, p, err)
		}
	}
}

func TestDecodeRefusesAnyFormEncodeDoesNotWrite(t *testing.T) {
	t.Parallel()
	valid := Encode(Position{CreatedAt: time.Now(), ID: uuid.New()})
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", valid[len(valid)-1])
	// The last character carries 2 of its 6 bits: flipping an unused one
	// names the same bytes in a form Encode never writes.
	other := valid[:len(valid)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last^1])
	for _, c := range []string{other, valid + "=", " " + valid, strings.ReplaceAll(valid, "_", "/")} {
		if c == valid {
			continue
		}
		if p, err := Decode(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("Decode(%q) = %v, %v; want ErrInvalid (Encode writes %q)", c, p, err, valid)
		}
	}
}

func TestInvalidCursorIsAnInvalidKindThatWrapsErrInvalid(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("list: %w", InvalidCursor("runs"))
	if !errors.Is(err, ErrInvalid) || errs.KindOf(err) != errs.Invalid || InvalidCursor("runs").Error() != "runs: invalid cursor" {
		t.Errorf("InvalidCursor(runs) = %v (kind %s), want an invalid error wrapping ErrInvalid", err, errs.KindOf(err))
	}
}

// FuzzDecode holds every cursor, whatever a client sends: Decode never
// panics, and a cursor it accepts is exactly the one Encode writes for
// the position it names, whose instant lies in [MinInstant, MaxInstant]
// (so a query can take it); anything else is ErrInvalid.
func FuzzDecode(f *testing.F) {
	id := uuid.MustParse("0190a0b4-6a3c-7c8e-9f00-0123456789ab")
	for _, us := range []int64{0, MinInstant.UnixMicro(), MaxInstant.UnixMicro(), MinInstant.UnixMicro() - 1,
		MaxInstant.UnixMicro() + 1, -211_000_000_000_000_000, math.MinInt64, math.MaxInt64, time.Now().UnixMicro()} {
		f.Add(cursorAt(us, id))
	}
	for _, c := range []string{"", "x", "AAAA", "%00", "!!!!", "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", strings.Repeat("A", 35)} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, cursor string) {
		p, err := Decode(cursor)
		switch {
		case err != nil:
			if !errors.Is(err, ErrInvalid) || p != nil {
				t.Fatalf("Decode(%q) = %v, %v; want nil, ErrInvalid", cursor, p, err)
			}
		case p == nil:
			if cursor != "" {
				t.Fatalf("Decode(%q) = nil, nil; only the empty cursor is the first page", cursor)
			}
		default:
			if p.CreatedAt.Before(MinInstant) || p.CreatedAt.After(MaxInstant) {
				t.Fatalf("Decode(%q) = %v, outside [%v, %v]", cursor, p.CreatedAt, MinInstant, MaxInstant)
			}
			if again := Encode(*p); again != cursor {
				t.Fatalf("Decode(%q) = %v, whose cursor is %q: an accepted cursor must be Encode's", cursor, *p, again)
			}
		}
	})
}

func TestReadGivesTheCursorsArgumentsAndTheBoundedLimit(t *testing.T) {
	t.Parallel()
	pos := Position{CreatedAt: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC), ID: uuid.New()}
	for _, c := range []struct {
		cursor    string
		limit     int
		wantAt    any
		wantID    any
		wantLimit int
	}{
		{"", 0, nil, nil, 50},
		{"", 7, nil, nil, 7},
		{Encode(pos), 500, pos.CreatedAt, pos.ID, 200},
	} {
		r, err := Read(c.cursor, c.limit, 50, 200)
		if err != nil || r.At != c.wantAt || r.ID != c.wantID || r.Limit != c.wantLimit {
			t.Errorf("Read(%q, %d) = %+v, %v; want {%v %v %d}", c.cursor, c.limit, r, err, c.wantAt, c.wantID, c.wantLimit)
		}
	}
	if _, err := Read("not-a-cursor", 10, 50, 200); !errors.Is(err, ErrInvalid) {
		t.Errorf("Read of a foreign cursor: %v, want ErrInvalid", err)
	}
}
