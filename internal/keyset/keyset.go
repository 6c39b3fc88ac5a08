// Package keyset encodes the opaque cursors of searchd's newest-first lists.
//
// A cursor is the (created_at, id) of the last row a page returned; the next
// page asks for rows strictly before it in (created_at DESC, id DESC) order.
// Unlike an offset, it neither skips nor repeats rows when new ones arrive
// between pages, and it costs an index seek however deep the page.
package keyset

import (
	"encoding/base64"
	"encoding/binary"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/errs"
)

// ErrInvalid reports a cursor this package did not write: not its
// encoding, or an instant outside [MinInstant, MaxInstant]. Its kind is
// [errs.Invalid]. Every list's own sentinel wraps it ([InvalidCursor]), so
// the edges recognize a refused cursor of any list with one
// errors.Is(err, ErrInvalid), and its refused field is the cursor.
var ErrInvalid = &errs.Error{Kind: errs.Invalid, Message: "keyset: invalid cursor",
	Fields: []errs.Field{{Name: "cursor", Message: "is not a cursor this API returned"}}}

// InvalidCursor returns the sentinel a package's lists answer for a cursor
// [Decode] refused: an [errs.Invalid] error whose message names the
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
// range" (SQLSTATE 22008).
var (
	MinInstant = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)
	MaxInstant = time.Date(9999, time.December, 31, 23, 59, 59, 999999000, time.UTC)
)

// Position is a row's place in a newest-first list.
type Position struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// version is the first byte of every cursor, so the format can change
// without misreading old cursors.
const version = 1

// encodedLen is the decoded size of a cursor: version, microseconds, id.
const encodedLen = 1 + 8 + 16

// Encode returns the cursor for p. PostgreSQL keeps microseconds, so that is
// the precision a cursor carries.
func Encode(p Position) string {
	b := make([]byte, 0, encodedLen)
	b = append(b, version)
	b = binary.BigEndian.AppendUint64(b, uint64(p.CreatedAt.UnixMicro()))
	b = append(b, p.ID[:]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode returns the position cursor names, or nil for the empty cursor (the
// first page). It is the one place a list cursor is read, for the API and
// the console alike: it returns [ErrInvalid] for anything Encode did not
// produce, in exactly the form Encode writes it, and for an instant outside
// [MinInstant, MaxInstant], so a cursor it accepts is safe to query with.
func Decode(cursor string) (*Position, error) {
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
	us := int64(binary.BigEndian.Uint64(b[1:9]))
	if us < MinInstant.UnixMicro() || us > MaxInstant.UnixMicro() {
		return nil, ErrInvalid
	}
	p := Position{CreatedAt: time.UnixMicro(us).UTC()}
	copy(p.ID[:], b[9:])
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

// Page ends a list read with one row more than limit: it returns the
// first limit rows and the cursor of the page after them, or the rows as
// they are and "" when there is no row more (the last page). pos returns
// the position of rows[i].
func Page[T any](rows []T, limit int, pos func(i int) Position) ([]T, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	return rows[:limit], Encode(pos(limit - 1))
}
