package pgcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestCompareVersions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int // sign
	}{
		{"15", "9.6", 1},
		{"9.6", "10", -1},
		{"16", "16", 0},
		{"16.1", "16", 1},
		{"x", "1", -1},
	}
	for _, tt := range tests {
		got := compareVersions(tt.a, tt.b)
		if (got > 0) != (tt.want > 0) || (got < 0) != (tt.want < 0) {
			t.Errorf("compareVersions(%q, %q) = %d, want sign %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestFindBinariesWithPGBinLooksNowhereElse(t *testing.T) {
	t.Parallel()
	_, err := FindBinaries(filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, ErrNoBinaries) || !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Errorf("FindBinaries(missing dir) = %v, want ErrNoBinaries saying how to install", err)
	}
	found, err := FindBinaries("")
	if err != nil {
		t.Fatalf("FindBinaries(\"\") = %v on a machine with PostgreSQL", err)
	}
	again, err := FindBinaries(filepath.Dir(found.Postgres))
	if err != nil || again != found {
		t.Errorf("FindBinaries(%s) = %+v, %v; want %+v", filepath.Dir(found.Postgres), again, err, found)
	}
}

// TestStartKeepsDataAndRefusesASecondServer starts a cluster, writes a row,
// refuses a second server on the same directory, and finds the row again
// after a restart.
func TestStartKeepsDataAndRefusesASecondServer(t *testing.T) {
	t.Parallel()
	parent, err := os.MkdirTemp("", "pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil { // the server may run as another user
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := Config{Dir: filepath.Join(parent, "cluster")}

	c, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Initialized {
		t.Error("first Start did not report initdb")
	}
	if _, err := Start(ctx, cfg); err == nil || !strings.Contains(err.Error(), "already runs") {
		t.Errorf("second Start on a running cluster = %v, want a refusal", err)
	}
	created, err := c.CreateDatabase(ctx, "kept")
	if err != nil || !created {
		t.Fatalf("CreateDatabase = %v, %v", created, err)
	}
	if created, err := c.CreateDatabase(ctx, "kept"); err != nil || created {
		t.Errorf("CreateDatabase again = %v, %v; want false, nil", created, err)
	}
	execSQL(t, c.URL("kept"), "CREATE TABLE t (v text); INSERT INTO t VALUES ('survives')")
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}

	c, err = Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if c.Initialized {
		t.Error("restart ran initdb again")
	}
	conn, err := pgx.Connect(ctx, c.URL("kept"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != "survives" {
		t.Errorf("after restart: %q, %v; want the row kept", v, err)
	}
}

func execSQL(t *testing.T, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatal(err)
	}
}
