package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/pgcluster"
	"github.com/searchd/searchd/migrations"
)

// Environment variables read by the harness.
const (
	// EnvDatabaseURL names an existing server to use instead of a throwaway
	// cluster. It must be an admin connection string: the role needs
	// CREATEDB and must be able to DROP ... WITH (FORCE) the databases it
	// created (PostgreSQL 13 or later). DATABASE_URL is consulted when this
	// is unset.
	EnvDatabaseURL = "SEARCHD_TEST_DATABASE_URL"
	// EnvPGBin names the directory holding initdb and postgres for the
	// throwaway cluster.
	EnvPGBin = "SEARCHD_PG_BIN"
)

const (
	// tmpDirPrefix prefixes the temporary directory of every throwaway
	// cluster; stale ones are swept by later runs.
	tmpDirPrefix = "searchd-pgtest-"
	// ownerPIDFile, inside the temporary directory, holds the PID of the
	// process that created the cluster.
	ownerPIDFile = "owner.pid"
	// localPort only names the socket file: the cluster listens on a unix
	// socket in its own directory, so the number never clashes.
	localPort = "5432"
	// templateLockKey is the pg_advisory_lock key serialising template
	// builds across test binaries sharing one external server.
	templateLockKey int64 = 0x73656172636864 // "searchd"

	startupTimeout = 30 * time.Second
	stopTimeout    = 10 * time.Second
	dropTimeout    = 30 * time.Second
	createRetries  = 10
)

// Cluster is a PostgreSQL server used for tests: either a throwaway cluster
// owned by this process or an external server named by EnvDatabaseURL or
// DATABASE_URL. Its methods are safe for concurrent use.
type Cluster struct {
	adminURL string
	admin    *pgxpool.Pool
	local    *localServer // nil for an external server

	tmplMu   sync.Mutex
	tmplName string // non-empty once the template exists
	tmplErr  error  // sticky template build failure

	stopOnce sync.Once
	stopErr  error
}

// Start returns a Cluster for callers that are not tests, such as benchmark
// programs; tests should use NewDB or NewDBURL instead. Every call returns a
// new Cluster: if EnvDatabaseURL (else DATABASE_URL) is set it connects to
// that server, otherwise it initialises and starts a throwaway cluster in a
// fresh temporary directory, which the caller must release with Stop.
//
// Start returns an error, and leaves nothing running, when the PostgreSQL
// binaries cannot be found, initdb fails, the server does not accept
// connections within 30 seconds (the error then includes the tail of the
// server log), the external server cannot be reached, or ctx ends first.
func Start(ctx context.Context) (*Cluster, error) {
	return StartWith(ctx, Options{})
}

// Options configure [StartWith].
type Options struct {
	// Durable starts the throwaway cluster as users run PostgreSQL:
	// fsync=on, synchronous_commit=on and full_page_writes=on, so every
	// commit waits for its WAL flush. The default (false) turns all three
	// off, which is right for tests and wrong for anything that measures
	// commits: benchmarks set Durable. An external server (EnvDatabaseURL)
	// is used as it is configured; print its settings ([Cluster.Settings])
	// to see what was measured.
	Durable bool
}

// StartWith is [Start] with options.
func StartWith(ctx context.Context, opts Options) (*Cluster, error) {
	c := &Cluster{}
	if u := externalURL(); u != "" {
		c.adminURL = u
	} else {
		ls, err := startLocal(ctx, opts)
		if err != nil {
			return nil, err
		}
		c.local = ls
		c.adminURL = ls.adminURL
	}
	cfg, err := pgxpool.ParseConfig(c.adminURL)
	if err != nil {
		c.stopLocal()
		return nil, fmt.Errorf("pgtest: parsing admin connection string: %w", err)
	}
	cfg.MaxConns = 4
	c.admin, err = pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = c.admin.Ping(ctx)
	}
	if err != nil {
		if c.admin != nil {
			c.admin.Close()
		}
		c.stopLocal()
		if c.local == nil {
			return nil, fmt.Errorf("pgtest: connecting to the server named by %s/DATABASE_URL: %w", EnvDatabaseURL, err)
		}
		return nil, fmt.Errorf("pgtest: connecting to throwaway cluster: %w", err)
	}
	return c, nil
}

