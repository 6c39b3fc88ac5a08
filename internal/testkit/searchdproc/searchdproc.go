// Package searchdproc runs a built searchd binary's `serve` as a child
// process on loopback, for the tests that drive it from outside: the
// browser test (test/browser) and the console's browser tests' fixture
// (test/console/fixture). The child is forked by [pgcluster.StartProcess],
// so it dies with this process however that ends, and its environment is
// PATH, HOME and the settings it is given, nothing else of this process's:
// a SEARCHD_ or PG variable of the shell cannot change what is tested.
package searchdproc

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/searchd/searchd/internal/pgcluster"
)

// readyWithin bounds the wait for /readyz: a migrated database answers in
// well under a second; a busy machine gets slack.
const readyWithin = time.Minute

// Config says how to run serve.
type Config struct {
	// Bin is the searchd binary.
	Bin string
	// Addr is the host:port to listen on (SEARCHD_ADDR); empty picks a
	// free loopback port ([FreeAddr]).
	Addr string
	// Env holds the settings, KEY=value (DATABASE_URL,
	// SEARCHD_JWT_SECRET, ...).
	Env []string
	// Out receives the server's standard output and error; nil discards
	// them.
	Out io.Writer
}

// Server is a running searchd serve.
type Server struct {
	// Base is its base URL, http://host:port.
	Base string
	proc *pgcluster.Process
}

// Start starts serve as cfg says and returns once its /readyz answers 200
// (the database answers and its schema is current). It returns an error
// when the binary cannot be started, when it exits first, or when it is
// not ready within a minute or before ctx ends; the process is then
// stopped.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	addr := cfg.Addr
	if addr == "" {
		var err error
		if addr, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(cfg.Bin, "serve")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "SEARCHD_ADDR=" + addr}, cfg.Env...)
	cmd.Stdout, cmd.Stderr = cfg.Out, cfg.Out
	proc, err := pgcluster.StartProcess(cmd, "", &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL})
	if err != nil {
		return nil, fmt.Errorf("starting searchd serve: %w", err)
	}
	s := &Server{Base: "http://" + addr, proc: proc}
	if err := proc.Await(ctx, readyWithin, Ready(s.Base)); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("searchd serve %w", err)
	}
	return s, nil
}

// Ready returns a check, for [pgcluster.Process.Await], that the searchd
// at base answers /readyz with 200.
func Ready(base string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if err != nil {
			return err
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz answered %d", res.StatusCode)
		}
		return nil
	}
}

// Stop sends SIGTERM, as an operator's shutdown does, and waits for the
// process to exit; after 30 seconds it kills it and returns an error
// saying so.
func (s *Server) Stop() error {
	return s.proc.Stop(syscall.SIGTERM, 30*time.Second)
}

// FreeAddr returns a loopback address whose port was free a moment ago,
// for a server to listen on.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
