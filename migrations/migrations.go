// Package migrations holds the database schema of searchd as numbered SQL
// files, embedded into the binary and applied with goose.
//
// Applying is idempotent: goose records each applied version in
// public.goose_db_version, so running [Up] twice changes nothing the second
// time, and a session-level advisory lock serialises concurrent runs (several
// replicas starting at once, parallel test binaries).
//
// # Expand, then contract
//
// An upgrade migrates first (the new release's `searchd migrate`, while the
// old release's replicas serve) and then rolls the replicas, so for a while
// replicas of release N serve on the schema of release N+1. A migration
// therefore only expands in the release that introduces it: it may add a
// table, a nullable column or one with a default, an index (CONCURRENTLY on
// a large table, in a migration of its own marked `-- +goose NO
// TRANSACTION`), a function, or a constraint that release N's writes
// already satisfy, added NOT VALID so it takes no long lock (it binds every
// new write at once, the old replicas' too). What release N reads or writes
// is contracted only in a later release, once no replica of N is left:
// dropping or renaming a column, table, trigger or function, changing a
// column's type, SET NOT NULL, VALIDATE of a constraint, a new primary key
// or unique constraint. expand_test.go holds every migration after
// [ExpandOnlyAfter] to it, with an allow-list for the exceptions and their
// reasons. docs/deploy.md gives the operator's side.
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

// ExpandOnlyAfter is the newest migration written before the
// expand-then-contract rule (see the package comment); every later one is
// held to it by expand_test.go.
const ExpandOnlyAfter = 19

// ErrNotCurrent reports a database whose schema lacks a migration of this
// binary (an older schema); [Check] wraps it.
var ErrNotCurrent = errors.New("migrations: schema is not at the newest migration")

// Schema is the version of a database's schema that [Check] found beside
// the newest migration this binary embeds.
type Schema struct {
	// Version is the highest migration applied to the database.
	Version int64
	// Newest is the highest migration this binary embeds.
	Newest int64
}

// Newer reports whether the database carries migrations beyond those of
// this binary: a newer release migrated it. Expand-then-contract makes
// such a schema one this binary serves correctly.
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

func open(databaseURL string) (*sql.DB, error) {
	db, err := sql.Open("pgx", databaseURL)
	if err != nil {
		return nil, fmt.Errorf("migrations: open database: %w", err)
	}
	return db, nil
}

// Up applies every migration not yet applied to the database at databaseURL
// and returns the versions it applied (none when the schema was current).
// It returns an error when the database cannot be reached or a migration
// fails; a failed migration is rolled back whole.
func Up(ctx context.Context, databaseURL string) ([]int64, error) {
	db, err := open(databaseURL)
	if err != nil {
		return nil, err
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

// Check checks that the database at databaseURL has every migration of
// this binary applied, and returns its version. A schema newer than this
// binary (migrations it does not know, applied by a newer release) passes:
// see [Schema.Newer]. It returns an error wrapping [ErrNotCurrent], naming
// both versions, when a migration of this binary is not applied, and
// another error when the database cannot be read.
func Check(ctx context.Context, databaseURL string) (Schema, error) {
	db, err := open(databaseURL)
	if err != nil {
		return Schema{}, err
	}
	defer db.Close()
	return CheckDB(ctx, db)
}

// CheckDB is [Check] on an open database handle. It takes no lock, so it
// answers while `searchd migrate` runs.
func CheckDB(ctx context.Context, db *sql.DB) (Schema, error) {
	// Out of order allowed: a migration of this binary missing below a
	// newer version is then reported as pending, not as goose's error.
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
