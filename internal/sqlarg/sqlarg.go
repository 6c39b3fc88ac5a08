// Package sqlarg holds small helpers the stores share: NULL for unset
// optional arguments, and the error of a one-row read ([RowError]).
package sqlarg

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Null returns v, or nil (NULL) when v is its zero value or its IsZero
// method says so.
func Null[T comparable](v T) any {
	var zero T
	if z, ok := any(v).(interface{ IsZero() bool }); v == zero || ok && z.IsZero() {
		return nil
	}
	return v
}

// JSON returns b as text for a json or jsonb parameter, or nil when empty.
func JSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// RowError returns notFound for pgx.ErrNoRows, else err wrapped as
// "op: err".
func RowError(err, notFound error, op string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound
	}
	return fmt.Errorf("%s: %w", op, err)
}
