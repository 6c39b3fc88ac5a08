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
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/pgcluster"
)

// dbName is the database the replicas share.
const dbName = "searchd"

// postgres is a PostgreSQL cluster of the suite's own: a unix socket for
// the harness and loopback TCP on a free port for the proxy the replicas
// connect through. Unlike the clusters of pgtest and pgcluster it can be
// restarted the hard way (Crash then Start), the semantics of
// `pg_ctl restart -m immediate`. Its processes are pgcluster's: one
// launcher for every PostgreSQL the tests run.
type postgres struct {
	bins    pgcluster.Binaries
	dir     string // owned by the server's user; holds data/ and the socket
	logPath string
	port    int
	cred    *syscall.Credential // nil when we are not root
	// settings are more server settings ("name=value", later ones win),
	// such as the replication settings of a failover pair; groupKill
	// starts the server in a process group of its own, so KillHost takes
	// its backends at once, the way a lost machine does.
	settings  []string
	groupKill bool

	mu   sync.Mutex
	proc *pgcluster.Process
}

// startPostgres runs initdb in a new directory under parent and starts the
// server. parent must be traversable by the server's user.
func startPostgres(ctx context.Context, parent string) (*postgres, error) {
	return startPostgresWith(ctx, parent)
}

// startPostgresWith is startPostgres with more server settings.
func startPostgresWith(ctx context.Context, parent string, settings ...string) (*postgres, error) {
	bins, err := pgcluster.FindBinaries(os.Getenv(pgcluster.EnvPGBin))
	if err != nil {
		return nil, err
	}
	pg, err := newNode(bins, parent, "pg")
	if err != nil {
		return nil, err
	}
	pg.groupKill = false
	pg.settings = settings
	if err := pg.boot(ctx); err != nil {
		return nil, err
	}
	return pg, nil
}

// boot runs initdb, starts the server and creates the suite's database; a
// server it started is stopped again when it fails.
func (pg *postgres) boot(ctx context.Context) error {
	if err := pg.initdb(ctx); err != nil {
		return err
	}
	if err := pg.Start(ctx); err != nil {
		return err
	}
	if err := pg.exec(ctx, "postgres", "CREATE DATABASE "+dbName); err != nil {
		pg.Stop()
		return err
	}
	return nil
}

func (pg *postgres) dataDir() string { return filepath.Join(pg.dir, "data") }

// URL is the connection string of database over the unix socket.
func (pg *postgres) URL(database string) string {
	return pgcluster.SocketURL(pg.dir, pg.port, database)
}

// TCPAddr is the loopback address the server listens on.
func (pg *postgres) TCPAddr() string { return "127.0.0.1:" + strconv.Itoa(pg.port) }

// initdb creates the data directory.
func (pg *postgres) initdb(ctx context.Context) error {
	return pgcluster.InitDB(ctx, pgcluster.InitConfig{Initdb: pg.bins.Initdb, DataDir: pg.dataDir(), Dir: pg.dir,
		LogPath: filepath.Join(pg.dir, "initdb.log"), Credential: pg.cred, Args: []string{"--no-instructions"}})
}

// Start starts the server on the existing data directory and waits until it
// accepts connections; after a Crash this includes crash recovery.
func (pg *postgres) Start(ctx context.Context) error {
	// fsync=off is safe here: the faults are process crashes, never a lost
	// page cache. synchronous_commit stays on, so a commit a client was told
	// about survives an immediate shutdown, as it would in production.
	settings := append([]string{"fsync=off", "full_page_writes=off",
		"log_min_messages=warning", "log_line_prefix=%m [%p] %a "}, pg.settings...)
	p, err := pgcluster.StartServer(ctx, pgcluster.ServerConfig{
		Postgres: pg.bins.Postgres, DataDir: pg.dataDir(), Dir: pg.dir, SocketDir: pg.dir, Port: pg.port,
		ListenAddresses: "127.0.0.1", Settings: settings, LogPath: pg.logPath, Credential: pg.cred,
		// SIGQUIT is PostgreSQL's immediate shutdown: should the test
		// binary die, the postmaster takes its backends with it at once.
		Pdeathsig: syscall.SIGQUIT, Setpgid: pg.groupKill, StartTimeout: setupTimeout,
	})
	if err != nil {
		return err
	}
	pg.mu.Lock()
	pg.proc = p
	pg.mu.Unlock()
	return nil
}

// take returns the running server's process and forgets it, or nil.
func (pg *postgres) take() *pgcluster.Process {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	p := pg.proc
	pg.proc = nil
	return p
}

// Crash is an immediate shutdown: SIGQUIT to the postmaster, which kills
// every backend without a checkpoint, so the next Start runs crash
// recovery. It returns once the postmaster has exited.
func (pg *postgres) Crash() error {
	p := pg.take()
	if p == nil {
		return errors.New("postgres is not running")
	}
	return p.Stop(syscall.SIGQUIT, 30*time.Second)
}

// Stop shuts the server down fast (SIGINT), killing it after 30 s.
func (pg *postgres) Stop() {
	if p := pg.take(); p != nil {
		_ = p.Stop(syscall.SIGINT, 30*time.Second)
	}
}

// KillHost is kill -9 of the server's whole process group, postmaster and
// backends at once: the database machine is gone, and nothing of it writes
// again. It returns once the postmaster has exited.
func (pg *postgres) KillHost() error {
	p := pg.take()
	if p == nil {
		return errors.New("postgres is not running")
	}
	return p.KillGroup()
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

// runAsServer runs one of the PostgreSQL client programs (pg_basebackup,
// pg_ctl) as the server's user in pg's directory, and returns its error
// with its output.
func (pg *postgres) runAsServer(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(filepath.Dir(pg.bins.Postgres), name), args...)
	cmd.Dir = pg.dir
	cmd.Env = pgcluster.ChildEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, out)
	}
	return nil
}

// tail returns the end of the log at path, for failure messages.
func tail(path string) string { return pgcluster.LogTail(path) }
