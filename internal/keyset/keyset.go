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
	"errors"
	"time"

	"github.com/google/uuid"
)

// ErrInvalid reports a cursor this package did not write.
var ErrInvalid = errors.New("keyset: invalid cursor")

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
// first page). It returns an error wrapping [ErrInvalid] for anything Encode
// did not produce.
func Decode(cursor string) (*Position, error) {
	if cursor == "" {
		return nil, nil
	}
	if len(cursor) > base64.RawURLEncoding.EncodedLen(encodedLen) {
		return nil, ErrInvalid
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) != encodedLen || b[0] != version {
		return nil, ErrInvalid
	}
	p := Position{CreatedAt: time.UnixMicro(int64(binary.BigEndian.Uint64(b[1:9]))).UTC()}
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
