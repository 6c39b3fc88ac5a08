package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

// emptyDatabase creates a database with no schema at all and returns its
// URL; it is dropped at cleanup.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	admin := pgtest.Server(t)
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Skipf("the test server's URL %q is not a postgres:// URL", admin)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := "searchd_cmd_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
	})
	u.Path = "/" + name
	return u.String()
}

func TestMigrateThenServe(t *testing.T) {
	t.Parallel()
	dbURL := emptyDatabase(t)
	env := map[string]string{
		"DATABASE_URL":       dbURL,
		"SEARCHD_JWT_SECRET": goodSecret,
		"SEARCHD_ADDR":       "127.0.0.1:0",
	}

	// serve refuses a schema behind the newest migration, and says what to do.
	h := newHarness(env)
	if code := h.run("serve"); code != 1 {
		t.Fatalf("serve on an empty database = %d, want 1", code)
	}
	if stderr := h.stderr.String(); !strings.Contains(stderr, "refusing to start") ||
		!strings.Contains(stderr, "not at the newest migration") || !strings.Contains(stderr, "searchd migrate") {
		t.Errorf("serve on an empty database said %q", stderr)
	}

	h = newHarness(env)
	if code := h.run("migrate"); code != 0 {
		t.Fatalf("migrate = %d: %s", code, h.stderr.String())
	}
	if out := h.stdout.String(); !strings.Contains(out, "applied version 1, 2") {
		t.Errorf("migrate printed %q, want the versions applied", out)
	}
	h = newHarness(env)
	if code := h.run("migrate"); code != 0 || !strings.Contains(h.stdout.String(), "nothing applied") {
		t.Errorf("second migrate = %d %q, want 0 and nothing applied", code, h.stdout.String())
	}

	// Now serve starts, answers, and stops cleanly when told to.
	h = newHarness(env)
	addr, stop := h.start(t, "serve")
	wantReady(t, addr, "")
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d after the signal, want 0: %s", code, h.stderr.String())
	}
}

// serveOne serves h with serveHTTP and grace on a loopback port, sends it
// one request, and returns once h has it, with the listener's address:
// cancel stands for the signal, stopped receives what serveHTTP returns,
// and answered the body the client read ("error: ..." when it read none).
func serveOne(t *testing.T, h http.HandlerFunc, grace time.Duration) (addr string, cancel func(), stopped <-chan error, answered <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	served, read := make(chan error, 1), make(chan string, 1)
	go func() {
		served <- serveHTTP(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			h(w, r)
		}), grace, 0, slog.New(slog.DiscardHandler))
	}()
	go func() {
		res, err := http.Get("http://" + ln.Addr().String() + "/slow")
		if err != nil {
			read <- "error: " + err.Error()
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			read <- "error: " + err.Error()
			return
		}
		read <- string(b)
	}()
	<-entered
	return ln.Addr().String(), cancel, served, read
}

func TestServeHTTPDrainsRequestsInFlight(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	addr, cancel, stopped, answered := serveOne(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "finished")
	}, 10*time.Second)
	cancel() // the signal arrives while a request is in flight

	// New connections are refused while the request drains.
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("the listener still accepts connections after shutdown began")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-stopped:
		t.Fatalf("serveHTTP returned %v before the request in flight finished", err)
	default:
	}
	close(release)
	if a := <-answered; a != "finished" {
		t.Errorf("the request in flight got %q; want it finished", a)
	}
	if err := <-stopped; err != nil {
		t.Errorf("serveHTTP = %v, want nil after a clean drain", err)
	}
}

func TestServeHTTPCutsOffAfterTheGrace(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	_, cancel, stopped, _ := serveOne(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, 200*time.Millisecond)
	cancel()
	select {
	case err := <-stopped:
		if err == nil || !strings.Contains(err.Error(), "cut off") {
			t.Errorf("serveHTTP = %v, want the requests cut off after the grace", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serveHTTP did not give up after its grace")
	}
}

// TestServeStartsOnANewerSchema: a database a newer release migrated
// first (a goose version this binary does not embed) is served, ready,
// with a warning that the replica is behind; an older one is still
// refused (TestMigrateThenServe).
func TestServeStartsOnANewerSchema(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDBURL(t)
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(context.Background(), `INSERT INTO public.goose_db_version (version_id, is_applied)
		SELECT max(version_id) + 1, true FROM public.goose_db_version`)
	conn.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(map[string]string{
		"DATABASE_URL":       dbURL,
		"SEARCHD_JWT_SECRET": goodSecret,
		"SEARCHD_ADDR":       "127.0.0.1:0",
	})
	addr, stop := h.start(t, "serve")
	wantReady(t, addr, " on a newer schema")
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d after the signal, want 0: %s", code, h.stderr.String())
	}
	if n := strings.Count(h.stderr.String(), "schema is newer than this binary"); n != 1 {
		t.Errorf("serve on a newer schema logged the warning %d times, want once: %s", n, h.stderr.String())
	}
}

// wantReady fails t unless serve at addr answers /readyz with 200; where
// names the case in the message.
func wantReady(t *testing.T, addr, where string) {
	t.Helper()
	res, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("/readyz%s = %d, want 200", where, res.StatusCode)
	}
}

// TestServeBoundsTheRequestHeader: serve at its defaults answers a header
// over SEARCHD_MAX_HEADER_BYTES 431, however it is made up (one long
// field, or thousands of short fields of distinct names, the attack of
// issue 36 that took 1.1 GiB at Go's default of 1 MiB), and keeps serving;
// a header with a bearer token at auth's limit is read. The setting moves
// the bound.
func TestServeBoundsTheRequestHeader(t *testing.T) {
	t.Parallel()
	dbURL, _ := newDB(t)
	send := func(addr, fields string) int {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		// The server may answer and close before it has read it all.
		go func() { _, _ = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n"+fields+"\r\n") }()
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("reading the answer to a header of %d bytes: %v", len(fields), err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	many := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "X%x: v\r\n", i)
		}
		return b.String()
	}
	token := "Authorization: Bearer " + strings.Repeat("a", auth.MaxTokenLen) + "\r\n"
	for _, tc := range []struct {
		name   string
		env    string // SEARCHD_MAX_HEADER_BYTES, "" for the default
		fields string
		want   int
	}{
		{"a token at auth's limit", "", token, http.StatusOK},
		{"1 MiB of short fields", "", many(100_000), http.StatusRequestHeaderFieldsTooLarge},
		{"one field of 24 KiB", "", "X-Long: " + strings.Repeat("v", 24<<10) + "\r\n", http.StatusRequestHeaderFieldsTooLarge},
		{"a token over a 4 KiB bound", "4096", token, http.StatusRequestHeaderFieldsTooLarge},
		{"one field of 24 KiB under a 64 KiB bound", "65536", "X-Long: " + strings.Repeat("v", 24<<10) + "\r\n", http.StatusOK},
	} {
		env := map[string]string{"DATABASE_URL": dbURL, "SEARCHD_JWT_SECRET": goodSecret, "SEARCHD_ADDR": "127.0.0.1:0"}
		if tc.env != "" {
			env["SEARCHD_MAX_HEADER_BYTES"] = tc.env
		}
		addr, stop := newHarness(env).start(t, "serve")
		if got := send(addr, tc.fields); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
		wantReady(t, addr, " after "+tc.name)
		stop()
	}
}
