package pgtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/dberr"
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
	EnvPGBin = pgcluster.EnvPGBin
)

const (
	// tmpDirPrefix prefixes the temporary directory of every throwaway
	// cluster; stale ones are swept by later runs.
	tmpDirPrefix = "searchd-pgtest-"
	// ownerPIDFile, inside the temporary directory, holds the PID of the
	// process that created the cluster.
	ownerPIDFile = "owner.pid"
	// templateLockKey is the pg_advisory_lock key serialising template
	// builds across test binaries sharing one external server.
	templateLockKey int64 = 0x73656172636864 // "searchd"

	startupTimeout = 30 * time.Second
	stopTimeout    = 10 * time.Second
	dropTimeout    = 30 * time.Second
	createRetries  = 10
	// adminConns is the MaxConns of the admin pool of each server.
	adminConns = 4
)

// Cluster is a PostgreSQL server used for tests: either a throwaway cluster
// owned by this process or an external server named by EnvDatabaseURL or
// DATABASE_URL. Its methods are safe for concurrent use.
type Cluster struct {
	adminURL string
	admin    *pgxpool.Pool
	local    *localServer // nil for an external server
	// workers are the Citus workers of a Citus cluster (Options.Citus),
	// with an admin pool each; the coordinator is local and admin.
	workers      []*localServer
	workerAdmins []*pgxpool.Pool

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
	// Citus starts a Citus cluster instead of one server: a coordinator
	// and two workers, each a throwaway server
	// with the citus extension preloaded. Every database [Cluster.CreateDB]
	// hands out is one on all of them, made a cluster ([pgcluster.JoinCitus])
	// and migrated on the coordinator, whose URL it returns; migration
	// 00019 distributes the tables. It needs the extension installed
	// ([pgcluster.CitusInstalled]). An external server is used as it is.
	Citus bool
	// ShardCount is citus.shard_count, the shards each distributed table
	// is split into; 0 keeps Citus's default (32). The tests use 4: fewer
	// shards to create per database, still two per worker.
	ShardCount int
}

// StartWith is [Start] with options.
func StartWith(ctx context.Context, opts Options) (*Cluster, error) {
	c := &Cluster{}
	if u := cmp.Or(os.Getenv(EnvDatabaseURL), os.Getenv("DATABASE_URL")); u != "" {
		c.adminURL = u
	} else {
		var ls *localServer
		var err error
		if opts.Citus {
			ls, err = c.startCitus(ctx, opts)
		} else {
			ls, err = startLocal(ctx, opts, roleSingle)
		}
		if err != nil {
			return nil, err
		}
		c.local = ls
		c.adminURL = ls.URL("postgres")
	}
	var err error
	if c.admin, err = openPool(ctx, c.adminURL, adminConns, nil); err != nil {
		c.stopLocal()
		if c.local == nil {
			return nil, fmt.Errorf("pgtest: connecting to the server named by %s/DATABASE_URL: %w", EnvDatabaseURL, err)
		}
		return nil, fmt.Errorf("pgtest: connecting to throwaway cluster: %w", err)
	}
	return c, nil
}

// Settings returns the server's version and the settings that decide what a
// commit costs, in one line, for a benchmark to print at its top.
func (c *Cluster) Settings(ctx context.Context) (string, error) {
	var line string
	err := c.admin.QueryRow(ctx, `SELECT 'PostgreSQL ' || current_setting('server_version') || ': ' || string_agg(s || '=' || current_setting(s), ' ' ORDER BY i)
		FROM unnest(ARRAY['fsync', 'synchronous_commit', 'full_page_writes', 'wal_sync_method', 'shared_buffers', 'max_connections']) WITH ORDINALITY AS t(s, i)`).Scan(&line)
	if err != nil {
		return "", fmt.Errorf("pgtest: reading the server's settings: %w", err)
	}
	return line, nil
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
	for _, p := range c.workerAdmins {
		p.Close()
	}
	var errs []error
	if c.local != nil {
		errs = append(errs, c.local.stop())
	}
	for _, w := range c.workers {
		errs = append(errs, w.stop())
	}
	return errors.Join(errs...)
}

