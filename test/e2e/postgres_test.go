//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
// `pg_ctl restart -m immediate`.
type postgres struct {
	bins    pgcluster.Binaries
	dir     string // owned by the server's user; holds data/ and the socket
	logPath string
	port    int
	cred    *syscall.Credential // nil when we are not root
	// args are more server settings (-c name=value ...), such as the
	// replication settings of a failover pair; groupKill starts the
	// server in a process group of its own, so Kill takes its backends
	// at once, the way a lost machine does.
	args      []string
	groupKill bool

	mu   sync.Mutex
	proc *process
}

// startPostgres runs initdb in a new directory under parent and starts the
// server. parent must be traversable by the server's user.
func startPostgres(ctx context.Context, parent string) (*postgres, error) {
	bins, err := pgcluster.FindBinaries(os.Getenv(pgcluster.EnvPGBin))
	if err != nil {
		return nil, err
	}
	cred, err := pgcluster.ServerCredential()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	pg := &postgres{bins: bins, dir: filepath.Join(parent, "pg"), port: port, cred: cred}
	pg.logPath = filepath.Join(pg.dir, "postgres.log")
	if err := os.Mkdir(pg.dir, 0o700); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(pg.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	initdb := exec.CommandContext(ctx, bins.Initdb, "-D", pg.dataDir(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-instructions")
	initdb.Dir = pg.dir
	initdb.Env = pgEnv()
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if err := pg.Start(ctx); err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		pg.Stop()
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+dbName); err != nil {
		pg.Stop()
		return nil, err
	}
	return pg, nil
}

func (pg *postgres) dataDir() string { return filepath.Join(pg.dir, "data") }

// URL is the connection string of database over the unix socket.
func (pg *postgres) URL(database string) string {
	return (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + database,
		RawQuery: url.Values{"host": {pg.dir}, "port": {strconv.Itoa(pg.port)}, "sslmode": {"disable"}}.Encode()}).String()
}

// TCPAddr is the loopback address the server listens on.
func (pg *postgres) TCPAddr() string { return "127.0.0.1:" + strconv.Itoa(pg.port) }

// Start starts the server on the existing data directory and waits until it
// accepts connections; after a Crash this includes crash recovery.
func (pg *postgres) Start(ctx context.Context) error {
	// fsync=off is safe here: the faults are process crashes, never a lost
	// page cache. synchronous_commit stays on, so a commit a client was told
	// about survives an immediate shutdown, as it would in production.
	cmd := exec.Command(pg.bins.Postgres, "-D", pg.dataDir(), "-k", pg.dir, "-p", strconv.Itoa(pg.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "log_min_messages=warning", "-c", "log_line_prefix=%m [%p] %a ")
	cmd.Args = append(cmd.Args, pg.args...)
	cmd.Dir = pg.dir
	cmd.Env = pgEnv()
	// SIGQUIT is PostgreSQL's immediate shutdown: should the test binary die,
	// the postmaster takes its backends with it at once.
	p, err := startProcess(cmd, pg.logPath, &syscall.SysProcAttr{Credential: pg.cred, Pdeathsig: syscall.SIGQUIT, Setpgid: pg.groupKill})
	if err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	pg.mu.Lock()
	pg.proc = p
	pg.mu.Unlock()
	deadline := time.Now().Add(setupTimeout)
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(actx, pg.URL("postgres"))
		cancel()
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-p.done:
			return fmt.Errorf("postgres exited while starting: %v\n%s", p.err, tail(pg.logPath))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready within %s: %v\n%s", setupTimeout, err, tail(pg.logPath))
		}
	}
}

// Crash is an immediate shutdown: SIGQUIT to the postmaster, which kills
// every backend without a checkpoint, so the next Start runs crash
// recovery. It returns once the postmaster has exited.
func (pg *postgres) Crash() error {
	pg.mu.Lock()
	p := pg.proc
	pg.proc = nil
	pg.mu.Unlock()
	if p == nil {
		return errors.New("postgres is not running")
	}
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		p.kill()
		return errors.New("postgres did not exit within 30s of SIGQUIT; killed")
	}
}

// Stop shuts the server down fast (SIGINT), killing it after 30 s.
func (pg *postgres) Stop() {
	pg.mu.Lock()
	p := pg.proc
	pg.proc = nil
	pg.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

// process is a child forked from a goroutine locked to its OS thread for
// the child's whole life: a parent-death signal follows the thread that
// forked, and a locked thread is retired with its goroutine, never reused.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // cmd.Wait's result, set before done closes
}

// startProcess starts cmd with its output appended to logPath.
func startProcess(cmd *exec.Cmd, logPath string, attr *syscall.SysProcAttr) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = attr
	p := &process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see process
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// signal sends sig unless the process has exited.
func (p *process) signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return errors.New("process has exited")
	default:
	}
	return p.cmd.Process.Signal(sig)
}

// pgEnv is our environment without the libpq and locale variables, which
// could point initdb and postgres elsewhere.
func pgEnv() []string {
	env := []string{"LC_ALL=C"}
	for _, name := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// tail returns the last 4 KiB of the file at path, for failure messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log at %s: %v)", path, err)
	}
	const n = 4 << 10
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
