// Package sqlarg writes the arguments of optional values: SQL NULL for
// an unset one, so a stored column reads NULL and a query's optional
// filter ($n IS NULL OR ...) matches every row.
package sqlarg

import "encoding/json"

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
