// Package pgcluster runs a local PostgreSQL server from the installed
// binaries, for `searchd dev` and test harnesses.
//
// A cluster's directory outlives the process: initdb runs on first start
// only. The server listens on a unix socket only, trusts the superuser
// postgres there (the socket directory is private), and runs in its own
// process group so Ctrl-C reaches the parent, which stops the server last.
// When the parent is root, the server runs as postgres (or nobody).
package pgcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// DefaultStartTimeout bounds how long Start waits for the server.
	DefaultStartTimeout = 60 * time.Second
	// DefaultStopTimeout bounds a fast shutdown before Stop kills the server.
	DefaultStopTimeout = 30 * time.Second
	// socketPort only names the socket file; no TCP port is opened.
	socketPort = 5432
	// maxSocketPath is Linux's socket path limit less PostgreSQL's ".lock".
	maxSocketPath = 107 - len(".lock")
)

// Config configures [Start].
type Config struct {
	// Dir holds the cluster: the data directory Dir/data, the server log
	// Dir/postgres.log and, when the path is short enough, the socket. It is
	// created when missing. Required.
	Dir string
	// Binaries are the programs to run. The zero value looks them up with
	// [FindBinaries] and the environment variable [EnvPGBin].
	Binaries Binaries
	// Settings are extra server settings, passed as -c name=value.
	Settings map[string]string
	// StartTimeout defaults to [DefaultStartTimeout].
	StartTimeout time.Duration
	// StopTimeout defaults to [DefaultStopTimeout].
	StopTimeout time.Duration
	// InitArgs are more initdb arguments, such as --no-sync.
	InitArgs []string
	// Pdeathsig is [ServerConfig.Pdeathsig]; the default here is SIGINT,
	// which stops the server cleanly if this process dies without
	// stopping it.
	Pdeathsig syscall.Signal
}

// Cluster is a running local server. Stop it with [Cluster.Stop].
type Cluster struct {
	dir       string
	socketDir string
	tmpSocket bool // socketDir is a temporary directory Stop removes
	logPath   string
	stopAfter time.Duration
	proc      *Process
	// Initialized reports whether Start ran initdb.
	Initialized bool
}

// Start starts the cluster in cfg.Dir, running initdb first if needed, and
// waits until it accepts connections. It returns an error wrapping
// [ErrNoBinaries] when programs are missing, or a descriptive error (with
// the log's tail when the server does not come up). On error nothing is
// left running.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if cfg.Dir == "" {
		return nil, errors.New("pgcluster: Config.Dir is required")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	bins := cfg.Binaries
	if bins == (Binaries{}) {
		if bins, err = FindBinaries(os.Getenv(EnvPGBin)); err != nil {
			return nil, err
		}
	}
	cred, err := ServerCredential()
	if err != nil {
		return nil, err
	}
	if err := prepareDir(dir, cred); err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "data")
	if pid, ok := ReadPID(filepath.Join(dataDir, "postmaster.pid")); ok && Alive(pid) {
		return nil, fmt.Errorf("pgcluster: a PostgreSQL server (pid %d) already runs on %s; stop it (or the other `searchd dev`) first", pid, dataDir)
	}

	c := &Cluster{
		dir:       dir,
		logPath:   filepath.Join(dir, "postgres.log"),
		stopAfter: cmp.Or(cfg.StopTimeout, DefaultStopTimeout),
	}
	if err := c.initIfNew(ctx, bins.Initdb, dataDir, cred, cfg.InitArgs); err != nil {
		return nil, err
	}
	if err := c.makeSocketDir(cred); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && c.tmpSocket {
			_ = os.RemoveAll(c.socketDir)
		}
	}()
	// Setpgid keeps a terminal's SIGINT from reaching the server before
	// the parent has drained its requests.
	c.proc, err = StartServer(ctx, ServerConfig{
		Postgres: bins.Postgres, DataDir: dataDir, Dir: dir, SocketDir: c.socketDir, Port: socketPort,
		Settings: settingArgs(cfg.Settings), LogPath: c.logPath, Credential: cred,
		Pdeathsig: cmp.Or(cfg.Pdeathsig, syscall.SIGINT), Setpgid: true, StartTimeout: cfg.StartTimeout,
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// prepareDir creates dir and, when the server runs as cred, hands it over
// and checks cred can reach it.
func prepareDir(dir string, cred *syscall.Credential) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pgcluster: creating %s: %w", dir, err)
	}
	if cred == nil {
		return nil
	}
	if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
		return fmt.Errorf("pgcluster: giving %s to the server's user: %w", dir, err)
	}
	return checkReachable(dir, cred)
}

