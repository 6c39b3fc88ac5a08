// Package sqlarg is what the stores share around a statement: the
// arguments of optional values (SQL NULL for an unset one, so a stored
// column reads NULL and a query's optional filter ($n IS NULL OR ...)
// matches every row), and the error of a read of one row ([RowError]).
package sqlarg

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Null returns v, or nil (NULL) when v is unset: its type's zero value,
// or a value whose IsZero method says so (a time.Time).
func Null[T comparable](v T) any {
	var zero T
	if z, ok := any(v).(interface{ IsZero() bool }); v == zero || ok && z.IsZero() {
		return nil
	}
	return v
}

// JSON returns b as text for a json or jsonb parameter, or nil (NULL)
// when b is empty.
func JSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// RowError returns the error err of a read of one row as a store reports
// it: notFound when there was no row (pgx.ErrNoRows), else err wrapped as
// "op: err".
func RowError(err, notFound error, op string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound
	}
	return fmt.Errorf("%s: %w", op, err)
}
