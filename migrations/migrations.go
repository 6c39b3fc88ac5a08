// Package migrations holds the database schema of searchd as numbered SQL
// files, embedded into the binary and applied with goose.
//
// Applying is idempotent: goose records each applied version in
// public.goose_db_version, so running [Up] twice changes nothing the second
// time, and a session-level advisory lock serialises concurrent runs (several
// replicas starting at once, parallel test binaries).
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

// ErrNotCurrent reports a database whose schema is not at the newest
// migration; [Check] wraps it.
var ErrNotCurrent = errors.New("migrations: schema is not at the newest migration")

func provider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("migrations: session locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS, goose.WithSessionLocker(locker))
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

// Check reports whether the database at databaseURL is at the newest
// migration. It returns an error wrapping [ErrNotCurrent] naming both versions
// when it is not, and another error when the database cannot be read.
func Check(ctx context.Context, databaseURL string) error {
	db, err := open(databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	return CheckDB(ctx, db)
}

// CheckDB is [Check] on an open database handle.
func CheckDB(ctx context.Context, db *sql.DB) error {
	p, err := provider(db)
	if err != nil {
		return err
	}
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrations: read schema version: %w", err)
	}
	sources := p.ListSources()
	newest := int64(0)
	if n := len(sources); n > 0 {
		newest = sources[n-1].Version
	}
	if current != newest {
		return fmt.Errorf("%w: database at version %d, newest is %d (run `searchd migrate`)", ErrNotCurrent, current, newest)
	}
	return nil
}
