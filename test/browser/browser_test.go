//go:build browser

// Package browser is the browser test of issue 15: a page served on one
// loopback origin calls a real `searchd serve`, on a throwaway PostgreSQL,
// on another, through fetch() in headless Chromium (Debian's chromium,
// driven by playwright-core from npm), with the TypeScript client of
// clients/ts. It proves CORS (the preflights, the exposed headers), and
// that the client's start, replay, double click and read behave in a real
// browser engine as they do in Node.
//
// It is behind the build tag browser; `make browser` builds the
// TypeScript client and runs it (.ci/run does). It needs /usr/bin/chromium
// (or SEARCHD_CHROMIUM), node, and clients/ts/node_modules (npm ci).
// SEARCHD_BROWSER_SCREENSHOT names where the screenshot is kept (default:
// the test's temporary directory, logged).
package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/client"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/searchdproc"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const secret = "browser-test-secret-browser-test-secret-01"

// repoRoot is the repository root, from this file's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBrowserStartsReplaysAndReadsARunAcrossOrigins(t *testing.T) {
	root := repoRoot(t)
	tsDir := filepath.Join(root, "clients", "ts")
	clientJS := filepath.Join(tsDir, "dist", "src", "index.js")
	if _, err := os.Stat(clientJS); err != nil {
		t.Fatalf("%s is missing: build the TypeScript client first (make browser runs npm ci and npm run build)", clientJS)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// The page's origin: a server of its own on loopback.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /page.html", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, filepath.Join(tsDir, "browser", "page.html"))
	})
	mux.Handle("GET /client/", http.StripPrefix("/client/", http.FileServer(http.Dir(filepath.Join(tsDir, "dist", "src")))))
	page := httptest.NewServer(mux)
	defer page.Close()

	// A real searchd on a throwaway database, allowing the page's origin.
	bin := filepath.Join(t.TempDir(), "searchd")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/searchd")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dbURL := pgtest.NewDBURL(t)
	var log bytes.Buffer
	srv, err := searchdproc.Start(ctx, searchdproc.Config{Bin: bin, Out: &log, Env: []string{
		"DATABASE_URL=" + dbURL, "SEARCHD_JWT_SECRET=" + secret,
		"SEARCHD_LOG_FORMAT=text", "SEARCHD_CORS_ORIGINS=" + page.URL,
	}})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("searchd log:\n%s", log.String())
		}
	}()
	base := srv.Base

	org := uuid.New()
	token, err := auth.SignToken([]byte(secret), org, "browser-user", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(base, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := c.CreateSavedSearch(ctx, client.CreateSavedSearchParams{Name: "Browser demo", Brief: client.Brief{Query: "postgres"}})
	if err != nil {
		t.Fatal(err)
	}

	shot := os.Getenv("SEARCHD_BROWSER_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "browser.png")
	}
	q := url.Values{"api": {base}, "token": {token}, "savedSearch": {ss.ID}}
	drive := exec.CommandContext(ctx, "node", filepath.Join(tsDir, "browser", "drive.mjs"), page.URL+"/page.html?"+q.Encode(), shot)
	drive.Dir = tsDir
	drive.Stderr = os.Stderr
	out, err := drive.Output()
	if err != nil {
		t.Fatalf("driving Chromium: %v\n%s", err, out)
	}
	t.Logf("screenshot: %s", shot)
	var res struct {
		Steps []struct {
			Step   string `json:"step"`
			OK     bool   `json:"ok"`
			Detail string `json:"detail"`
		} `json:"steps"`
		First struct {
			Created, Replayed bool
			Run               string
		} `json:"first"`
		Replay struct {
			Created, Replayed bool
			Run               string
		} `json:"replay"`
		DoubleClick []struct {
			Created, Replayed bool
			Run               string
		} `json:"doubleClick"`
		Run struct {
			ID             string  `json:"id"`
			CreatedBy      *string `json:"created_by"`
			IdempotencyKey string  `json:"idempotency_key"`
		} `json:"run"`
		Headers struct {
			Status    int    `json:"status"`
			Location  string `json:"location"`
			Replayed  string `json:"replayed"`
			RequestID string `json:"requestId"`
		} `json:"headers"`
		ETag     string `json:"etag"`
		NotFound struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
		} `json:"notFound"`
		Error     string   `json:"error"`
		Console   []string `json:"console"`
		UserAgent string   `json:"userAgent"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("the driver printed %q: %v", out, err)
	}
	t.Logf("browser: %s", res.UserAgent)
	for _, s := range res.Steps {
		t.Logf("page step %-18s ok=%v %s", s.Step, s.OK, s.Detail)
		if !s.OK {
			t.Errorf("page step %s failed: %s", s.Step, s.Detail)
		}
	}
	if res.Error != "" || len(res.Steps) < 7 {
		t.Fatalf("the page ended after %d steps with %q (console %v)", len(res.Steps), res.Error, res.Console)
	}
	if !res.First.Created || res.First.Replayed || !res.Replay.Replayed || res.Replay.Run != res.First.Run {
		t.Errorf("start %+v then replay %+v, want 201 then 200 replayed on the same Run", res.First, res.Replay)
	}
	created := 0
	for _, d := range res.DoubleClick {
		if d.Created {
			created++
		}
		if d.Run != res.DoubleClick[0].Run {
			t.Errorf("double click made Runs %s and %s", d.Run, res.DoubleClick[0].Run)
		}
	}
	if len(res.DoubleClick) != 3 || created != 1 {
		t.Errorf("double click %+v, want three answers, one 201", res.DoubleClick)
	}
	if res.Run.CreatedBy == nil || *res.Run.CreatedBy != "browser-user" || res.Run.IdempotencyKey != "browser-start" {
		t.Errorf("the page read Run %+v, want created_by browser-user and key browser-start", res.Run)
	}
	if res.Headers.Status != http.StatusOK || res.Headers.Location != "/v1/runs/"+res.First.Run || res.Headers.Replayed != "true" || res.Headers.RequestID == "" {
		t.Errorf("headers the page read through fetch(): %+v, want Location, Idempotent-Replayed and X-Request-Id exposed", res.Headers)
	}
	if res.ETag != `"1"` || res.NotFound.Status != http.StatusNotFound || res.NotFound.Code != "not_found" {
		t.Errorf("ETag %q, 404 %+v; want \"1\" and a readable not_found", res.ETag, res.NotFound)
	}

	// What the database holds: two Runs, one per key, two snapshots.
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var runs, snapshots int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM agent.runs), (SELECT count(*) FROM agent.saved_search_snapshots)`).
		Scan(&runs, &snapshots); err != nil {
		t.Fatal(err)
	}
	if runs != 2 || snapshots != 2 {
		t.Errorf("%d Runs and %d snapshots after two keys, want 2 and 2", runs, snapshots)
	}
}
