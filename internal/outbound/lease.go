package outbound

import (
	"context"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/shardpass"
)

// Lease runs query, a lease statement, on each shard group that due finds
// due by clock (at most limit rows in all), with @clock, @lease_end (one
// lease after clock) and args, and reads each leased row with scan. It
// returns what every group leased, with the groups' failures joined.
func Lease[T any](ctx context.Context, db shardpass.DB, due *shardpass.Pass, limit int, clock time.Time, lease time.Duration,
	query string, args pgx.NamedArgs, scan pgx.RowToFunc[T]) (all []T, err error) {
	named := pgx.NamedArgs{"clock": clock, "lease_end": clock.Add(lease)}
	maps.Copy(named, args)
	err = due.Run(ctx, db, limit, pgx.NamedArgs{"now": clock}, func(ctx context.Context, g shardpass.Group) error {
		rows, err := db.Query(ctx, query, g.Args(named))
		if err != nil {
			return err
		}
		leased, err := pgx.CollectRows(rows, scan)
		all = append(all, leased...)
		return err
	})
	return all, err
}

// EndArgs returns the SQL arguments of an attempt's end: its HTTP status,
// NULL for 0, and its answer cleaned to n characters, NULL when empty.
func EndArgs(status int, answer string, n int) (statusArg, answerArg any) {
	if status != 0 {
		statusArg = status
	}
	if a := Clean(answer, n); a != "" {
		answerArg = a
	}
	return statusArg, answerArg
}
