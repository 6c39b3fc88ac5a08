// Package searchdproc runs a searchd binary's `serve` as a child process on
// loopback, for browser tests. The child dies with this process
// ([pgcluster.StartProcess]) and sees only PATH, HOME and the given
// settings, so the shell's environment cannot change what is tested.
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

// readyWithin bounds the wait for /readyz.
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

// Start starts serve and returns once /readyz answers 200. It returns an
// error, after stopping the process, if the binary cannot start, exits, or
// is not ready within a minute or before ctx ends.
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

// Ready returns a [pgcluster.Process.Await] check that base answers
// /readyz with 200.
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

// Stop sends SIGTERM and waits; after 30 seconds it kills the process and
// returns an error.
func (s *Server) Stop() error {
	return s.proc.Stop(syscall.SIGTERM, 30*time.Second)
}

// FreeAddr returns a loopback address whose port was just free.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
