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

// Citus: a coordinator and its workers are each a server this package
// starts ([StartServer]) with [CitusSettings]; [JoinCitus] makes one
// database of theirs a cluster. internal/testkit/pgtest (make test-citus) and the
// fault suite's Citus variant (test/e2e) both build theirs this way.

// ErrNoCitus reports that the citus extension is not installed into the
// PostgreSQL server the binaries belong to. Its message says how to
// install it.
var ErrNoCitus = errors.New("the citus extension is not installed into this PostgreSQL " +
	"(no citus.so in its library directory); build and install it with `bash ../shared/citus/install.sh` " +
	"(Citus 13.2.2 for PostgreSQL 15; 5-10 minutes on 2 cores)")

// CitusInstalled returns nil when the server bins belongs to can load the
// citus extension, and an error wrapping [ErrNoCitus] naming where it
// looked otherwise.
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

// CitusSettings are the server settings every node of a Citus cluster
// needs: the extension preloaded, and room for the prepared transactions
// of the two-phase commits of transactions that write on several nodes
// (at least one per connection that may take part in one). The nodes of
// these throwaway clusters talk over loopback or unix sockets without
// TLS (citus.node_conninfo): Citus's default asks for it, and the server,
// run as another user than the one whose home it inherits, cannot read a
// client certificate there.
func CitusSettings(maxConnections int) []string {
	return []string{
		"shared_preload_libraries=citus",
		fmt.Sprintf("max_connections=%d", maxConnections),
		fmt.Sprintf("max_prepared_transactions=%d", maxConnections),
		"citus.node_conninfo=sslmode=disable",
	}
}

// CitusNode is a node of a Citus cluster as the others reach it: host
// is a hostname, an address or the directory of a unix socket.
type CitusNode struct {
	Host string
	Port int
}

// JoinCitus makes database a Citus cluster: it creates the citus extension
// in it on the coordinator and on every worker (each URL is database on
// that node, as a superuser), records the coordinator's own address, and
// adds the workers to the coordinator's metadata. database must exist on
// every node. It is not idempotent: run it on a fresh database.
func JoinCitus(ctx context.Context, coordinatorURL string, coordinator CitusNode, workerURLs []string, workers []CitusNode) error {
	if len(workerURLs) != len(workers) {
		return fmt.Errorf("pgcluster: JoinCitus: %d worker URLs for %d workers", len(workerURLs), len(workers))
	}
	for _, u := range append([]string{coordinatorURL}, workerURLs...) {
		if err := execOnce(ctx, u, "CREATE EXTENSION IF NOT EXISTS citus"); err != nil {
			return fmt.Errorf("pgcluster: creating the citus extension: %w", err)
		}
	}
	conn, err := pgx.Connect(ctx, coordinatorURL)
	if err != nil {
		return fmt.Errorf("pgcluster: connecting to the coordinator: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SELECT citus_set_coordinator_host($1, $2)", coordinator.Host, coordinator.Port); err != nil {
		return fmt.Errorf("pgcluster: recording the coordinator: %w", err)
	}
	for _, w := range workers {
		if _, err := conn.Exec(ctx, "SELECT citus_add_node($1, $2)", w.Host, w.Port); err != nil {
			return fmt.Errorf("pgcluster: adding worker %s:%d: %w", w.Host, w.Port, err)
		}
	}
	return nil
}

func execOnce(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}
