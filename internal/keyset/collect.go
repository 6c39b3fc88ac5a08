package keyset

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Limit returns limit capped at most, or def when limit <= 0.
func Limit(limit, def, most int) int {
	if limit <= 0 {
		return def
	}
	return min(limit, most)
}

// Querier is what [Query] reads with: a *pgxpool.Pool or a pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Query reads the page after q: args must pass q's At, ID and Limit+1
// (the extra row says whether a next page exists); rows are read with scan
// and cut as [Page] does. Errors are wrapped as "what: ...".
func Query[T any](ctx context.Context, db Querier, what string, q Request, scan pgx.RowToFunc[T], pos func(T) Position,
	query string, args ...any) ([]T, string, error) {
	rows, _ := db.Query(ctx, query, args...)
	list, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", what, err)
	}
	list, next := Page(q, list, func(i int) Position { return pos(list[i]) })
	return list, next, nil
}

// Request is a decoded cursor and limit, with the list and key that mint
// the next page's cursor.
type Request struct {
	// At and ID are the (created_at, id) arguments of the page after the
	// cursor's position; NULLs for the first page.
	At, ID any
	// Limit is the page size, bounded by [Limit].
	Limit int

	key  Key
	list List
}

// Read decodes cursor for list l and bounds limit, for [Query]. It
// returns [ErrInvalid] for a cursor [Key.Decode] refuses.
func (k Key) Read(l List, cursor string, limit, def, most int) (Request, error) {
	pos, err := k.Decode(l, cursor)
	if err != nil {
		return Request{}, err
	}
	r := Request{Limit: Limit(limit, def, most), key: k, list: l}
	if pos != nil {
		r.At, r.ID = pos.CreatedAt, pos.ID
	}
	return r, nil
}

// Value adapts scan, which fills a new *T, to a pgx.RowToFunc yielding T.
func Value[T any](scan func(pgx.Row) (*T, error)) pgx.RowToFunc[T] {
	return func(r pgx.CollectableRow) (T, error) {
		v, err := scan(r)
		if err != nil {
			var zero T
			return zero, err
		}
		return *v, nil
	}
}

// LoadKey reads the cursor key from agent.cursor_key, so every replica
// and restart uses the same key. It returns an error when the row is
// missing (schema before migration 00022) or the query fails.
func LoadKey(ctx context.Context, db Querier) (Key, error) {
	rows, _ := db.Query(ctx, cursorKeyGet)
	secret, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[[]byte])
	if err != nil {
		return Key{}, fmt.Errorf("keyset: reading the cursor key: %w", err)
	}
	return NewKey(secret)
}