// Citus reports whether the cluster is a Citus cluster this process
// started.
func (c *Cluster) Citus() bool { return len(c.workers) > 0 }

// Workers returns the admin connection strings of the workers of a Citus
// cluster, none for any other.
func (c *Cluster) Workers() []string {
	var out []string
	for _, w := range c.workers {
		out = append(out, w.URL("postgres"))
	}
	return out
}

// startCitus starts the coordinator and the workers of a Citus cluster
// and opens an admin pool on each worker; it returns the coordinator. On
// error nothing is left running.
func (c *Cluster) startCitus(ctx context.Context, opts Options) (_ *localServer, err error) {
	bins, err := findBinaries()
	if err != nil {
		return nil, err
	}
	if err := pgcluster.CitusInstalled(bins); err != nil {
		return nil, fmt.Errorf("pgtest: %s=1: %w", EnvCitus, err)
	}
	defer func() {
		if err != nil {
			_ = c.stopLocal()
			c.workers, c.workerAdmins = nil, nil
		}
	}()
	for range 2 {
		w, err := startLocal(ctx, opts, roleWorker)
		if err != nil {
			return nil, err
		}
		c.workers = append(c.workers, w)
		p, err := openPool(ctx, w.URL("postgres"), adminConns, nil)
		if err != nil {
			return nil, fmt.Errorf("pgtest: connecting to a Citus worker: %w", err)
		}
		c.workerAdmins = append(c.workerAdmins, p)
	}
	return startLocal(ctx, opts, roleCoordinator)
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
	name := "searchd_test_" + strings.ToLower(rand.Text())
	sql := "CREATE DATABASE " + quoteIdent(name) + " TEMPLATE " + quoteIdent(tmpl)
	// On a Citus cluster the database is cloned on every node, workers
	// first: the coordinator's copy of the metadata names the workers'
	// copies of the shards, which have the same names in each clone.
	for _, admin := range append(slices.Clone(c.workerAdmins), c.admin) {
		// The template refuses connections, so its being accessed by
		// other users (55006) is transient.
		if err := retryInUse(ctx, func() error { _, err := admin.Exec(ctx, sql); return err }); err != nil {
			_ = c.dropDB(name)
			return "", nil, fmt.Errorf("pgtest: creating database %s from template %s: %w", name, tmpl, err)
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

// dropDB drops the named database, disconnecting any sessions still using
// it: on every node of a Citus cluster, the coordinator first. There each
// node's Citus maintenance daemon holds sessions to every other node's
// copy of the database, reconnects those that are ended, and may be
// waiting on one when its own copy is dropped (it then outlasts the drop's
// wait). So the copies are first closed to new connections everywhere and
// their client sessions ended everywhere; then each drop stops its node's
// daemon and ends what is left.
func (c *Cluster) dropDB(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
	defer cancel()
	admins := append([]*pgxpool.Pool{c.admin}, c.workerAdmins...)
	if c.Citus() {
		for _, admin := range admins {
			_, _ = admin.Exec(ctx, "ALTER DATABASE "+quoteIdent(name)+" WITH ALLOW_CONNECTIONS false")
		}
		for _, admin := range admins {
			_, _ = admin.Exec(ctx, terminateSessions+" AND backend_type = 'client backend'", name)
		}
	}
	var errs []error
	for _, admin := range admins {
		if err := dropOn(ctx, admin, name); err != nil {
			errs = append(errs, fmt.Errorf("pgtest: dropping database %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// dropOn drops the database name of one server. A Citus maintenance daemon
// busy on a remote call outlasts the forced drop's wait for its sessions
// (the drop signalled it, and it exits once the call returns): the drop is
// tried again, with whatever still holds the database ended again, until
// ctx ends.
func dropOn(ctx context.Context, admin *pgxpool.Pool, name string) error {
	for attempt := 1; ; attempt++ {
		_, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+quoteIdent(name)+" WITH (FORCE)")
		if err == nil || dberr.Code(err) != "55006" {
			return err
		}
		_, _ = admin.Exec(ctx, terminateSessions, name)
		if serr := sleep(ctx, time.Duration(min(attempt, 10))*100*time.Millisecond); serr != nil {
			return err
		}
	}
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

	build := name + "_build_" + strings.ToLower(rand.Text())
	create := "CREATE DATABASE " + quoteIdent(build) + " TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"
	if _, err = conn.Exec(ctx, create); err != nil {
		return "", fmt.Errorf("pgtest: creating template database %s: %w", build, err)
	}
	keep := false
	defer func() {
		if !keep {
			_ = c.dropDB(build)
		}
	}()
	if err := c.migrateTemplate(ctx, create, build, name); err != nil {
		return "", err
	}
	// The coordinator's copy is published last, so the coordinator's
	// sessions to the workers are gone with their database's sessions.
	err = publishTemplate(ctx, conn, build, name)
	if code := dberr.Code(err); code == "42P04" || code == "23505" {
		// Built concurrently by a process that did not share our lock
		// (advisory locks are per database, and its admin connection
		// used another one). Use that template and drop ours. A rename
		// racing the other one's commit reports a unique violation
		// (23505) rather than 42P04.
		return name, nil
	}
	if err != nil {
		return "", err
	}
	keep = true
	return name, nil
}

// migrateTemplate creates the database build on every Citus worker with
// create (the coordinator has it already), makes the nodes one Citus
// cluster, migrates build and closes the workers' copies as name.
func (c *Cluster) migrateTemplate(ctx context.Context, create, build, name string) error {
	for _, w := range c.workerAdmins {
		if _, err := w.Exec(ctx, create); err != nil {
			return fmt.Errorf("pgtest: creating template database %s on a Citus worker: %w", build, err)
		}
	}
	buildURL, err := withDatabase(c.adminURL, build)
	if err != nil {
		return err
	}
	if c.Citus() {
		if err := c.joinCitus(ctx, build); err != nil {
			return err
		}
	}
	if _, err := migrations.Up(ctx, buildURL); err != nil {
		return fmt.Errorf("pgtest: migrating template database %s: %w", build, err)
	}
	for _, w := range c.workerAdmins {
		if err := publishTemplate(ctx, w, build, name); err != nil {
			return fmt.Errorf("%w (on a Citus worker)", err)
		}
	}
	return nil
}

// publishTemplate closes the database build of one server to connections
// and renames it to name. The rename fails while the database has sessions,
// so whatever migrations.Up left behind is disconnected first.
func publishTemplate(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, build, name string) error {
	if _, err := db.Exec(ctx, "ALTER DATABASE "+quoteIdent(build)+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("pgtest: closing template %s to connections: %w", build, err)
	}
	err := retryInUse(ctx, func() error {
		if _, err := db.Exec(ctx, terminateSessions, build); err != nil {
			return err
		}
		_, err := db.Exec(ctx, "ALTER DATABASE "+quoteIdent(build)+" RENAME TO "+quoteIdent(name))
		return err
	})
	if err != nil {
		return fmt.Errorf("pgtest: renaming %s to %s: %w", build, name, err)
	}
	return nil
}

// joinCitus makes the database build of every node one Citus cluster: the
// workers join the coordinator, each by the directory of its socket.
func (c *Cluster) joinCitus(ctx context.Context, build string) error {
	var urls []string
	var nodes []pgcluster.CitusNode
	for _, w := range c.workers {
		urls = append(urls, w.URL(build))
		nodes = append(nodes, w.Node())
	}
	if err := pgcluster.JoinCitus(ctx, c.local.URL(build), c.local.Node(), urls, nodes); err != nil {
		return fmt.Errorf("pgtest: making %s a Citus cluster: %w", build, err)
	}
	return nil
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

// localServer is a throwaway cluster run by this process, in dir.
type localServer struct {
	*pgcluster.Cluster
	dir string
}

// role is what a throwaway server is: a server of its own, or a node of a
// Citus cluster.
type role int

const (
	roleSingle role = iota
	roleCoordinator
	roleWorker
)

// startLocal initialises and starts a throwaway cluster in a new
// temporary directory (with [pgcluster.Start]) and waits until it accepts
// connections. On error nothing is left running and the directory is
// removed.
func startLocal(ctx context.Context, opts Options, r role) (*localServer, error) {
	bins, err := findBinaries()
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
	var c *pgcluster.Cluster
	if err = os.WriteFile(filepath.Join(dir, ownerPIDFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err == nil {
		c, err = pgcluster.Start(ctx, pgcluster.Config{Dir: dir, Binaries: bins, Settings: serverSettings(opts, r),
			StartTimeout: startupTimeout, StopTimeout: stopTimeout,
			// --no-sync: a throwaway cluster need not survive a power cut.
			InitArgs: []string{"--no-sync"},
			// SIGKILL: the cluster dies with the test binary, even when
			// that is SIGKILLed, and its directory is swept by a later run.
			Pdeathsig: syscall.SIGKILL})
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	return &localServer{Cluster: c, dir: dir}, nil
}

// serverSettings are the settings of a throwaway server of role r.
func serverSettings(opts Options, r role) map[string]string {
	// Durability: off for tests, which commit thousands of throwaway rows;
	// on for benchmarks, which must pay what a commit costs in production.
	durability := "off"
	if opts.Durable {
		durability = "on"
	}
	settings := []string{
		"fsync=" + durability,
		"synchronous_commit=" + durability,
		"full_page_writes=" + durability,
		"max_connections=300",
		"shared_buffers=128MB",
	}
	switch r {
	case roleCoordinator:
		settings = append(settings, pgcluster.CitusSettings(300)...)
		if opts.ShardCount > 0 {
			settings = append(settings, fmt.Sprintf("citus.shard_count=%d", opts.ShardCount))
		}
	case roleWorker:
		// A worker serves the coordinator's connections of every test
		// database at once: more connections, less memory.
		settings = append(settings, "shared_buffers=64MB")
		settings = append(settings, pgcluster.CitusSettings(500)...)
	}
	m := map[string]string{} // a later setting overrides an earlier one
	for _, s := range settings {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return m
}

// stop shuts the server down (fast shutdown, then SIGKILL after
// stopTimeout) and removes its directory.
func (s *localServer) stop() error {
	_ = s.Stop() // killed after stopTimeout
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("pgtest: removing %s: %w", s.dir, err)
	}
	return nil
}

// findBinaries is [pgcluster.FindBinaries] whose error adds the test-only
// way out: a server to use instead.
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
		owner, ok := pgcluster.ReadPID(filepath.Join(dir, ownerPIDFile))
		if !ok || pgcluster.Alive(owner) {
			continue
		}
		if pm, ok := pgcluster.ReadPID(filepath.Join(dir, "data", "postmaster.pid")); ok && pgcluster.Alive(pm) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
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

// terminateSessions ends the other sessions on the database $1.
const terminateSessions = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()"

// retryInUse runs f until it succeeds, fails otherwise than with 55006
// (object in use: the database is being accessed by other users) or has
// failed createRetries times, sleeping longer after each failure. It
// returns f's last error, or ctx's when ctx ends while it sleeps.
func retryInUse(ctx context.Context, f func() error) error {
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || dberr.Code(err) != "55006" || attempt == createRetries {
			return err
		}
		if err := sleep(ctx, time.Duration(attempt)*50*time.Millisecond); err != nil {
			return err
		}
	}
}

// openPool opens a pool of at most maxConns connections on connString,
// with tracer on its connections when it is not nil, and checks that it
// connects.
func openPool(ctx context.Context, connString string, maxConns int32, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = maxConns
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
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
