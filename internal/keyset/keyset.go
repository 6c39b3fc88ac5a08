// Package keyset encodes the opaque cursors of searchd's newest-first lists.
//
// A cursor is the (created_at, id) of a page's last row; the next page asks
// for rows strictly before it, so rows arriving between pages are neither
// skipped nor repeated, and any page costs one index seek. A cursor carries
// a MAC over its position and its [List] (name, organization, parent row),
// so a forged cursor, or one minted for another list or organization, is
// refused with [ErrInvalid] before any SQL runs.
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

// ErrInvalid is an [errs.Invalid] error for a cursor this key did not mint
// for the list, or one with an instant outside [MinInstant, MaxInstant].
// Each list's sentinel wraps it ([InvalidCursor]).
var ErrInvalid = &errs.Error{Kind: errs.Invalid, Message: "keyset: invalid cursor",
	Fields: []errs.Field{{Name: "cursor", Message: "is not a cursor this API returned"}}}

// InvalidCursor returns a package's sentinel for a refused cursor,
// wrapping [ErrInvalid].
func InvalidCursor(pkg string) *errs.Error {
	return &errs.Error{Kind: errs.Invalid, Message: pkg + ": invalid cursor", Err: ErrInvalid}
}

// MinInstant and MaxInstant bound a cursor's instant to years 1-9999,
// inside PostgreSQL's timestamptz range, so an accepted cursor never fails
// a query with "timestamp out of range". A second line behind the MAC.
var (
	MinInstant = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)
	MaxInstant = time.Date(9999, time.December, 31, 23, 59, 59, 999999000, time.UTC)
)

// Position is a row's place in a newest-first list.
type Position struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// List names the list a cursor belongs to; every other List refuses it.
type List struct {
	// Name names the list, unique in searchd ("runs.list").
	Name string
	// Org is the organization listed; uuid.Nil for a cross-organization list.
	Org uuid.UUID
	// Parent is the row whose children are listed; uuid.Nil for none.
	Parent uuid.UUID
}

// version is the first byte of every cursor, so the format can change
// without misreading old cursors. Version 1 (no MAC) is refused.
const version = 2

// macLen is the MAC length: HMAC-SHA256 truncated to 128 bits.
const macLen = 16

// bodyLen is version, microseconds and id; encodedLen adds the MAC.
const (
	bodyLen    = 1 + 8 + 16
	encodedLen = bodyLen + macLen
)

// KeySize is the size of a cursor key's secret, in bytes.
const KeySize = 32

// Key signs and verifies cursors. Every replica must share it, so
// production loads it with [LoadKey]. The zero Key uses a random
// per-process secret, for tests and single-process tools.
type Key struct {
	secret []byte
}

// processSecret is the zero Key's secret.
var processSecret = sync.OnceValue(func() []byte {
	b := make([]byte, KeySize)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it crashes the program instead)
	return b
})

// NewKey returns the key of secret, or an error when secret is shorter
// than [KeySize] bytes.
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

// Encode returns the cursor for p in list l, at microsecond precision.
func (k Key) Encode(l List, p Position) string {
	b := make([]byte, 0, encodedLen)
	b = append(b, version)
	b = binary.BigEndian.AppendUint64(b, uint64(p.CreatedAt.UnixMicro()))
	b = append(b, p.ID[:]...)
	b = append(b, k.mac(l, b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode returns the position cursor names in list l, or nil for "" (the
// first page). It returns [ErrInvalid] for anything but Encode's exact
// output with this key for l.
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

// Page cuts rows, read with one extra, to q.Limit and returns the next
// page's cursor, or "" on the last page. pos returns rows[i]'s position.
func Page[T any](q Request, rows []T, pos func(i int) Position) ([]T, string) {
	if len(rows) <= q.Limit {
		return rows, ""
	}
	return rows[:q.Limit], q.key.Encode(q.list, pos(q.Limit-1))
}
