package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// Process is a child forked from a goroutine locked to its OS thread for
// the child's life. Pdeathsig fires when the forking thread exits, so
// locking the thread makes it fire when this process dies, and never
// because the runtime retired a thread.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the child has been waited for
	err  error         // cmd.Wait's result, set before done closes
}

// StartProcess starts cmd with attr, appending its output to logPath
// (created 0600), or to cmd.Stdout and cmd.Stderr when logPath is empty.
func StartProcess(cmd *exec.Cmd, logPath string, attr *syscall.SysProcAttr) (*Process, error) {
	if logPath != "" {
		logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("opening log: %w", err)
		}
		defer logFile.Close() // the child has its own descriptor
		cmd.Stdout, cmd.Stderr = logFile, logFile
	}
	cmd.SysProcAttr = attr
	p := &Process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // deliberately never unlocked; see Process
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

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig (SIGSTOP, SIGCONT, ...) unless the process has exited.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return errors.New("process has exited")
	}
	return p.cmd.Process.Signal(sig)
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// KillGroup sends SIGKILL to the process group (started with Setpgid) and
// waits for the process to be gone.
func (p *Process) KillGroup() error {
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return err
	}
	<-p.done
	return nil
}

// Await calls try every 50 ms (each call bounded by 2 s) until it
// succeeds or timeout passes. It returns an error saying the process
// "exited before it was ready", or "not ready after" timeout with try's
// last error.
func (p *Process) Await(ctx context.Context, timeout time.Duration, try func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		err := try(attempt)
		cancelAttempt()
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited before it was ready (%v)", p.err)
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w (last error: %v)", timeout, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop sends sig and waits up to timeout, then kills the process and
// returns an error.
func (p *Process) Stop(sig syscall.Signal, timeout time.Duration) error {
	_ = p.cmd.Process.Signal(sig)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		p.Kill()
		return fmt.Errorf("pid %d did not exit within %s of %s and was killed", p.Pid(), timeout, sig)
	}
}
