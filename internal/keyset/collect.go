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
