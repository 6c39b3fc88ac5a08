package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Citus nodes are servers started with [StartServer] and [CitusSettings];
// [JoinCitus] makes one database of theirs a cluster.

// ErrNoCitus reports that the citus extension is not installed. Its
// message says how to install it.
var ErrNoCitus = errors.New("the citus extension is not installed into this PostgreSQL " +
	"(no citus.so in its library directory); build and install it with `bash ../shared/citus/install.sh` " +
	"(Citus 13.2.2 for PostgreSQL 15; 5-10 minutes on 2 cores)")

// CitusInstalled returns nil if bins' server can load citus, else an error
// wrapping [ErrNoCitus] naming where it looked.
func CitusInstalled(bins Binaries) error {
	dirs := []string{filepath.Join(filepath.Dir(filepath.Dir(bins.Postgres)), "lib")}
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.Command(pgConfig, "--pkglibdir").Output(); err == nil {
			dirs = append(dirs, strings.TrimSpace(string(out)))
		}
	}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "citus.so")); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: looked in %s", ErrNoCitus, strings.Join(dirs, ", "))
}

// CitusSettings are the settings every Citus node needs: citus preloaded,
// enough prepared transactions for two-phase commits, and no TLS between
// nodes (citus.node_conninfo), since the server cannot read a client
// certificate in the home it inherits.
func CitusSettings(maxConnections int) []string {
	return []string{
		"shared_preload_libraries=citus",
		fmt.Sprintf("max_connections=%d", maxConnections),
		fmt.Sprintf("max_prepared_transactions=%d", maxConnections),
		"citus.node_conninfo=sslmode=disable",
	}
}

// CitusNode is how other nodes reach a node: host is a hostname, address
// or unix socket directory.
type CitusNode struct {
	Host string
	Port int
}

// JoinCitus makes database a Citus cluster: it creates the extension on
// every node (each URL as a superuser), records the coordinator's address
// and adds the workers. database must exist on every node. Not idempotent.
func JoinCitus(ctx context.Context, coordinatorURL string, coordinator CitusNode, workerURLs []string, workers []CitusNode) error {
	if len(workerURLs) != len(workers) {
		return fmt.Errorf("pgcluster: JoinCitus: %d worker URLs for %d workers", len(workerURLs), len(workers))
	}
	for _, u := range append([]string{coordinatorURL}, workerURLs...) {
		if err := execOnce(ctx, u, "CREATE EXTENSION IF NOT EXISTS citus"); err != nil {
			return fmt.Errorf("pgcluster: creating the citus extension: %w", err)
		}
	}
	if err := execOnce(ctx, coordinatorURL, "SELECT citus_set_coordinator_host($1, $2)", coordinator.Host, coordinator.Port); err != nil {
		return fmt.Errorf("pgcluster: recording the coordinator: %w", err)
	}
	for _, w := range workers {
		if err := execOnce(ctx, coordinatorURL, "SELECT citus_add_node($1, $2)", w.Host, w.Port); err != nil {
			return fmt.Errorf("pgcluster: adding worker %s:%d: %w", w.Host, w.Port, err)
		}
	}
	return nil
}

// execOnce runs sql with args on a connection of its own to url.
func execOnce(ctx context.Context, url, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql, args...)
	return err
}
