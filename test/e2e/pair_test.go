//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	pgCtl            string
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
	binDir := filepath.Dir(bins.Postgres)
	pair := &pgPair{sync: sync, pgCtl: filepath.Join(binDir, "pg_ctl")}
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
	pair.primary.args = []string{"-c", "wal_level=replica", "-c", "max_wal_senders=4", "-c", "synchronous_commit=on"}
	if err := pair.primary.initdb(ctx); err != nil {
		return nil, err
	}
	if err := pair.primary.Start(ctx); err != nil {
		return nil, err
	}
	if err := pair.primary.exec(ctx, "postgres", "CREATE DATABASE "+dbName); err != nil {
		return nil, err
	}

	if pair.repl, err = newFaultProxy(pair.primary.TCPAddr()); err != nil {
		return nil, err
	}
	pair.repl.SetLatency(replLatency)
	if pair.standby, err = newNode(bins, parent, "pg-standby"); err != nil {
		return nil, err
	}
	backup := exec.CommandContext(ctx, filepath.Join(binDir, "pg_basebackup"), "-D", pair.standby.dataDir(),
		"-h", pair.primary.dir, "-p", strconv.Itoa(pair.primary.port), "-U", "postgres",
		"-X", "stream", "--checkpoint=fast")
	backup.Dir = pair.standby.dir
	backup.Env = pgEnv()
	backup.SysProcAttr = &syscall.SysProcAttr{Credential: pair.standby.cred}
	if out, err := backup.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pg_basebackup: %w\n%s", err, out)
	}
	if err := pair.standby.touch(filepath.Join(pair.standby.dataDir(), "standby.signal")); err != nil {
		return nil, err
	}
	host, port, _ := strings.Cut(pair.repl.Addr(), ":")
	pair.standby.args = []string{"-c", "hot_standby=on", "-c", fmt.Sprintf(
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

// newNode prepares a server directory named name under parent, owned by
// the server's user, on a free port. The node starts in a process group of
// its own (see postgres.groupKill).
func newNode(bins pgcluster.Binaries, parent, name string) (*postgres, error) {
	cred, err := pgcluster.ServerCredential()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	pg := &postgres{bins: bins, dir: filepath.Join(parent, name), port: port, cred: cred, groupKill: true}
	pg.logPath = filepath.Join(pg.dir, "postgres.log")
	if err := os.Mkdir(pg.dir, 0o700); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(pg.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	return pg, nil
}

func (pg *postgres) initdb(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, pg.bins.Initdb, "-D", pg.dataDir(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-instructions")
	cmd.Dir = pg.dir
	cmd.Env = pgEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

// touch creates an empty file owned by the server's user.
func (pg *postgres) touch(path string) error {
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return err
	}
	if pg.cred != nil {
		return os.Chown(path, int(pg.cred.Uid), int(pg.cred.Gid))
	}
	return nil
}

// exec runs one statement in database over the unix socket.
func (pg *postgres) exec(ctx context.Context, database, sql string) error {
	conn, err := pgx.Connect(ctx, pg.URL(database))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// KillHost is kill -9 of the server's whole process group, postmaster and
// backends at once: the database machine is gone, and nothing of it writes
// again. It returns once the postmaster has exited.
func (pg *postgres) KillHost() error {
	pg.mu.Lock()
	p := pg.proc
	pg.proc = nil
	pg.mu.Unlock()
	if p == nil {
		return errors.New("postgres is not running")
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return err
	}
	<-p.done
	return nil
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
	cmd := exec.CommandContext(ctx, pair.pgCtl, "promote", "-w", "-t", "60", "-D", pair.standby.dataDir())
	cmd.Dir = pair.standby.dir
	cmd.Env = pgEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pair.standby.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl promote: %w\n%s\n%s", err, out, tail(pair.standby.logPath))
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
