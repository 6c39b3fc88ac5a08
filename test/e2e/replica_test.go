//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/searchd/searchd/internal/pgcluster"
	"github.com/searchd/searchd/internal/testkit/searchdproc"
)

// jwtSecret signs the tokens every replica accepts.
const jwtSecret = "e2e-fault-suite-secret-e2e-fault-suite-secret"

// providerSecret signs the callbacks of the suite's provider, acme.
const providerSecret = "e2e-provider-secret-acme"

// idleBound is the replicas' SEARCHD_DB_IDLE_IN_TRANSACTION_TIMEOUT: a
// replica stopped inside a transaction loses its session, and its locks,
// this long after its last statement.
const idleBound = 2 * time.Second

// buildSearchd builds ./cmd/searchd into dir, with the race detector when
// race is set, and returns the binary's path.
func buildSearchd(ctx context.Context, dir string, race bool) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "searchd")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	out, err := exec.CommandContext(ctx, goBin, append(args, "github.com/searchd/searchd/cmd/searchd")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/searchd: %w\n%s", err, out)
	}
	return bin, nil
}

// migrate runs `searchd migrate` against dbURL.
func migrate(ctx context.Context, bin, dbURL string) error {
	cmd := exec.CommandContext(ctx, bin, "migrate")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "DATABASE_URL=" + dbURL}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("searchd migrate: %w\n%s", err, out)
	}
	return nil
}

// replica is one `searchd serve` process on its own loopback port. It can
// be killed, stopped, continued and started again on the same port.
type replica struct {
	name    string // also its application_name in pg_stat_activity
	bin     string
	dbURL   string
	addr    string
	logPath string
	lease   time.Duration // SEARCHD_SAVED_SEARCH_LEASE
	// env is added to the process's environment, after the defaults.
	env []string

	mu   sync.Mutex
	proc *pgcluster.Process
}

// newReplica prepares a replica named name that reaches PostgreSQL at
// dbHostPort (the proxy), logging to a file in dir, whose saved-search
// preparations take lease. It does not start it.
func newReplica(name, bin, dbHostPort, dir string, lease time.Duration) (*replica, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// The application name tells the harness which replica a session
	// belongs to. No connect_timeout: searchd bounds a request's wait for
	// a connection itself (SEARCHD_DB_ANSWER_TIMEOUT) while its pool
	// connects in the background, and a connect timeout abandoned every
	// connection on a busy machine after the network faults, so that the
	// pools did not fill again for a minute.
	dbURL := fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&application_name=%s",
		dbHostPort, dbName, name)
	return &replica{
		name: name, bin: bin, dbURL: dbURL, lease: lease,
		addr:    "127.0.0.1:" + strconv.Itoa(port),
		logPath: filepath.Join(dir, name+".log"),
	}, nil
}

// Start starts the process and waits until /readyz answers 200.
func (r *replica) Start(ctx context.Context) error {
	cmd := exec.Command(r.bin, "serve")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"DATABASE_URL=" + r.dbURL,
		"SEARCHD_ADDR=" + r.addr,
		"SEARCHD_JWT_SECRET=" + jwtSecret,
		"SEARCHD_SHUTDOWN_GRACE=1s",
		"SEARCHD_SAVED_SEARCH_LEASE=" + r.lease.String(),
		// The provider inbox: a delivery's lease is the suite's lease, so
		// the applier takes over a stalled replica's within seconds.
		"SEARCHD_PROVIDER_SECRETS=acme=" + providerSecret,
		"SEARCHD_PROVIDER_WEBHOOK_LEASE=" + r.lease.String(),
		"SEARCHD_DB_IDLE_IN_TRANSACTION_TIMEOUT=" + idleBound.String(),
		"SEARCHD_LOG_FORMAT=text",
		// warn: the 503s with their cause and every 500, not the access log.
		"SEARCHD_LOG_LEVEL=warn",
	}
	cmd.Env = append(cmd.Env, r.env...)
	if v, ok := os.LookupEnv("GORACE"); ok {
		cmd.Env = append(cmd.Env, "GORACE="+v)
	}
	// The replica dies with the test binary, however that ends.
	p, err := pgcluster.StartProcess(cmd, r.logPath, &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL})
	if err != nil {
		return fmt.Errorf("starting %s: %w", r.name, err)
	}
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()

	if err := p.Await(ctx, setupTimeout, searchdproc.Ready(r.URL())); err != nil {
		return fmt.Errorf("%s %w:\n%s", r.name, err, tail(r.logPath))
	}
	return nil
}

// URL is the replica's base URL.
func (r *replica) URL() string { return "http://" + r.addr }

// Kill is kill -9: the crash no code of the server sees coming. It waits
// for the process to be gone.
func (r *replica) Kill() {
	r.mu.Lock()
	p := r.proc
	r.proc = nil
	r.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// Signal sends sig (SIGSTOP, SIGCONT) to the running process.
func (r *replica) Signal(sig syscall.Signal) error {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%s is not running", r.name)
	}
	return p.Signal(sig)
}

// Stop stops the process (SIGSTOP) and returns once the kernel says it is
// stopped. A signal takes effect when the process is next scheduled: on a
// busy machine a process sent SIGSTOP runs on for a while, long enough to
// finish what the harness meant to freeze it inside of, so a fault that
// goes on before the process has stopped tests nothing.
func (r *replica) Stop() error {
	if err := r.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	for deadline := time.Now().Add(stopTimeout); ; time.Sleep(time.Millisecond) {
		switch st := r.State(); {
		case st == "T":
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("%s was sent SIGSTOP and is still in state %q after %s", r.name, st, stopTimeout)
		}
	}
}

// stopTimeout bounds waiting for a process sent SIGSTOP to stop.
const stopTimeout = 30 * time.Second

// State returns the state letter of the process in /proc (R, S, T for
// stopped...), or "" when it is not running.
func (r *replica) State() string {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p == nil {
		return ""
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	if err != nil {
		return ""
	}
	// pid (comm) state ...: comm may hold spaces, so read after the last ')'.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(fields) == 0 {
		return ""
	}
	return fields[0]
}

// logLine returns the first line of the replica's log that holds every
// one of parts, "" when none does.
func (r *replica) logLine(parts ...string) string {
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return line
		}
	}
	return ""
}

// Exited reports whether the process was started and has exited on its
// own (not through Kill).
func (r *replica) Exited() bool {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p == nil {
		return false
	}
	return p.Exited()
}

// logProblems reads the replica's log. bad holds the lines no fault
// excuses: a panic, a data race report, a fatal runtime error, and the
// API's "internal error" (an answer of 500, which a client that gave up on
// its attempt never sees). other holds the rest of the lines at level
// ERROR, such as a background job's failure while the database is down.
func (r *replica) logProblems() (bad, other []string) {
	f, err := os.Open(r.logPath)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "panic:"), strings.Contains(line, "WARNING: DATA RACE"),
			strings.HasPrefix(line, "fatal error:"),
			strings.Contains(line, "level=ERROR") && strings.Contains(line, `msg="internal error"`):
			bad = append(bad, line)
		case strings.Contains(line, "level=ERROR"):
			other = append(other, line)
		}
	}
	return bad, other
}

// freePort returns a loopback TCP port nobody listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