// externalURL returns the connection string of the external server to use,
// or "" to use a throwaway cluster.
func externalURL() string {
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return u
	}
	return os.Getenv("DATABASE_URL")
}

// Settings returns the server's version and the settings that decide what a
// commit costs, in one line, for a benchmark to print at its top.
func (c *Cluster) Settings(ctx context.Context) (string, error) {
	var version, fsync, syncCommit, fpw, walSync, sharedBuffers, maxConns string
	err := c.admin.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('full_page_writes'),
		current_setting('wal_sync_method'), current_setting('shared_buffers'), current_setting('max_connections')`).
		Scan(&version, &fsync, &syncCommit, &fpw, &walSync, &sharedBuffers, &maxConns)
	if err != nil {
		return "", fmt.Errorf("pgtest: reading the server's settings: %w", err)
	}
	return fmt.Sprintf("PostgreSQL %s: fsync=%s synchronous_commit=%s full_page_writes=%s wal_sync_method=%s shared_buffers=%s max_connections=%s",
		version, fsync, syncCommit, fpw, walSync, sharedBuffers, maxConns), nil
}

// URL returns the admin connection string of the server.
func (c *Cluster) URL() string { return c.adminURL }

// External reports whether the cluster is an external server rather than a
// throwaway cluster owned by this process.
func (c *Cluster) External() bool { return c.local == nil }

// Stop releases the cluster. For a throwaway cluster it asks postgres for a
// fast shutdown (SIGINT), kills it after 10 seconds, and removes its
// temporary directory; for an external server it only closes connections,
// leaving the template database in place for later runs. Stop is idempotent;
// later calls return the first call's result. The error reports a failure to
// remove the temporary directory.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		if c.admin != nil {
			c.admin.Close()
		}
		c.stopErr = c.stopLocal()
	})
	return c.stopErr
}

func (c *Cluster) stopLocal() error {
	if c.local == nil {
		return nil
	}
	return c.local.stop()
}

// CreateDB creates a database cloned from the migrated template and returns
// its connection string and a function that drops it. The template is built
// on first use (see the package documentation). drop is idempotent and
// best-effort: it ignores errors, since the server may already be gone.
//
// CreateDB returns an error when building the template fails (including a
// migrations.Up failure; the failure is remembered and returned by later
// calls without retrying, unless it was caused by ctx ending), when CREATE
// DATABASE fails, or when ctx ends.
func (c *Cluster) CreateDB(ctx context.Context) (url string, drop func(), err error) {
	url, dropErr, err := c.createDB(ctx)
	if err != nil {
		return "", nil, err
	}
	return url, func() { _ = dropErr() }, nil
}

// createDB is CreateDB with a drop function that reports its error.
func (c *Cluster) createDB(ctx context.Context) (string, func() error, error) {
	tmpl, err := c.template(ctx)
	if err != nil {
		return "", nil, err
	}
	name := "searchd_test_" + randomHex(8)
	sql := "CREATE DATABASE " + quoteIdent(name) + " TEMPLATE " + quoteIdent(tmpl)
	for attempt := 1; ; attempt++ {
		_, err = c.admin.Exec(ctx, sql)
		if err == nil {
			break
		}
		// 55006: the template is being accessed by other users. The
		// template refuses connections, so this is transient.
		if sqlState(err) != "55006" || attempt == createRetries {
			return "", nil, fmt.Errorf("pgtest: creating database %s from template %s: %w", name, tmpl, err)
		}
		if err := sleep(ctx, time.Duration(attempt)*50*time.Millisecond); err != nil {
			return "", nil, fmt.Errorf("pgtest: creating database %s: %w", name, err)
		}
	}
	dbURL, err := withDatabase(c.adminURL, name)
	if err != nil {
		_ = c.dropDB(name)
		return "", nil, err
	}
	var once sync.Once
	var dropErr error
	drop := func() error {
		once.Do(func() { dropErr = c.dropDB(name) })
		return dropErr
	}
	return dbURL, drop, nil
}

// dropDB drops the named database, disconnecting any sessions still using it.
func (c *Cluster) dropDB(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
	defer cancel()
	_, err := c.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+quoteIdent(name)+" WITH (FORCE)")
	if err != nil {
		return fmt.Errorf("pgtest: dropping database %s: %w", name, err)
	}
	return nil
}

// template returns the name of the migrated template database, building it
// if needed.
func (c *Cluster) template(ctx context.Context) (string, error) {
	c.tmplMu.Lock()
	defer c.tmplMu.Unlock()
	if c.tmplName != "" {
		return c.tmplName, nil
	}
	if c.tmplErr != nil {
		return "", c.tmplErr
	}
	name, err := c.ensureTemplate(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.tmplErr = err
		}
		return "", err
	}
	c.tmplName = name
	return name, nil
}

// ensureTemplate makes sure the template database for the current
// migrations exists on the server and returns its name.
//
// Several processes may share the server, so the check-and-build runs under
// a session advisory lock held on a dedicated admin connection. The template
// is built under a temporary name and renamed once migrated, so a database
// with the final name is always complete. It is then closed to connections,
// so that nothing can block CREATE DATABASE ... TEMPLATE.
func (c *Cluster) ensureTemplate(ctx context.Context) (name string, err error) {
	name, err = templateName()
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, c.adminURL)
	if err != nil {
		return "", fmt.Errorf("pgtest: connecting to build template: %w", err)
	}
	// Closing the session also releases the advisory lock.
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return "", fmt.Errorf("pgtest: locking template build: %w", err)
	}

	var exists bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists)
	if err != nil {
		return "", fmt.Errorf("pgtest: looking up template %s: %w", name, err)
	}
	if exists {
		return name, nil
	}

	build := name + "_build_" + randomHex(4)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+quoteIdent(build)+
		" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'")
	if err != nil {
		return "", fmt.Errorf("pgtest: creating template database %s: %w", build, err)
	}
	keep := false
	defer func() {
		if !keep {
			_ = c.dropDB(build)
		}
	}()

	buildURL, err := withDatabase(c.adminURL, build)
	if err != nil {
		return "", err
	}
	if _, err := migrations.Up(ctx, buildURL); err != nil {
		return "", fmt.Errorf("pgtest: migrating template database %s: %w", build, err)
	}

	if _, err := conn.Exec(ctx, "ALTER DATABASE "+quoteIdent(build)+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return "", fmt.Errorf("pgtest: closing template %s to connections: %w", build, err)
	}
	rename := "ALTER DATABASE " + quoteIdent(build) + " RENAME TO " + quoteIdent(name)
	for attempt := 1; ; attempt++ {
		// Disconnect anything migrations.Up left behind; the rename
		// fails while the database has sessions.
		_, err = conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", build)
		if err != nil {
			return "", fmt.Errorf("pgtest: disconnecting sessions from %s: %w", build, err)
		}
		_, err = conn.Exec(ctx, rename)
		if err == nil {
			keep = true
			return name, nil
		}
		switch {
		case sqlState(err) == "42P04" || sqlState(err) == "23505":
			// Built concurrently by a process that did not share our
			// lock (advisory locks are per database, and its admin
			// connection used another one). Use that template and drop
			// ours. A rename racing the other one's commit reports a
			// unique violation (23505) rather than 42P04.
			return name, nil
		case sqlState(err) == "55006" && attempt < createRetries:
			if err := sleep(ctx, time.Duration(attempt)*50*time.Millisecond); err != nil {
				return "", fmt.Errorf("pgtest: renaming template: %w", err)
			}
		default:
			return "", fmt.Errorf("pgtest: renaming %s to %s: %w", build, name, err)
		}
	}
}

// templateName derives the template database name from the names and
// contents of the files in migrations.FS, so a change to any migration
// yields a new template.
func templateName() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("pgtest: hashing migrations: %w", err)
	}
	return "searchd_tmpl_" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// localServer is a throwaway cluster run by this process.
type localServer struct {
	dir      string
	logPath  string
	adminURL string
	proc     *pinnedProc
}

// startLocal initialises and starts a throwaway cluster and waits until it
// accepts connections. On error nothing is left running and the temporary
// directory is removed.
func startLocal(ctx context.Context, opts Options) (_ *localServer, err error) {
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := pgcluster.ServerCredential()
	if err != nil {
		return nil, err
	}
	sweepStaleDirs()

	base := os.TempDir()
	// A unix socket path is limited to 107 bytes.
	if len(base) > 60 {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, tmpDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("pgtest: creating temporary directory: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, ownerPIDFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	sockDir := filepath.Join(dir, "sock")
	dataDir := filepath.Join(dir, "data")
	if err := os.Mkdir(sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if cred != nil {
		// initdb creates dataDir inside dir, so the server's user must
		// own both dir and sockDir.
		for _, p := range []string{dir, sockDir} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("pgtest: %w", err)
			}
		}
	}

	initLog := filepath.Join(dir, "initdb.log")
	initdb := exec.Command(bins.Initdb, "-D", dataDir, "-A", "trust", "-U", "postgres",
		"--no-sync", "-E", "UTF8", "--locale=C")
	// Durability: off for tests, which commit thousands of throwaway rows;
	// on for benchmarks, which must pay what a commit costs in production.
	durability := "off"
	if opts.Durable {
		durability = "on"
	}
	if err := runPinned(ctx, initdb, dir, initLog, cred); err != nil {
		return nil, fmt.Errorf("pgtest: %s failed: %w\n%s", bins.Initdb, err, logTail(initLog))
	}

	logPath := filepath.Join(dir, "postgres.log")
	server := exec.Command(bins.Postgres, "-D", dataDir,
		"-k", sockDir,
		"-c", "listen_addresses=",
		"-p", localPort,
		"-c", "fsync="+durability,
		"-c", "synchronous_commit="+durability,
		"-c", "full_page_writes="+durability,
		"-c", "max_connections=300",
		"-c", "shared_buffers=128MB",
	)
	proc, err := startPinned(server, dir, logPath, cred)
	if err != nil {
		return nil, fmt.Errorf("pgtest: starting %s: %w", bins.Postgres, err)
	}
	ls := &localServer{dir: dir, logPath: logPath, proc: proc}
	ls.adminURL = (&url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Path:     "/postgres",
		RawQuery: url.Values{"host": {sockDir}, "port": {localPort}, "sslmode": {"disable"}}.Encode(),
	}).String()
	if err := ls.waitReady(ctx); err != nil {
		ls.kill()
		return nil, err
	}
	return ls, nil
}

// waitReady polls until the server accepts a connection.
func (s *localServer) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	for {
		attemptCtx, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(attemptCtx, s.adminURL)
		cancelAttempt()
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-s.proc.done:
			return fmt.Errorf("pgtest: postgres exited during startup (%v)\n%s", s.proc.err, logTail(s.logPath))
		case <-ctx.Done():
			return fmt.Errorf("pgtest: postgres not ready after %v: %w (last error: %v)\n%s",
				startupTimeout, ctx.Err(), err, logTail(s.logPath))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop shuts the server down (fast shutdown, then SIGKILL after
// stopTimeout) and removes its directory.
func (s *localServer) stop() error {
	_ = s.proc.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.proc.done:
	case <-time.After(stopTimeout):
		s.kill()
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("pgtest: removing %s: %w", s.dir, err)
	}
	return nil
}

// kill kills the server and waits for it to exit, without removing its
// directory.
func (s *localServer) kill() {
	_ = s.proc.cmd.Process.Kill()
	<-s.proc.done
}

// pinnedProc is a child process started from a dedicated, locked OS thread.
type pinnedProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has been waited for
	err  error         // result of cmd.Wait, valid once done is closed
}

// startPinned starts cmd with Pdeathsig=SIGKILL so that it dies with this
// process, even on SIGKILL. The kernel delivers the parent-death signal when
// the OS *thread* that forked the child exits, not the process, so cmd is
// started from a goroutine locked to its thread that never unlocks: it stays
// blocked in cmd.Wait for the child's whole life, and as it returns still
// locked, the runtime retires the thread instead of reusing it.
//
// The child's stdout and stderr go to logPath, its working directory is dir,
// and it runs as cred when cred is non-nil.
func startPinned(cmd *exec.Cmd, dir, logPath string, cred *syscall.Credential) (*pinnedProc, error) {
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Dir = dir
	cmd.Env = pgcluster.ChildEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}

	p := &pinnedProc{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // deliberately never unlocked; see above
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

// runPinned runs cmd like startPinned and waits for it to finish, killing it
// if ctx ends first.
func runPinned(ctx context.Context, cmd *exec.Cmd, dir, logPath string, cred *syscall.Credential) error {
	p, err := startPinned(cmd, dir, logPath, cred)
	if err != nil {
		return err
	}
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-p.done
		return ctx.Err()
	}
}

// findBinaries locates initdb and postgres through [pgcluster.FindBinaries]
// ($SEARCHD_PG_BIN, `pg_config --bindir`, /usr/lib/postgresql/*/bin, $PATH),
// adding the test-only way out: a server to use instead.
func findBinaries() (pgcluster.Binaries, error) {
	b, err := pgcluster.FindBinaries(os.Getenv(EnvPGBin))
	if err != nil {
		return b, fmt.Errorf("pgtest: %w; or set %s to the URL of a server to use", err, EnvDatabaseURL)
	}
	return b, nil
}

// sweepStaleDirs removes the temporary directories of throwaway clusters
// whose owning process and postmaster are both gone (for example after the
// test binary was killed). Errors are ignored.
func sweepStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tmpDirPrefix+"*"))
	if os.TempDir() != "/tmp" {
		more, _ := filepath.Glob(filepath.Join("/tmp", tmpDirPrefix+"*"))
		dirs = append(dirs, more...)
	}
	for _, dir := range dirs {
		owner, ok := readPID(filepath.Join(dir, ownerPIDFile))
		if !ok || processExists(owner) {
			continue
		}
		if pm, ok := readPID(filepath.Join(dir, "data", "postmaster.pid")); ok && processExists(pm) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

// readPID parses the first line of path as a PID.
func readPID(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	return pid, err == nil && pid > 0
}

func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// logTail returns the last few KiB of the log at path, for error messages.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	const n = 4096
	if len(b) > n {
		b = b[len(b)-n:]
		if i := strings.IndexByte(string(b), '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return "--- " + path + " (tail) ---\n" + strings.TrimRight(string(b), "\n")
}

// withDatabase returns connString with its database replaced by db. It
// handles URLs (postgres://, postgresql://) and keyword/value strings (a
// later dbname= overrides an earlier one).
func withDatabase(connString, db string) (string, error) {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err != nil {
			return "", fmt.Errorf("pgtest: parsing connection URL: %w", err)
		}
		u.Path = "/" + db
		u.RawPath = ""
		return u.String(), nil
	}
	return connString + " dbname=" + db, nil
}

func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func randomHex(nBytes int) string {
	b := make([]byte, nBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}