// initIfNew runs initdb on dataDir if it has no cluster, setting
// c.Initialized; a failed initdb leaves no data directory.
func (c *Cluster) initIfNew(ctx context.Context, initdb, dataDir string, cred *syscall.Credential, args []string) error {
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	err := InitDB(ctx, InitConfig{Initdb: initdb, DataDir: dataDir, Dir: c.dir,
		LogPath: filepath.Join(c.dir, "initdb.log"), Credential: cred, Args: append([]string{"--no-instructions"}, args...)})
	if err != nil {
		_ = os.RemoveAll(dataDir) // a half-made data directory would fail every later start
		return err
	}
	c.Initialized = true
	return nil
}

// makeSocketDir uses the cluster directory for the socket, or a temporary
// one (c.tmpSocket) when that path would be too long.
func (c *Cluster) makeSocketDir(cred *syscall.Credential) (err error) {
	c.socketDir = c.dir
	if len(filepath.Join(c.dir, ".s.PGSQL."+strconv.Itoa(socketPort))) <= maxSocketPath {
		return nil
	}
	if c.socketDir, err = os.MkdirTemp("/tmp", "searchd-pg-"); err != nil {
		return fmt.Errorf("pgcluster: socket directory: %w", err)
	}
	c.tmpSocket = true
	if cred != nil {
		if err := os.Chown(c.socketDir, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(c.socketDir)
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	return nil
}

// settingArgs returns the settings as name=value, sorted by name.
func settingArgs(settings map[string]string) []string {
	var args []string
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		args = append(args, k+"="+settings[k])
	}
	return args
}

// LogPath returns the path of the server log.
func (c *Cluster) LogPath() string { return c.logPath }

// URL returns the URL of database as postgres over the unix socket.
func (c *Cluster) URL(database string) string { return SocketURL(c.socketDir, socketPort, database) }

// Node is how other Citus nodes reach the server: its socket directory.
func (c *Cluster) Node() CitusNode { return CitusNode{Host: c.socketDir, Port: socketPort} }

// CreateDatabase creates database name unless it exists and reports
// whether it did.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) (bool, error) {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return false, fmt.Errorf("pgcluster: connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return false, fmt.Errorf("pgcluster: looking up database %s: %w", name, err)
	}
	if exists {
		return false, nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return false, fmt.Errorf("pgcluster: creating database %s: %w", name, err)
	}
	return true, nil
}

// Stop shuts the server down (SIGINT, then SIGKILL after the stop
// timeout), keeping the data directory. Calling it again does nothing.
func (c *Cluster) Stop() error {
	if c.proc == nil {
		return nil
	}
	defer func() {
		c.proc = nil
		if c.tmpSocket {
			_ = os.RemoveAll(c.socketDir)
		}
	}()
	if err := c.proc.Stop(syscall.SIGINT, c.stopAfter); err != nil {
		return fmt.Errorf("pgcluster: server did not stop within %s and was killed", c.stopAfter)
	}
	return nil
}

// ChildEnv is this process's environment without libpq and locale
// variables, which could redirect the programs or change collation.
func ChildEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || strings.HasPrefix(k, "LC_") || k == "LANG" || k == "LANGUAGE" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// ServerCredential returns the user to run the server as: nil unless we
// are root, else postgres or nobody.
func ServerCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil && uid != 0 {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
		}
	}
	return nil, errors.New("pgcluster: running as root, and neither user postgres nor nobody exists to run PostgreSQL as (PostgreSQL refuses root)")
}

// checkReachable reports an error when cred cannot traverse dir's parents,
// which initdb would report obscurely.
func checkReachable(dir string, cred *syscall.Credential) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode().Perm()
		switch {
		case !ok,
			mode&0o001 != 0,
			st.Uid == cred.Uid && mode&0o100 != 0,
			st.Gid == cred.Gid && mode&0o010 != 0:
		default:
			return fmt.Errorf("pgcluster: PostgreSQL runs as uid %d, which cannot enter %s; "+
				"allow it (chmod o+x %s) or choose a cluster directory elsewhere", cred.Uid, p, p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// ReadPID parses the first line of the file at path as a pid.
func ReadPID(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	return pid, err == nil && pid > 0
}

// Alive reports whether a process pid exists, whoever owns it.
func Alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
