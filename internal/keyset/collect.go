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
	list, next := Page(list, q.Limit, func(i int) Position { return pos(list[i]) })
	return list, next, nil
}

// Request is a list's cursor and limit, read: the query arguments of the
// position the cursor names and the page size.
type Request struct {
	// At and ID are the (created_at, id) arguments of the page after the
	// cursor, as [Args] gives them: NULLs for the first page.
	At, ID any
	// Limit is the page size, as [Limit] bounds it; the query asks for one
	// row more, which says whether a next page exists.
	Limit int
}

// Read reads a list's cursor, with [Decode], and its limit, with [Limit]
// (def and most), for [Query]. Its error is [ErrInvalid], for a cursor Decode refuses.
func Read(cursor string, limit, def, most int) (Request, error) {
	pos, err := Decode(cursor)
	if err != nil {
		return Request{}, err
	}
	at, id := Args(pos)
	return Request{At: at, ID: id, Limit: Limit(limit, def, most)}, nil
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
