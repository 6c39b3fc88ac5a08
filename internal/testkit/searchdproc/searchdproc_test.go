package searchdproc_test

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/internal/testkit/searchdproc"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

// TestStartReturnsOnceServeIsReadyAndStopEndsIt builds searchd, starts
// serve on a migrated database, and finds /readyz answering 200 the moment
// Start returns; after Stop, nothing listens there any more.
func TestStartReturnsOnceServeIsReadyAndStopEndsIt(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "searchd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/searchd/searchd/cmd/searchd").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log bytes.Buffer
	srv, err := searchdproc.Start(ctx, searchdproc.Config{Bin: bin, Out: &log, Env: []string{
		"DATABASE_URL=" + pgtest.NewDBURL(t), "SEARCHD_JWT_SECRET=searchdproc-test-secret-0123456789abcdef",
	}})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := client.Get(srv.Base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("/readyz = %d once Start returned, want 200", res.StatusCode)
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if res, err := client.Get(srv.Base + "/readyz"); err == nil {
		res.Body.Close()
		t.Errorf("/readyz still answers %d after Stop", res.StatusCode)
	}
}

// TestStartFailsWhenTheProgramExitsFirst: a program that exits at once is
// an error at once, not a minute's wait for /readyz.
func TestStartFailsWhenTheProgramExitsFirst(t *testing.T) {
	began := time.Now()
	_, err := searchdproc.Start(context.Background(), searchdproc.Config{Bin: "/bin/false"})
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Fatalf("Start(/bin/false) = %v, want an error saying it exited", err)
	}
	if d := time.Since(began); d > 30*time.Second {
		t.Errorf("Start took %s to see the program exit", d)
	}
}
