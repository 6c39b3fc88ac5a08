package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exit := make(chan int, 1)
	go func() { exit <- h.app.run(ctx, []string{"dev"}) }()
	var addr string
	select {
	case addr = <-h.addrs:
	case code := <-exit:
		t.Fatalf("dev exited %d: %s%s", code, h.stdout.String(), h.stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("dev did not start serving")
	}
	out := devRun{stdout: h.stdout.String()}
	if m := regexp.MustCompile(`saved search  (\S+)`).FindStringSubmatch(out.stdout); m != nil {
		out.savedSearch = m[1]
	}
	if m := regexp.MustCompile(`(?s)curl .*?'\{"max_results": 10\}'`).FindString(out.stdout); m != "" {
		out.curl = m
	}
	check(addr, out)
	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("dev exited %d after the signal: %s", code, h.stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("dev did not stop")
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
		for _, want := range []string{"initialized and started", "applied version 1, 2", "WARNING", "development", "token "} {
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
