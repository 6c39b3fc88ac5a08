//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/pgcluster"
)

// standbyName is the standby's application_name on the primary, the name
// synchronous_standby_names lists.
const standbyName = "standby"

// pgPair is a primary and a streaming standby made from it with
// pg_basebackup, both from the installed PostgreSQL binaries. The standby
// streams through a proxy of its own (repl), so a test can give the
// replication link the latency of a link between two machines.
type pgPair struct {
	primary, standby *postgres
	repl             *faultProxy
	sync             bool
}

// startPair initdb's a primary under parent, creates the suite's database,
// takes a base backup into a standby and starts it, and waits until the
// standby streams. With sync, the primary lists the standby in
// synchronous_standby_names (synchronous_commit stays on, its default), so
// a commit returns only once the standby has flushed it; without, the
// standby is asynchronous. replLatency delays every chunk of the
// replication stream, each way.
func startPair(ctx context.Context, parent string, sync bool, replLatency time.Duration) (_ *pgPair, err error) {
	bins, err := pgcluster.FindBinaries(os.Getenv(pgcluster.EnvPGBin))
	if err != nil {
		return nil, err
	}
	pair := &pgPair{sync: sync}
	defer func() {
		if err != nil {
			pair.Stop()
		}
	}()
	if pair.primary, err = newNode(bins, parent, "pg-primary"); err != nil {
		return nil, err
	}
	// Synchronous replication is switched on once the standby streams: a
	// primary waiting for a standby that does not exist yet would hang
	// every commit, the base backup's included.
	pair.primary.settings = []string{"wal_level=replica", "max_wal_senders=4", "synchronous_commit=on"}
	if err := pair.primary.boot(ctx); err != nil {
		return nil, err
	}

	if pair.repl, err = newFaultProxy(pair.primary.TCPAddr()); err != nil {
		return nil, err
	}
	pair.repl.SetLatency(replLatency)
	if pair.standby, err = newNode(bins, parent, "pg-standby"); err != nil {
		return nil, err
	}
	err = pair.standby.runAsServer(ctx, "pg_basebackup", "-D", pair.standby.dataDir(),
		"-h", pair.primary.dir, "-p", strconv.Itoa(pair.primary.port), "-U", "postgres",
		"-X", "stream", "--checkpoint=fast")
	if err != nil {
		return nil, err
	}
	if err := pair.standby.touch(filepath.Join(pair.standby.dataDir(), "standby.signal")); err != nil {
		return nil, err
	}
	host, port, _ := strings.Cut(pair.repl.Addr(), ":")
	pair.standby.settings = []string{"hot_standby=on", fmt.Sprintf(
		"primary_conninfo=host=%s port=%s user=postgres application_name=%s", host, port, standbyName)}
	if err := pair.standby.Start(ctx); err != nil {
		return nil, err
	}
	if err := pair.waitStreaming(ctx, "async"); err != nil {
		return nil, err
	}
	if sync {
		if err := pair.primary.exec(ctx, "postgres", "ALTER SYSTEM SET synchronous_standby_names = '"+standbyName+"'"); err != nil {
			return nil, err
		}
		if err := pair.primary.exec(ctx, "postgres", "SELECT pg_reload_conf()"); err != nil {
			return nil, err
		}
		if err := pair.waitStreaming(ctx, "sync"); err != nil {
			return nil, err
		}
	}
	return pair, nil
}

// waitStreaming waits until the primary reports the standby streaming with
// sync_state want.
func (pair *pgPair) waitStreaming(ctx context.Context, want string) error {
	conn, err := pgx.Connect(ctx, pair.primary.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	deadline := time.Now().Add(time.Minute)
	for {
		var state, syncState string
		err := conn.QueryRow(ctx, `SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1`,
			standbyName).Scan(&state, &syncState)
		if err == nil && state == "streaming" && syncState == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the standby is not streaming as %s within a minute (state %q, sync_state %q, %v)\n%s",
				want, state, syncState, err, tail(pair.standby.logPath))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Promote is `pg_ctl promote -w`: the standby leaves recovery and accepts
// writes. It returns once the standby is writable.
func (pair *pgPair) Promote(ctx context.Context) error {
	if err := pair.standby.runAsServer(ctx, "pg_ctl", "promote", "-w", "-t", "60", "-D", pair.standby.dataDir()); err != nil {
		return fmt.Errorf("%w\n%s", err, tail(pair.standby.logPath))
	}
	return nil
}

// URL is the multi-host connection string of the pair, primary first, that
// reaches whichever of the two accepts writes (target_session_attrs), with
// the extra parameters params ("a=b&c=d").
func (pair *pgPair) URL(params string) string {
	u := fmt.Sprintf("postgres://postgres@%s,%s/%s?sslmode=disable&target_session_attrs=read-write",
		pair.primary.TCPAddr(), pair.standby.TCPAddr(), dbName)
	if params != "" {
		u += "&" + params
	}
	return u
}

// Stop stops whatever of the pair still runs.
func (pair *pgPair) Stop() {
	for _, pg := range []*postgres{pair.standby, pair.primary} {
		if pg != nil {
			pg.Stop()
		}
	}
	if pair.repl != nil {
		pair.repl.Close()
	}
}
