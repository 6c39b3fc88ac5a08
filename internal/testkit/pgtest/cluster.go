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
	"github.com/searchd/searchd/internal/loop"
	"github.com/searchd/searchd/internal/pgcluster"
	"github.com/searchd/searchd/migrations"
)

// Environment variables read by the harness.
const (
	// EnvDatabaseURL names an existing server to use instead of a throwaway
	// cluster (else DATABASE_URL). The role needs CREATEDB and DROP ... WITH
	// (FORCE) on its databases (PostgreSQL 13+).
	EnvDatabaseURL = "SEARCHD_TEST_DATABASE_URL"
	// EnvPGBin names the directory of initdb and postgres.
	EnvPGBin = pgcluster.EnvPGBin
)

const (
	// tmpDirPrefix prefixes every throwaway cluster's directory; later runs
	// sweep stale ones.
	tmpDirPrefix = "searchd-pgtest-"
	// ownerPIDFile holds the PID of the process that created the cluster.
	ownerPIDFile = "owner.pid"
	// templateLockKey is the advisory lock key serializing template builds
	// across test binaries sharing a server.
	templateLockKey int64 = 0x73656172636864 // "searchd"

	startupTimeout = 30 * time.Second
	stopTimeout    = 10 * time.Second
	dropTimeout    = 30 * time.Second
	createRetries  = 10
	adminConns     = 4
)

// Cluster is a PostgreSQL server for tests: a throwaway cluster owned by
// this process, or an external server. Its methods are safe for concurrent
// use.
type Cluster struct {
	adminURL string
	admin    *pgxpool.Pool
	local    *localServer // nil for an external server
	// workers are a Citus cluster's workers, each with an admin pool.
	workers      []*localServer
	workerAdmins []*pgxpool.Pool

	tmplMu   sync.Mutex
	tmplName string // non-empty once the template exists
	tmplErr  error  // sticky template build failure

	stopOnce sync.Once
	stopErr  error
}

// Options configure [StartWith]; the zero value is a single server.
type Options struct {
	// Durable runs with fsync, synchronous_commit and full_page_writes on,
	// as production does; the default turns them off. Benchmarks set it. An
	// external server is used as configured (see [Cluster.Settings]).
	Durable bool
	// Citus starts a coordinator and two workers with citus preloaded.
	// [Cluster.CreateDB] then creates each database on every node, joins
	// them ([pgcluster.JoinCitus]) and migrates on the coordinator. It needs
	// the extension installed ([pgcluster.CitusInstalled]).
	Citus bool
	// ShardCount is citus.shard_count; 0 keeps Citus's default (32).
	ShardCount int
}

// StartWith returns a new Cluster for non-test callers such as benchmarks;
// tests use NewDB or NewDBURL. It connects to EnvDatabaseURL (else
// DATABASE_URL) if set, else starts a throwaway cluster the caller must
// Stop. On error nothing is left running; a server that does not accept
// connections within 30 seconds yields an error with its log's tail.
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

// Settings returns the server version and the settings that decide what a
// commit costs, in one line, for benchmarks to print.
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

// External reports whether the cluster is an external server.
func (c *Cluster) External() bool { return c.local == nil }

// Stop releases the cluster: a throwaway cluster gets a fast shutdown
// (SIGKILL after 10 seconds) and its directory removed; an external server
// only loses its connections. Stop is idempotent. Its error reports a
// failure to remove the directory.
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

// startCitus starts a Citus coordinator and workers with admin pools on the
// workers and returns the coordinator. On error nothing is left running.
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

// CreateDB clones the migrated template (built on first use) into a new
// database and returns its URL and an idempotent drop, whose error reports
// a failed drop. A template build failure is remembered and returned by
// later calls, unless caused by ctx ending.
func (c *Cluster) CreateDB(ctx context.Context) (url string, drop func() error, err error) {
	tmpl, err := c.template(ctx)
	if err != nil {
		return "", nil, err
	}
	name := "searchd_test_" + strings.ToLower(rand.Text())
	sql := "CREATE DATABASE " + quoteIdent(name) + " TEMPLATE " + quoteIdent(tmpl)
	// On Citus, clone on every node, workers first: the coordinator's
	// metadata names shards that have the same names in each clone.
	for _, admin := range append(slices.Clone(c.workerAdmins), c.admin) {
		// The template refuses connections, so 55006 (in use) is transient.
		if err := retryInUse(ctx, createRetries, func() error { _, err := admin.Exec(ctx, sql); return err }); err != nil {
			_ = c.dropDB(name)
			return "", nil, fmt.Errorf("pgtest: creating database %s from template %s: %w", name, tmpl, err)
		}
	}
	dbURL, err := withDatabase(c.adminURL, name)
	if err != nil {
		_ = c.dropDB(name)
		return "", nil, err
	}
	return dbURL, sync.OnceValue(func() error { return c.dropDB(name) }), nil
}

