package pgcluster

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// The one launcher of PostgreSQL processes: [InitDB] and [StartServer]
// serve [Start], internal/testkit/pgtest and the fault suite (test/e2e).

// InitConfig configures [InitDB].
type InitConfig struct {
	// Initdb is the path of the initdb program. Required.
	Initdb string
	// DataDir is the data directory to create. Required.
	DataDir string
	// Dir is the working directory, owned by the server's user. Required.
	Dir string
	// LogPath receives initdb's output. Required.
	LogPath string
	// Credential runs initdb as another user ([ServerCredential]); nil
	// runs it as ourselves.
	Credential *syscall.Credential
	// Args are more initdb arguments, such as --no-sync.
	Args []string
}

// InitDB runs initdb into cfg.DataDir (superuser postgres, trust, UTF8, C
// locale). It returns an error with the log's tail on failure, or ctx's
// error after killing initdb.
func InitDB(ctx context.Context, cfg InitConfig) error {
	args := append([]string{"-D", cfg.DataDir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C"}, cfg.Args...)
	cmd := exec.Command(cfg.Initdb, args...)
	cmd.Dir = cfg.Dir
	cmd.Env = ChildEnv()
	p, err := StartProcess(cmd, cfg.LogPath, &syscall.SysProcAttr{Credential: cfg.Credential, Setpgid: true, Pdeathsig: syscall.SIGKILL})
	if err == nil {
		select {
		case <-p.done:
			err = p.err
		case <-ctx.Done():
			p.Kill()
			err = ctx.Err()
		}
	}
	if err != nil {
		return fmt.Errorf("pgcluster: %s failed: %w\n%s", cfg.Initdb, err, LogTail(cfg.LogPath))
	}
	return nil
}

// ServerConfig configures [StartServer].
type ServerConfig struct {
	// Postgres is the path of the postgres program. Required.
	Postgres string
	// DataDir is an initialised data directory. Required.
	DataDir string
	// Dir is the server's working directory. Required.
	Dir string
	// SocketDir holds the unix socket .s.PGSQL.<Port>. Required.
	SocketDir string
	// Port is the TCP port, and names the socket file. Required.
	Port int
	// ListenAddresses is listen_addresses: empty (the default) for the
	// unix socket only, "127.0.0.1" for loopback TCP as well.
	ListenAddresses string
	// Settings are more server settings as "name=value", passed in order
	// as -c name=value, so a later one overrides an earlier one.
	Settings []string
	// LogPath receives the server's output. Required.
	LogPath string
	// Credential runs the server as another user ([ServerCredential]).
	Credential *syscall.Credential
	// Pdeathsig is the signal the server receives should this process die
	// without stopping it: SIGINT (fast shutdown), SIGQUIT (immediate) or
	// SIGKILL. The default is SIGKILL.
	Pdeathsig syscall.Signal
	// Setpgid starts the server in a process group of its own: a
	// terminal's Ctrl-C then reaches the parent alone, and
	// [Process.KillGroup] takes the postmaster and its backends at once.
	Setpgid bool
	// StartTimeout bounds the wait for the first connection; the default
	// is [DefaultStartTimeout].
	StartTimeout time.Duration
}

// StartServer starts postgres and waits until it accepts a connection on
// the unix socket; stop the returned postmaster with [Process.Stop]. On
// failure nothing is left running and the error carries the log's tail.
func StartServer(ctx context.Context, cfg ServerConfig) (*Process, error) {
	args := []string{"-D", cfg.DataDir, "-k", cfg.SocketDir, "-p", strconv.Itoa(cfg.Port),
		"-c", "listen_addresses=" + cfg.ListenAddresses}
	for _, s := range cfg.Settings {
		args = append(args, "-c", s)
	}
	cmd := exec.Command(cfg.Postgres, args...)
	cmd.Dir = cfg.Dir
	cmd.Env = ChildEnv()
	attr := &syscall.SysProcAttr{Credential: cfg.Credential, Setpgid: cfg.Setpgid,
		Pdeathsig: cmp.Or(cfg.Pdeathsig, syscall.SIGKILL)}
	p, err := StartProcess(cmd, cfg.LogPath, attr)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: starting %s: %w", cfg.Postgres, err)
	}
	err = p.Await(ctx, cmp.Or(cfg.StartTimeout, DefaultStartTimeout), func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, SocketURL(cfg.SocketDir, cfg.Port, "postgres"))
		if err == nil {
			err = conn.Close(ctx)
		}
		return err
	})
	if err != nil {
		p.Kill()
		return nil, fmt.Errorf("pgcluster: postgres %w\n%s", err, LogTail(cfg.LogPath))
	}
	return p, nil
}

// SocketURL returns the URL of database as postgres over the unix socket
// in socketDir named by port.
func SocketURL(socketDir string, port int, database string) string {
	return (&url.URL{
		Scheme: "postgres",
		User:   url.User("postgres"),
		Path:   "/" + database,
		RawQuery: url.Values{
			"host":    {socketDir},
			"port":    {strconv.Itoa(port)},
			"sslmode": {"disable"},
		}.Encode(),
	}).String()
}

// LogTail returns the last 4 KiB of the log at path, from a line start.
func LogTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log at %s: %v)", path, err)
	}
	const n = 4 << 10
	if len(b) > n {
		b = b[len(b)-n:]
		if i := strings.IndexByte(string(b), '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return "--- " + path + " (end) ---\n" + strings.TrimRight(string(b), "\n")
}
