// Package migrations holds searchd's schema as numbered SQL files, embedded
// and applied with goose. Applying is idempotent, and an advisory lock
// serializes concurrent runs.
//
// Migrations after [ExpandOnlyAfter] follow expand-then-contract: during an
// upgrade, the old release serves on the new schema, so a migration may
// only add (tables, nullable or defaulted columns, indexes, NOT VALID
// constraints). Dropping, renaming, retyping or tightening what the previous
// release uses waits for a later release. expand_test.go enforces this;
// see docs/deploy.md.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver goose runs on
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// FS holds the migration files, named NNNNN_description.sql.
//
//go:embed *.sql
var FS embed.FS

// ExpandOnlyAfter is the last migration before the expand-then-contract
// rule; expand_test.go checks every later one.
const ExpandOnlyAfter = 19

// ErrNotCurrent reports a schema missing a migration of this binary.
var ErrNotCurrent = errors.New("migrations: schema is not at the newest migration")

// Schema is the schema version [Check] found and the newest embedded one.
type Schema struct {
	// Version is the highest migration applied to the database.
	Version int64
	// Newest is the highest migration this binary embeds.
	Newest int64
}

// Newer reports whether a newer release migrated the database; this binary
// still serves it correctly.
func (s Schema) Newer() bool { return s.Version > s.Newest }

func provider(db *sql.DB, opts ...goose.ProviderOption) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("migrations: session locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS, append(opts, goose.WithSessionLocker(locker))...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// Up applies pending migrations to the database at databaseURL and returns
// the versions applied. A failed migration is rolled back whole.
func Up(ctx context.Context, databaseURL string) ([]int64, error) {
	db, err := sql.Open("pgx", databaseURL)
	if err != nil {
		return nil, fmt.Errorf("migrations: open database: %w", err)
	}
	defer db.Close()
	p, err := provider(db)
	if err != nil {
		return nil, err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: up: %w", err)
	}
	applied := make([]int64, 0, len(results))
	for _, r := range results {
		applied = append(applied, r.Source.Version)
	}
	return applied, nil
}

// Check returns the schema version of the database at databaseURL. A newer
// schema passes (see [Schema.Newer]); a missing migration of this binary
// returns an error wrapping [ErrNotCurrent] naming both versions.
func Check(ctx context.Context, databaseURL string) (Schema, error) {
	db, err := sql.Open("pgx", databaseURL)
	if err != nil {
		return Schema{}, fmt.Errorf("migrations: open database: %w", err)
	}
	defer db.Close()
	return CheckDB(ctx, db)
}

// CheckDB is [Check] on an open handle. It takes no lock, so it answers
// while a migration runs.
func CheckDB(ctx context.Context, db *sql.DB) (Schema, error) {
	// Allow out of order, so a gap is reported as pending, not as an error.
	p, err := provider(db, goose.WithAllowOutofOrder(true))
	if err != nil {
		return Schema{}, err
	}
	var s Schema
	s.Version, s.Newest, err = p.GetVersions(ctx)
	if err != nil {
		return Schema{}, fmt.Errorf("migrations: read schema version: %w", err)
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return Schema{}, fmt.Errorf("migrations: read applied migrations: %w", err)
	}
	if pending {
		return s, fmt.Errorf("%w: database at version %d, newest is %d, with migrations of this binary not applied (run `searchd migrate`)",
			ErrNotCurrent, s.Version, s.Newest)
	}
	return s, nil
}
