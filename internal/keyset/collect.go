package keyset

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Limit returns the page size of a list asked for limit rows: def when
// limit is zero or less, and never more than most.
func Limit(limit, def, most int) int {
	if limit <= 0 {
		return def
	}
	return min(limit, most)
}

// Querier is what [Query] reads a page with; a *pgxpool.Pool, a pgx.Tx and
// every store's database have it.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Query reads a page of a list after q: it runs query with args, which
// place q's At, ID and Limit+1 (one row more than the page, which says
// whether a next page exists) where query wants them, reads the rows with
// scan and ends the page as [Page] does, pos giving a row's position. Its
// error is the query's or a row's, wrapped as "what: ...": pgx reports a
// failed Query through its rows too, so Query's own error is read there.
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

// Request is a list's cursor and limit, read: the query arguments of the
// position the cursor names and the page size, and the list and key the
// next page's cursor is minted for.
type Request struct {
	// At and ID are the (created_at, id) arguments of the page after the
	// cursor, as [Args] gives them: NULLs for the first page.
	At, ID any
	// Limit is the page size, as [Limit] bounds it; the query asks for one
	// row more, which says whether a next page exists.
	Limit int

	key  Key
	list List
}

// Read reads the cursor of list l, with [Key.Decode], and its limit, with
// [Limit] (def and most), for [Query], which mints the next page's cursor
// for l with k. Its error is [ErrInvalid], for a cursor Decode refuses.
func (k Key) Read(l List, cursor string, limit, def, most int) (Request, error) {
	pos, err := k.Decode(l, cursor)
	if err != nil {
		return Request{}, err
	}
	at, id := Args(pos)
	return Request{At: at, ID: id, Limit: Limit(limit, def, most), key: k, list: l}, nil
}

// Value turns scan, a store's reading of a row into a new *T, into the
// row function [Query] and pgx.CollectRows take, which yields the T.
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

// LoadKey reads the cursor key from the database (agent.cursor_key, which
// migration 00022 fills with a secret from PostgreSQL's strong random), so
// every replica, and every restart, mints and verifies cursors with the
// same key. It returns an error when the table or its row is missing (the
// schema predates 00022) or the query fails.
func LoadKey(ctx context.Context, db Querier) (Key, error) {
	rows, _ := db.Query(ctx, cursorKeyGet)
	secret, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[[]byte])
	if err != nil {
		return Key{}, fmt.Errorf("keyset: reading the cursor key: %w", err)
	}
	return NewKey(secret)
}
