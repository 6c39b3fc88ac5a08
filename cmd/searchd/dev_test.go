package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/testkit/pgtest"
)

func TestDevWithoutPostgreSQLSaysHowToInstallIt(t *testing.T) {
	t.Parallel()
	devDir := filepath.Join(t.TempDir(), ".searchd-dev")
	h := newHarness(map[string]string{
		"SEARCHD_PG_BIN":  filepath.Join(t.TempDir(), "no-such-dir"),
		"SEARCHD_DEV_DIR": devDir,
	})
	if code := h.run("dev"); code != 1 {
		t.Fatalf("dev without binaries = %d, want 1", code)
	}
	stderr := h.stderr.String()
	if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "apt-get install postgresql") ||
		strings.Contains(stderr, "goroutine") {
		t.Errorf("dev without binaries said %q, want one line that says to apt-get install postgresql", stderr)
	}
	if _, err := os.Stat(devDir); err == nil {
		t.Errorf("dev without binaries created %s", devDir)
	}
}

// devRun is what one `searchd dev` printed.
type devRun struct {
	savedSearch string
	curl        string
	stdout      string
}

// runDev runs `searchd dev` in dir until it serves, runs check against it,
// then stops it as a SIGINT would.
func runDev(t *testing.T, dir string, check func(addr string, out devRun)) devRun {
	t.Helper()
	h := newHarness(map[string]string{
		"SEARCHD_DEV_DIR": dir,
		"SEARCHD_ADDR":    "127.0.0.1:0",
	})
	addr, stop := h.start(t, "dev")
	out := devRun{stdout: h.stdout.String()}
	if m := regexp.MustCompile(`saved search  (\S+)`).FindStringSubmatch(out.stdout); m != nil {
		out.savedSearch = m[1]
	}
	if m := regexp.MustCompile(`(?s)curl .*?'\{"max_results": 10\}'`).FindString(out.stdout); m != "" {
		out.curl = m
	}
	check(addr, out)
	if code := stop(); code != 0 {
		t.Errorf("dev exited %d after the signal: %s", code, h.stderr.String())
	}
	return out
}

// curlRequest turns the printed curl command into the request it sends.
func curlRequest(t *testing.T, curl string) *http.Request {
	t.Helper()
	target := regexp.MustCompile(`-X POST '([^']+)'`).FindStringSubmatch(curl)
	if target == nil {
		t.Fatalf("no URL in %q", curl)
	}
	hr, err := http.NewRequest(http.MethodPost, target[1], strings.NewReader(`{"max_results": 10}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`-H '([^:]+): ([^']+)'`).FindAllStringSubmatch(curl, -1) {
		hr.Header.Set(m[1], m[2])
	}
	if !strings.Contains(curl, `-H "Idempotency-Key: $(date +%s%N)"`) {
		t.Errorf("the curl command names no fresh Idempotency-Key: %q", curl)
	}
	hr.Header.Set("Idempotency-Key", "dev-test")
	return hr
}

