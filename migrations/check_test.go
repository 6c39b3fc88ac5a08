package migrations_test

import (
	"context"
	"errors"
	"io/fs"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/migrations"
)

// newest returns the highest migration the binary embeds and the one
// below it, read from the files (numbers may have gaps while branches
// that each take one are merged).
func newest(t *testing.T) (top, below int64) {
	t.Helper()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) < 2 {
		t.Fatalf("fewer than two migrations embedded: %v", err)
	}
	for _, f := range files {
		n, err := strconv.ParseInt(f[:5], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
		if n > top {
			top, below = n, top
		} else if n > below {
			below = n
		}
	}
	return top, below
}

// TestCheckPassesANewerSchemaAndRefusesAnOlderOne: a database migrated by
// a newer release (a goose version beyond this binary's) passes Check and
// says it is newer; one that lacks a migration of this binary, at the top
// or below a newer one, is ErrNotCurrent.
func TestCheckPassesANewerSchemaAndRefusesAnOlderOne(t *testing.T) {
	t.Parallel()
	top, below := newest(t)
	tests := []struct {
		name        string
		sql         []string // run on a migrated database before Check
		wantErr     bool
		wantVersion int64
		wantNewer   bool
	}{
		{name: "current", wantVersion: top},
		{name: "newer by one", sql: []string{applyVersion(top + 1)}, wantVersion: top + 1, wantNewer: true},
		{name: "newer by two", sql: []string{applyVersion(top + 1), applyVersion(top + 2)}, wantVersion: top + 2, wantNewer: true},
		{name: "older: the newest not applied", sql: []string{unapplyVersion(top)}, wantErr: true, wantVersion: below},
		{name: "newer, with one of this binary's missing below", sql: []string{applyVersion(top + 1), unapplyVersion(5)},
			wantErr: true, wantVersion: top + 1, wantNewer: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url := pgtest.NewDBURL(t)
			db, err := pgxpool.New(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, q := range tt.sql {
				if _, err := db.Exec(context.Background(), q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			s, err := migrations.Check(context.Background(), url)
			if tt.wantErr != errors.Is(err, migrations.ErrNotCurrent) || (!tt.wantErr && err != nil) {
				t.Fatalf("Check = %v, want ErrNotCurrent %v", err, tt.wantErr)
			}
			if s.Version != tt.wantVersion || s.Newest != top || s.Newer() != tt.wantNewer {
				t.Errorf("Check = %+v (newer %v), want version %d, newest %d, newer %v", s, s.Newer(), tt.wantVersion, top, tt.wantNewer)
			}
		})
	}
}

// applyVersion records version as applied, as goose does after running
// a migration this binary does not embed.
func applyVersion(v int64) string {
	return "INSERT INTO public.goose_db_version (version_id, is_applied) VALUES (" + strconv.FormatInt(v, 10) + ", true)"
}

// unapplyVersion forgets that version was applied.
func unapplyVersion(v int64) string {
	return "DELETE FROM public.goose_db_version WHERE version_id = " + strconv.FormatInt(v, 10)
}