// dropDB drops the named database on every node, coordinator first. Citus
// maintenance daemons hold and reopen sessions to the other nodes' copies,
// so all copies are first closed to new connections and their sessions
// ended; then each drop stops its node's daemon.
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
		// Retried until ctx ends: a Citus daemon busy on a remote call can
		// outlast the forced drop's wait.
		err := retryInUse(ctx, 0, func() error {
			_, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+quoteIdent(name)+" WITH (FORCE)")
			if dberr.Code(err) == "55006" {
				_, _ = admin.Exec(ctx, terminateSessions, name)
			}
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("pgtest: dropping database %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// template returns the migrated template's name, building it if needed.
func (c *Cluster) template(ctx context.Context) (string, error) {
	c.tmplMu.Lock()
	defer c.tmplMu.Unlock()
	if c.tmplName != "" || c.tmplErr != nil {
		return c.tmplName, c.tmplErr
	}
	name, err := c.ensureTemplate(ctx) // "" on error
	if err != nil && ctx.Err() == nil {
		c.tmplErr = err
	}
	c.tmplName = name
	return name, err
}

// ensureTemplate returns the name of the template for the current
// migrations, building it if needed. Builds run under a session advisory
// lock, under a temporary name renamed when migrated (so a template with the
// final name is complete), and the template is then closed to connections
// so nothing blocks CREATE DATABASE ... TEMPLATE.
func (c *Cluster) ensureTemplate(ctx context.Context) (name string, err error) {
	name, err = templateName()
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, c.adminURL)
	if err != nil {
		return "", fmt.Errorf("pgtest: connecting to build template: %w", err)
	}
	// Closing the session releases the advisory lock.
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
	// Publish the coordinator's copy last, after its sessions to the
	// workers are gone.
	err = publishTemplate(ctx, conn, build, name)
	if code := dberr.Code(err); code == "42P04" || code == "23505" {
		// Another process built it concurrently without our lock (advisory
		// locks are per database). Use theirs; a racing rename reports 23505
		// rather than 42P04.
		return name, nil
	}
	if err != nil {
		return "", err
	}
	keep = true
	return name, nil
}

// migrateTemplate creates build on every Citus worker, joins the nodes by
// their socket directories, migrates build and publishes the workers'
// copies as name.
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
		var urls []string
		var nodes []pgcluster.CitusNode
		for _, w := range c.workers {
			urls = append(urls, w.URL(build))
			nodes = append(nodes, w.Node())
		}
		if err := pgcluster.JoinCitus(ctx, c.local.URL(build), c.local.Node(), urls, nodes); err != nil {
			return fmt.Errorf("pgtest: making %s a Citus cluster: %w", build, err)
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

// publishTemplate disconnects build's sessions, closes it to connections
// and renames it to name.
func publishTemplate(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, build, name string) error {
	if _, err := db.Exec(ctx, "ALTER DATABASE "+quoteIdent(build)+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("pgtest: closing template %s to connections: %w", build, err)
	}
	err := retryInUse(ctx, createRetries, func() error {
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

// templateName derives the template's name from the migration files, so
// any change yields a new template.
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

// role is a throwaway server's role: standalone, or a Citus node.
type role int

const (
	roleSingle role = iota
	roleCoordinator
	roleWorker
)

// startLocal starts a throwaway cluster in a new temporary directory and
// waits until it accepts connections. On error nothing is left.
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
			// SIGKILL: the server dies with the test binary, even a SIGKILLed
			// one; a later run sweeps its directory.
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
	// Durability off for tests, on for benchmarks.
	durability := "off"
	if opts.Durable {
		durability = "on"
	}
	m := map[string]string{"fsync": durability, "synchronous_commit": durability, "full_page_writes": durability,
		"max_connections": "300", "shared_buffers": "128MB"}
	var citus []string
	switch r {
	case roleCoordinator:
		citus = pgcluster.CitusSettings(300)
		if opts.ShardCount > 0 {
			m["citus.shard_count"] = strconv.Itoa(opts.ShardCount)
		}
	case roleWorker:
		// A worker serves every test database's coordinator connections:
		// more connections, less memory.
		m["shared_buffers"] = "64MB"
		citus = pgcluster.CitusSettings(500)
	}
	for _, s := range citus {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return m
}

// stop shuts the server down (SIGKILL after stopTimeout) and removes its
// directory.
func (s *localServer) stop() error {
	_ = s.Stop() // killed after stopTimeout
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("pgtest: removing %s: %w", s.dir, err)
	}
	return nil
}

// findBinaries is [pgcluster.FindBinaries] with a hint about
// EnvDatabaseURL.
func findBinaries() (pgcluster.Binaries, error) {
	b, err := pgcluster.FindBinaries(os.Getenv(EnvPGBin))
	if err != nil {
		return b, fmt.Errorf("pgtest: %w; or set %s to the URL of a server to use", err, EnvDatabaseURL)
	}
	return b, nil
}

// sweepStaleDirs removes directories of throwaway clusters whose owner and
// postmaster are gone. Errors are ignored.
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

// withDatabase returns connString, URL or keyword/value, with its database
// replaced by db.
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

// retryInUse runs f until it succeeds, fails with anything but 55006
// (object in use), has failed tries times (0: until ctx ends) or ctx ends,
// backing off up to a second. It returns f's last error.
func retryInUse(ctx context.Context, tries int, f func() error) error {
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || dberr.Code(err) != "55006" || attempt == tries {
			return err
		}
		if !loop.Sleep(ctx, time.Duration(min(attempt, 20))*50*time.Millisecond) {
			return err
		}
	}
}

// openPool opens and checks a pool of at most maxConns connections, with
// tracer if not nil.
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
