package keyset

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
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
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testKey is a key of a known secret, as LoadKey would return one.
var testKey = mustKey(bytes.Repeat([]byte{7}, KeySize))

func mustKey(secret []byte) Key {
	k, err := NewKey(secret)
	if err != nil {
		panic(err)
	}
	return k
}

// orgA's saved searches: the list most tests mint for.
var (
	orgA, orgB = uuid.MustParse("0190a0b4-6a3c-7c8e-9f00-00000000000a"), uuid.MustParse("0190a0b4-6a3c-7c8e-9f00-00000000000b")
	listA      = List{Name: "savedsearch.list", Org: orgA}
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	want := Position{CreatedAt: time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC), ID: uuid.New()}
	for _, k := range []Key{testKey, {}} {
		got, err := k.Decode(listA, k.Encode(listA, want))
		if err != nil {
			t.Fatalf("Decode(Encode(%v)) error %v", want, err)
		}
		if !got.CreatedAt.Equal(want.CreatedAt) || got.ID != want.ID {
			t.Errorf("Decode(Encode(%v)) = %v", want, *got)
		}
	}
}

func TestDecodeEmptyIsFirstPage(t *testing.T) {
	t.Parallel()
	p, err := testKey.Decode(listA, "")
	if p != nil || err != nil {
		t.Errorf(`Decode("") = %v, %v; want nil, nil`, p, err)
	}
}

func TestDecodeRefusesForeignCursors(t *testing.T) {
	t.Parallel()
	valid := testKey.Encode(listA, Position{CreatedAt: time.Now(), ID: uuid.New()})
	for _, c := range []string{"x", "!!!!", valid[:len(valid)-2], valid + "AA", strings.Repeat("A", len(valid)),
		"AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		if p, err := testKey.Decode(listA, c); !errors.Is(err, ErrInvalid) {
			t.Errorf("Decode(%q) = %v, %v; want ErrInvalid", c, p, err)
		}
	}
}

// forge writes a cursor in the cursors' own format (version 2, a valid
// position) whose MAC is mac, as a client that knows the format but not
// the key would.
func forge(p Position, mac []byte) string {
	b := []byte{version}
	b = binary.BigEndian.AppendUint64(b, uint64(p.CreatedAt.UnixMicro()))
	b = append(b, p.ID[:]...)
	return base64.RawURLEncoding.EncodeToString(append(b, mac...))
}

// versionOne writes a cursor of the format before authentication (issue
// 36): version 1, no MAC. A client may hold one at the upgrade.
func versionOne(p Position) string {
	b := []byte{1}
	b = binary.BigEndian.AppendUint64(b, uint64(p.CreatedAt.UnixMicro()))
	return base64.RawURLEncoding.EncodeToString(append(b, p.ID[:]...))
}

