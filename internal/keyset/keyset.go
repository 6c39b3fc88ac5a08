// Package keyset encodes the opaque cursors of searchd's newest-first lists.
//
// A cursor is the (created_at, id) of the last row a page returned; the next
// page asks for rows strictly before it in (created_at DESC, id DESC) order.
// Unlike an offset, it neither skips nor repeats rows when new ones arrive
// between pages, and it costs an index seek however deep the page.
//
// A cursor is authenticated: it carries a MAC, under the database's cursor
// [Key], over its position and the [List] it was minted for (the list's
// name, the organization whose rows it shows, the row it is a list of). A
// cursor searchd did not mint, or minted for another list or another
// organization, is refused with [ErrInvalid] before any SQL runs, so a
// client can only ask for positions a page of its own list handed it.
package keyset

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/errs"
)

// ErrInvalid reports a cursor this package did not write: not its
// encoding, a MAC that does not verify under the key for the list it is
// presented to (a forged cursor, an old version-1 cursor, one minted for
// another list or organization), or an instant outside [MinInstant,
// MaxInstant]. Its kind is [errs.Invalid]. Every list's own sentinel wraps
// it ([InvalidCursor]), so the edges recognize a refused cursor of any list
// with one errors.Is(err, ErrInvalid), and its refused field is the cursor.
var ErrInvalid = &errs.Error{Kind: errs.Invalid, Message: "keyset: invalid cursor",
	Fields: []errs.Field{{Name: "cursor", Message: "is not a cursor this API returned"}}}

// InvalidCursor returns the sentinel a package's lists answer for a cursor
// [Key.Decode] refused: an [errs.Invalid] error whose message names the
// package, wrapping [ErrInvalid].
func InvalidCursor(pkg string) *errs.Error {
	return &errs.Error{Kind: errs.Invalid, Message: pkg + ": invalid cursor", Err: ErrInvalid}
}

// MinInstant and MaxInstant bound the instant a cursor may carry: the years
// 1 to 9999, the instants RFC 3339 can write. A cursor only ever names a
// stored row, whose instants lie well inside them, and they lie well inside
// PostgreSQL's timestamptz (4713 BC to 294276 AD), so an accepted cursor
// never makes a query fail: a version-1 cursor crafted with an instant
// before 4713 BC once reached the SQL, which failed with "timestamp out of
// range" (SQLSTATE 22008). The MAC now keeps crafted cursors out; the
// range check stays as a second line.
var (
	MinInstant = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)
	MaxInstant = time.Date(9999, time.December, 31, 23, 59, 59, 999999000, time.UTC)
)

// Position is a row's place in a newest-first list.
type Position struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// List names the list a cursor belongs to. A cursor minted for one List is
// refused by every other: another list, the same list of another
// organization, or of another parent row.
type List struct {
	// Name names the list, unique in searchd ("runs.list").
	Name string
	// Org is the organization whose rows the list shows; uuid.Nil for a
	// list across organizations (the operator's).
	Org uuid.UUID
	// Parent is the row the list is a list of (the saved search of a
	// snapshot list, the job of a drop list); uuid.Nil for none.
	Parent uuid.UUID
}

// version is the first byte of every cursor, so the format can change
// without misreading old cursors. Version 1 (no MAC) is refused.
const version = 2

// macLen is the length of a cursor's MAC: HMAC-SHA256, truncated to 128
// bits, which no client can guess.
const macLen = 16

// bodyLen is the size of what the MAC covers of the cursor itself:
// version, microseconds, id; encodedLen adds the MAC.
const (
	bodyLen    = 1 + 8 + 16
	encodedLen = bodyLen + macLen
)

// KeySize is the size of a cursor key's secret, in bytes.
const KeySize = 32

// Key signs the cursors searchd mints and verifies those it is handed.
// Every replica must use the same key, or a cursor one minted is refused
// by the next: production reads it from the database once at startup
// ([LoadKey]) and hands it to every store that lists.
//
// The zero Key signs with a secret drawn at random once per process: its
// cursors are unforgeable, but refused by every other process. It is for
// tests and tools that list within one process; a store given no key uses
// it.
type Key struct {
	secret []byte
}

