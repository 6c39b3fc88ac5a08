package keyset

import "github.com/jackc/pgx/v5"

// Limit returns the page size of a list asked for limit rows: def when
// limit is zero or less, and never more than most.
func Limit(limit, def, most int) int {
	if limit <= 0 {
		return def
	}
	return min(limit, most)
}

// Collect reads a page's rows, which its query asked for one more than
// limit, with scan, and ends the page as [Page] does, pos giving a row's
// position. Its error is the query's or a row's: pgx reports a failed
// Query through its rows too, so a list ignores Query's own error and
// reads it here.
func Collect[T any](rows pgx.Rows, limit int, scan pgx.RowToFunc[T], pos func(T) Position) ([]T, string, error) {
	list, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, "", err
	}
	list, next := Page(list, limit, func(i int) Position { return pos(list[i]) })
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
// (def and most). Its error is [ErrInvalid], for a cursor Decode refuses.
func Read(cursor string, limit, def, most int) (Request, error) {
	pos, err := Decode(cursor)
	if err != nil {
		return Request{}, err
	}
	at, id := Args(pos)
	return Request{At: at, ID: id, Limit: Limit(limit, def, most)}, nil
}

// Value turns scan, a store's reading of a row into a new *T, into the
// row function [Collect] and pgx.CollectRows take, which yields the T.
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