func TestDevRunsEverythingAndKeepsItsData(t *testing.T) {
	t.Parallel()
	// The server may run as another user, who must reach the directory.
	parent, err := os.MkdirTemp("", "searchd-dev-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, ".searchd-dev")

	first := runDev(t, dir, func(addr string, out devRun) {
		for _, want := range []string{"initialized and started", "applied version 1, 2", "WARNING", "development", "token ", "DATABASE_URL='postgres"} {
			if !strings.Contains(out.stdout, want) {
				t.Errorf("dev printed\n%s\nwithout %q", out.stdout, want)
			}
		}
		res, err := http.DefaultClient.Do(curlRequest(t, out.curl))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusCreated || !strings.Contains(string(body), out.savedSearch) {
			t.Errorf("the printed curl command answered %d %s, want 201 naming the demo saved search", res.StatusCode, body)
		}
		// The printed callback example, pasted into a shell as it is,
		// is a delivery the server accepts: signed with the demo secret.
		if got := runCallbackExample(t, out.stdout); got != `{"status":"accepted"}` {
			t.Errorf("the printed callback example answered %q, want accepted", got)
		}
		// The printed DATABASE_URL is the database dev serves from: the
		// CLI given it reads the demo saved search.
		if m := regexp.MustCompile(`DATABASE_URL='([^']+)'`).FindStringSubmatch(out.stdout); m == nil {
			t.Errorf("dev printed no DATABASE_URL:\n%s", out.stdout)
		} else if conn, err := pgx.Connect(context.Background(), m[1]); err != nil {
			t.Errorf("the printed DATABASE_URL %q: %v", m[1], err)
		} else {
			var n int
			err := conn.QueryRow(context.Background(), "SELECT count(*) FROM agent.saved_searches WHERE id = $1", out.savedSearch).Scan(&n)
			conn.Close(context.Background())
			if err != nil || n != 1 {
				t.Errorf("the printed DATABASE_URL's database holds %d demo saved searches (%v), want 1", n, err)
			}
		}
		if !strings.Contains(out.stdout, "bin/searchd token --org") || !strings.Contains(out.stdout, "make build") {
			t.Errorf("dev printed\n%s\nwithout the bin/searchd token hint", out.stdout)
		}
	})
	if _, err := os.Stat(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
		t.Error("PostgreSQL still runs after dev stopped")
	}

	// The second run reuses the cluster, the demo data and the secret.
	second := runDev(t, dir, func(addr string, out devRun) {
		if strings.Contains(out.stdout, "initialized") || !strings.Contains(out.stdout, "nothing applied") {
			t.Errorf("second dev run printed\n%s\nwant the kept cluster, nothing migrated", out.stdout)
		}
		res, err := http.DefaultClient.Do(curlRequest(t, out.curl))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("the same start on the second run = %d, want 200 replayed from the kept database", res.StatusCode)
		}
	})
	if first.savedSearch == "" || second.savedSearch != first.savedSearch {
		t.Errorf("demo saved search %q then %q, want one, reused", first.savedSearch, second.savedSearch)
	}
}

// runCallbackExample runs the callback example dev printed with bash, as a
// user pasting it would, and returns what curl printed.
func runCallbackExample(t *testing.T, stdout string) string {
	t.Helper()
	snippet := regexp.MustCompile(`(?s)body='\{.*?-d "\$body"`).FindString(stdout)
	if snippet == "" {
		t.Fatalf("dev printed no callback example:\n%s", stdout)
	}
	out, err := exec.Command("bash", "-c", snippet).CombinedOutput()
	if err != nil {
		t.Fatalf("the callback example failed: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestDevExitsWhenItsParentDies starts `searchd dev` from a shell in the
// background, as `go run ./cmd/searchd dev &` does, and kills the shell
// with SIGKILL: dev notices it was re-parented and stops, leaving no
// server behind.
func TestDevExitsWhenItsParentDies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "searchd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logPath := filepath.Join(dir, "dev.log")
	shell := exec.Command("sh", "-c", `"$0" dev >"$1" 2>&1 & echo $!; sleep 600`, bin, logPath)
	shell.Env = append(os.Environ(), "DATABASE_URL="+pgtest.NewDBURL(t), "SEARCHD_ADDR="+addr,
		"SEARCHD_DEV_DIR="+filepath.Join(dir, ".searchd-dev"))
	stdout, err := shell.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := shell.Start(); err != nil {
		t.Fatal(err)
	}
	var devPID int
	if _, err := fmt.Fscan(stdout, &devPID); err != nil {
		t.Fatalf("reading dev's pid: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(devPID, syscall.SIGKILL) })
	deadline := time.Now().Add(time.Minute)
	for {
		if res, err := http.Get("http://" + addr + "/healthz"); err == nil {
			res.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("dev did not serve:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = shell.Process.Kill()
	_ = shell.Wait()
	deadline = time.Now().Add(15 * time.Second)
	for alive(devPID) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("dev (pid %d) still runs 15 s after its parent was killed:\n%s", devPID, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if res, err := http.Get("http://" + addr + "/healthz"); err == nil {
		res.Body.Close()
		t.Errorf("a server still answers on %s after dev stopped", addr)
	}
	if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "the process that started dev exited") {
		t.Errorf("dev's log does not say why it stopped:\n%s", b)
	}
}

// alive reports whether pid is a process that has not exited: a zombie
// nobody reaped (re-parented to an init that does not reap) has.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}