// TestDecodeRefusesCursorsItsKeyDidNotSignForTheList holds the MAC to what
// it covers: a cursor well formed in every byte but the MAC (zero, random,
// the HMAC of the body alone, or under another key) is refused, as is a
// version-1 cursor, and one genuine cursor is refused by every other list:
// another name, another organization, another parent row.
func TestDecodeRefusesCursorsItsKeyDidNotSignForTheList(t *testing.T) {
	t.Parallel()
	p := Position{CreatedAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), ID: uuid.New()}
	genuine := testKey.Encode(listA, p)
	if got, err := testKey.Decode(listA, genuine); err != nil || *got != p {
		t.Fatalf("Decode(genuine) = %v, %v; want %v", got, err, p)
	}
	bodyOnly := hmac.New(sha256.New, testKey.secret)
	bodyOnly.Write(must(base64.RawURLEncoding.DecodeString(genuine))[:bodyLen])
	flipped := must(base64.RawURLEncoding.DecodeString(genuine))
	flipped[encodedLen-1] ^= 1
	other := mustKey(bytes.Repeat([]byte{8}, KeySize))
	for _, tt := range []struct {
		name, cursor string
		list         List
	}{
		{"a zero MAC", forge(p, make([]byte, macLen)), listA},
		{"a MAC of 0xff", forge(p, bytes.Repeat([]byte{0xff}, macLen)), listA},
		{"the HMAC of the body alone", forge(p, bodyOnly.Sum(nil)[:macLen]), listA},
		{"one bit of the MAC flipped", base64.RawURLEncoding.EncodeToString(flipped), listA},
		{"another key's cursor", other.Encode(listA, p), listA},
		{"the zero key's cursor", Key{}.Encode(listA, p), listA},
		{"a version-1 cursor", versionOne(p), listA},
		{"the cursor of another list", genuine, List{Name: "runs.list", Org: orgA}},
		{"the cursor of another organization", genuine, List{Name: listA.Name, Org: orgB}},
		{"the cursor of no organization", genuine, List{Name: listA.Name}},
		{"the cursor of another parent", genuine, List{Name: listA.Name, Org: orgA, Parent: uuid.New()}},
		// The name is length-prefixed: moving a byte between the name and
		// what follows it writes another MAC input.
		{"a name that ends where another begins", testKey.Encode(List{Name: "a"}, p), List{Name: "a\x00"}},
	} {
		if got, err := testKey.Decode(tt.list, tt.cursor); !errors.Is(err, ErrInvalid) || got != nil {
			t.Errorf("%s: Decode = %v, %v; want ErrInvalid", tt.name, got, err)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestNewKeyRefusesAShortSecret(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 16, KeySize - 1} {
		if _, err := NewKey(make([]byte, n)); err == nil {
			t.Errorf("NewKey(%d bytes) = nil error, want a refusal", n)
		}
	}
	secret := bytes.Repeat([]byte{1}, KeySize)
	k := mustKey(secret)
	secret[0] = 2 // the key keeps its own copy
	c := mustKey(bytes.Repeat([]byte{1}, KeySize)).Encode(listA, Position{CreatedAt: time.Now()})
	if _, err := k.Decode(listA, c); err != nil {
		t.Errorf("a key whose caller changed its secret afterwards refuses a cursor of that secret: %v", err)
	}
}

func TestPageTrimsTheRowMoreAndNamesTheLastRowKept(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rows := []Position{{at, uuid.New()}, {at.Add(-time.Second), uuid.New()}, {at.Add(-2 * time.Second), uuid.New()}}
	pos := func(i int) Position { return rows[i] }
	q := must(testKey.Read(listA, "", 2, 50, 200))
	got, next := Page(q, rows, pos)
	if len(got) != 2 || got[1] != rows[1] {
		t.Fatalf("Page(3 rows, limit 2) kept %v, want the first 2", got)
	}
	if p, err := testKey.Decode(listA, next); err != nil || p == nil || *p != rows[1] {
		t.Errorf("next cursor decodes to %v, %v; want the last row kept, %v", p, err, rows[1])
	}
	if p, err := testKey.Decode(List{Name: listA.Name, Org: orgB}, next); !errors.Is(err, ErrInvalid) {
		t.Errorf("next cursor decodes in another organization's list to %v, %v; want ErrInvalid", p, err)
	}
	for _, limit := range []int{3, 4} {
		q := must(testKey.Read(listA, "", limit, 50, 200))
		if got, next := Page(q, rows, pos); len(got) != 3 || next != "" {
			t.Errorf("Page(3 rows, limit %d) = %d rows, next %q; want all and no next page", limit, len(got), next)
		}
	}
}

// cursorAt writes a cursor signed with testKey for listA at an instant
// given in microseconds: Encode itself only ever writes stored rows', so
// these are what a client holding the key could craft.
func cursorAt(us int64, id uuid.UUID) string {
	b := []byte{version}
	b = binary.BigEndian.AppendUint64(b, uint64(us))
	b = append(b, id[:]...)
	return base64.RawURLEncoding.EncodeToString(append(b, testKey.mac(listA, b)...))
}

// TestDecodeRangeChecksTheInstant holds Decode to the instants a query can
// take, even under a valid MAC: the ends of [MinInstant, MaxInstant]
// decode, one microsecond beyond either is refused, and so is a cursor
// with an instant before PostgreSQL's first (4713 BC), which once reached
// the SQL and failed there with SQLSTATE 22008 (a 500 on every console
// list).
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
		p, err := testKey.Decode(listA, cursorAt(tt.us, id))
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
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	valid := testKey.Encode(listA, Position{CreatedAt: time.Now(), ID: uuid.New()})
	last := strings.IndexByte(alphabet, valid[len(valid)-1])
	// The last character carries 4 of its 6 bits (41 bytes): flipping an
	// unused one names the same bytes in a form Encode never writes.
	other := valid[:len(valid)-1] + string(alphabet[last^1])
	for _, c := range []string{other, valid + "=", " " + valid, strings.ReplaceAll(valid, "_", "/")} {
		if c == valid {
			continue
		}
		if p, err := testKey.Decode(listA, c); !errors.Is(err, ErrInvalid) {
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
// panics, and a cursor it accepts is exactly the one Encode writes with
// the key for the list and the position it names, whose instant lies in
// [MinInstant, MaxInstant] (so a query can take it); anything else is
// ErrInvalid.
func FuzzDecode(f *testing.F) {
	id := uuid.MustParse("0190a0b4-6a3c-7c8e-9f00-0123456789ab")
	for _, us := range []int64{0, MinInstant.UnixMicro(), MaxInstant.UnixMicro(), MinInstant.UnixMicro() - 1,
		MaxInstant.UnixMicro() + 1, -211_000_000_000_000_000, math.MinInt64, math.MaxInt64, time.Now().UnixMicro()} {
		f.Add(cursorAt(us, id))
		f.Add(versionOne(Position{CreatedAt: time.UnixMicro(us), ID: id}))
	}
	for _, c := range []string{"", "x", "AAAA", "%00", "!!!!", "AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", strings.Repeat("A", 55)} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, cursor string) {
		p, err := testKey.Decode(listA, cursor)
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
			if again := testKey.Encode(listA, *p); again != cursor {
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
		{testKey.Encode(listA, pos), 500, pos.CreatedAt, pos.ID, 200},
	} {
		r, err := testKey.Read(listA, c.cursor, c.limit, 50, 200)
		if err != nil || r.At != c.wantAt || r.ID != c.wantID || r.Limit != c.wantLimit {
			t.Errorf("Read(%q, %d) = %+v, %v; want {%v %v %d}", c.cursor, c.limit, r, err, c.wantAt, c.wantID, c.wantLimit)
		}
	}
	for _, c := range []string{"not-a-cursor", forge(pos, make([]byte, macLen)), testKey.Encode(List{Name: "runs.list", Org: orgA}, pos)} {
		if _, err := testKey.Read(listA, c, 10, 50, 200); !errors.Is(err, ErrInvalid) {
			t.Errorf("Read of a foreign cursor %q: %v, want ErrInvalid", c, err)
		}
	}
}

// TestLoadKeyReadsTheDatabasesKey: two loads of one database (two
// replicas, or one before and after a restart) give keys that accept each
// other's cursors, and the secret is migration 00022's, 32 bytes; once the
// row's secret is replaced, a key loaded again refuses the cursors of the
// old one (so the key is the row's, not the process's).
func TestLoadKeyReadsTheDatabasesKey(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := t.Context()
	first, err := LoadKey(ctx, db)
	if err != nil {
		t.Fatalf("LoadKey: %v", err)
	}
	second, err := LoadKey(ctx, db)
	if err != nil {
		t.Fatalf("LoadKey again: %v", err)
	}
	if len(first.secret) != KeySize || bytes.Equal(first.secret, make([]byte, KeySize)) {
		t.Fatalf("the database's secret is %x, want %d random bytes", first.secret, KeySize)
	}
	p := Position{CreatedAt: time.Now().UTC().Truncate(time.Microsecond), ID: uuid.New()}
	if got, err := second.Decode(listA, first.Encode(listA, p)); err != nil || *got != p {
		t.Errorf("a second load decodes the first's cursor to %v, %v; want %v", got, err, p)
	}
	if _, err := db.Exec(ctx, `UPDATE agent.cursor_key SET secret = sha256(uuid_send(gen_random_uuid()))`); err != nil {
		t.Fatal(err)
	}
	third, err := LoadKey(ctx, db)
	if err != nil {
		t.Fatalf("LoadKey after the secret changed: %v", err)
	}
	if got, err := third.Decode(listA, first.Encode(listA, p)); !errors.Is(err, ErrInvalid) {
		t.Errorf("a key of another secret decodes the old key's cursor to %v, %v; want ErrInvalid", got, err)
	}
	if _, err := db.Exec(ctx, `DELETE FROM agent.cursor_key`); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(ctx, db); err == nil {
		t.Error("LoadKey of a database without its key = nil error, want one")
	}
}
