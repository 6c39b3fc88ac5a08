package goclient_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/internal/pgcluster"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/searchdproc"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testSecret signs the tokens of every searchd the tests start.
const testSecret = "client-test-secret-client-test-secret-0123"

// testProvider is the one provider every searchd the tests start holds a
// callback secret for, testProviderSecret (used as its raw bytes).
const (
	testProvider       = "acme"
	testProviderSecret = "client-test-provider-secret"
)

// setupTimeout bounds building the binary and starting a server.
const setupTimeout = 3 * time.Minute

// withinAMinute is the context of a test against a real searchd: it ends
// after a minute, or with the test.
func withinAMinute(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// buildSearchd builds ./cmd/searchd into dir and returns the binary's path.
func buildSearchd(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "searchd")
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, "github.com/searchd/searchd/cmd/searchd").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/searchd: %v\n%s", err, out)
	}
	return bin
}

// searchd is a `searchd serve` process on a loopback port and its own
// migrated database. It can be killed and started again on the same port.
type searchd struct {
	t     *testing.T
	bin   string
	dbURL string
	addr  string
	db    *pgxpool.Pool
	org   uuid.UUID
	token string
	log   pgtest.SyncBuffer // every incarnation's stderr
	// env is added to the process's environment.
	env []string

	mu   sync.Mutex
	proc *pgcluster.Process
}

// startSearchd starts searchd from bin on a fresh database and returns it
// once /readyz answers. It is killed at cleanup, before its database is
// dropped, and its log is printed when the test failed.
func startSearchd(t *testing.T, bin string, env ...string) *searchd {
	t.Helper()
	dbURL := pgtest.NewDBURL(t)
	db, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatalf("opening the test database: %v", err)
	}
	t.Cleanup(db.Close)
	addr, err := searchdproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	s := &searchd{t: t, bin: bin, dbURL: dbURL, addr: addr, db: db, org: uuid.New(), env: env}
	s.token, err = auth.SignToken([]byte(testSecret), s.org, "client-test", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("searchd log:\n%s", s.log.String())
		}
	})
	s.start()
	return s
}

// url is the base URL of the server.
func (s *searchd) url() string { return "http://" + s.addr }

// start starts the process and waits until /readyz answers 200.
func (s *searchd) start() {
	s.t.Helper()
	cmd := exec.Command(s.bin, "serve")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"DATABASE_URL=" + s.dbURL,
		"SEARCHD_ADDR=" + s.addr,
		"SEARCHD_JWT_SECRET=" + testSecret,
		"SEARCHD_LOG_FORMAT=text",
		"SEARCHD_PROVIDER_SECRETS=" + testProvider + "=" + testProviderSecret,
	}
	cmd.Env = append(cmd.Env, s.env...)
	cmd.Stdout, cmd.Stderr = &s.log, &s.log
	// The server dies with the test binary, however that ends: pgcluster
	// forks it from a thread locked for the child's whole life, which the
	// parent-death signal follows.
	p, err := pgcluster.StartProcess(cmd, "", &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL})
	if err != nil {
		s.t.Fatalf("starting searchd: %v", err)
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()

	if err := p.Await(context.Background(), setupTimeout, searchdproc.Ready(s.url())); err != nil {
		s.t.Fatalf("searchd %v:\n%s", err, s.log.String())
	}
}

// kill sends SIGKILL, the crash no code of the server sees coming, and
// waits for the process to be gone.
func (s *searchd) kill() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// count runs a count(*) query on the server's database.
func (s *searchd) count(query string, args ...any) int {
	s.t.Helper()
	return pgtest.Count(s.t, s.db, query, args...)
}

// waitForBlockedInsert waits until a session of the server waits for a
// lock to insert into table: the request is then in the middle of its
// work, everything before that insert done.
func (s *searchd) waitForBlockedInsert(table string) {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.count(`SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE NOT l.granted AND l.relation = $1::regclass
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND a.query LIKE '%INSERT INTO ' || $1 || '%'`, table) == 0 {
		if time.Now().After(deadline) {
			s.t.Fatalf("no session waited to insert into %s within 30s", table)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recorder is an http.RoundTripper that notes how every attempt ended: the
// status of an answer, or "error" for none.
type recorder struct {
	mu       sync.Mutex
	outcomes []string
	next     http.RoundTripper
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := r.next.RoundTrip(req)
	outcome := "error"
	if err == nil {
		outcome = fmt.Sprint(res.StatusCode)
		if ra := res.Header.Get("Retry-After"); ra != "" {
			outcome += " Retry-After " + ra
		}
	}
	r.mu.Lock()
	r.outcomes = append(r.outcomes, outcome)
	r.mu.Unlock()
	return res, err
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.outcomes...)
}

// dropProxy forwards TCP connections to a server. Armed, it drops the next
// answer: it waits for the answer's first bytes, which searchd writes only
// once its work is committed, then resets the client's connection without
// passing them on. The server did the work; the client never learns it.
type dropProxy struct {
	ln      net.Listener
	target  string
	armed   atomic.Bool
	dropped chan struct{}

	mu    sync.Mutex
	conns []net.Conn
}

func newDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, target: target, dropped: make(chan struct{}, 1)}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *dropProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *dropProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *dropProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *dropProxy) forward(client net.Conn) {
	p.track(client)
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.track(server)
	go func() {
		_, _ = io.Copy(server, client)
		server.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && p.armed.CompareAndSwap(true, false) {
			_ = client.(*net.TCPConn).SetLinger(0) // a reset, not a clean close
			client.Close()
			server.Close()
			p.dropped <- struct{}{}
			return
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			client.Close()
			server.Close()
			return
		}
	}
}

func (p *dropProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}