// processSecret is the zero Key's secret.
var processSecret = sync.OnceValue(func() []byte {
	b := make([]byte, KeySize)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it crashes the program instead)
	return b
})

// NewKey returns the key of secret. It returns an error when secret is
// shorter than [KeySize] bytes.
func NewKey(secret []byte) (Key, error) {
	if len(secret) < KeySize {
		return Key{}, fmt.Errorf("keyset: a cursor key needs %d bytes of secret, got %d", KeySize, len(secret))
	}
	return Key{secret: append([]byte(nil), secret...)}, nil
}

func (k Key) key() []byte {
	if k.secret == nil {
		return processSecret()
	}
	return k.secret
}

// mac returns the MAC of a cursor's body for list l.
func (k Key) mac(l List, body []byte) []byte {
	h := hmac.New(sha256.New, k.key())
	h.Write(body)
	// The name is length-prefixed, so no two Lists write the same input.
	h.Write(binary.AppendUvarint(nil, uint64(len(l.Name))))
	h.Write([]byte(l.Name))
	h.Write(l.Org[:])
	h.Write(l.Parent[:])
	return h.Sum(nil)[:macLen]
}

// Encode returns the cursor for p in list l. PostgreSQL keeps
// microseconds, so that is the precision a cursor carries.
func (k Key) Encode(l List, p Position) string {
	b := make([]byte, 0, encodedLen)
	b = append(b, version)
	b = binary.BigEndian.AppendUint64(b, uint64(p.CreatedAt.UnixMicro()))
	b = append(b, p.ID[:]...)
	b = append(b, k.mac(l, b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode returns the position cursor names in list l, or nil for the empty
// cursor (the first page). It is the one place a list cursor is read, for
// the API and the console alike: it returns [ErrInvalid] for anything
// Encode did not produce with this key for l, in exactly the form Encode
// writes it, and for an instant outside [MinInstant, MaxInstant], so a
// cursor it accepts was minted by searchd for this list and is safe to
// query with.
func (k Key) Decode(l List, cursor string) (*Position, error) {
	if cursor == "" {
		return nil, nil
	}
	if len(cursor) != base64.RawURLEncoding.EncodedLen(encodedLen) {
		return nil, ErrInvalid
	}
	// Strict: the unused bits of the last character must be zero, so each
	// position has one cursor, the one Encode writes.
	b, err := base64.RawURLEncoding.Strict().DecodeString(cursor)
	if err != nil || len(b) != encodedLen || b[0] != version {
		return nil, ErrInvalid
	}
	if !hmac.Equal(b[bodyLen:], k.mac(l, b[:bodyLen])) {
		return nil, ErrInvalid
	}
	us := int64(binary.BigEndian.Uint64(b[1:9]))
	if us < MinInstant.UnixMicro() || us > MaxInstant.UnixMicro() {
		return nil, ErrInvalid
	}
	p := Position{CreatedAt: time.UnixMicro(us).UTC()}
	copy(p.ID[:], b[9:bodyLen])
	return &p, nil
}

// Args returns the (created_at, id) query arguments for the page after p:
// NULLs for the first page, which the queries turn into a position before
// every row.
func Args(p *Position) (createdAt, id any) {
	if p == nil {
		return nil, nil
	}
	return p.CreatedAt, p.ID
}

// Page ends a list read with one row more than q.Limit: it returns the
// first q.Limit rows and the cursor of the page after them, minted for q's
// list with q's key, or the rows as they are and "" when there is no row
// more (the last page). pos returns the position of rows[i].
func Page[T any](q Request, rows []T, pos func(i int) Position) ([]T, string) {
	if len(rows) <= q.Limit {
		return rows, ""
	}
	return rows[:q.Limit], q.key.Encode(q.list, pos(q.Limit-1))
}
