//go:build tour

package searchd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tourMarker is the comment in README.md right before the curl tour's
// code block; the README's rewrite keeps it.
const tourMarker = "<!-- tour:"

// tourURL is the line of the tour that says where dev serves; the test's
// dev serves on a port of its own, and only this line is changed.
const tourURL = "searchd=http://127.0.0.1:8080"

// TestReadmeTourRunsAgainstDev runs the README's curl tour as a reader
// pastes it: in the directory where `bin/searchd dev` runs (its own
// PostgreSQL, its dev secret in ./.searchd-dev), with bash, curl, jq and
// openssl. It checks each of the five answers against what the API says
// afterwards: one saved search created, one Run admitted by the start and
// replayed by its repeat (201, then 200 with Idempotent-Replayed: true),
// read back, and one snapshot listed.
//
// It is behind the build tag tour: `make readme-tour` runs it (.ci/run
// does).
func TestReadmeTourRunsAgainstDev(t *testing.T) {
	pre, steps := readmeTour(t)
	for _, tool := range []string{"bash", "curl", "jq", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the tour needs %s: %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The reader's directory: bin/searchd, and dev's data under
	// ./.searchd-dev, reachable by the postgres user dev runs PostgreSQL as
	// when we are root.
	dir, err := os.MkdirTemp("", "searchd-tour-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "bin", "searchd"), "./cmd/searchd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	base, stop := startDev(t, ctx, dir)
	defer stop()

	if strings.Count(pre, tourURL+"\n") != 1 {
		t.Fatalf("the tour's preamble does not set %q once:\n%s", tourURL, pre)
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	script.WriteString(strings.Replace(pre, tourURL, "searchd="+base, 1))
	for i, s := range steps {
		fmt.Fprintf(&script, "echo '@@step %d'; echo '@@step %d' >&2\n%s", i+1, i+1, s)
	}
	tour := exec.CommandContext(ctx, "bash", "-c", script.String())
	tour.Dir = dir
	tour.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	var stdout, stderr bytes.Buffer
	tour.Stdout, tour.Stderr = &stdout, &stderr
	if err := tour.Run(); err != nil {
		t.Fatalf("the tour failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out, headers := splitSteps(stdout.String()), splitSteps(stderr.String())
	t.Logf("the tour printed:\n%s", stdout.String())

	// What the API says the tour did, read with a token of the test's own.
	token := devToken(t, dir)
	var saved struct {
		Items []struct{ ID, Name string }
	}
	apiGet(t, base, token, "/v1/saved-searches?limit=200", &saved)
	var created []string
	for _, s := range saved.Items {
		if !strings.HasPrefix(s.Name, "Demo:") {
			created = append(created, s.ID)
		}
	}
	if len(created) != 1 {
		t.Fatalf("the demo organization has %d saved searches besides dev's demo (%+v), want the 1 the tour created", len(created), saved.Items)
	}
	ss := created[0]
	var runs struct {
		Items []struct{ ID, Status string }
	}
	apiGet(t, base, token, "/v1/runs?saved_search_id="+ss, &runs)
	if len(runs.Items) != 1 {
		t.Fatalf("saved search %s has %d Runs after the tour, want 1: %+v", ss, len(runs.Items), runs.Items)
	}
	run := runs.Items[0]
	var snaps struct {
		Items []struct{ ID string }
	}
	apiGet(t, base, token, "/v1/saved-searches/"+ss+"/snapshots", &snaps)
	if len(snaps.Items) != 1 {
		t.Fatalf("saved search %s has %d snapshots after the tour, want 1", ss, len(snaps.Items))
	}

	statusLine := regexp.MustCompile(`(?m)^HTTP/[0-9.]+ ([0-9]{3})`)
	status := func(step int) []string {
		var s []string
		for _, m := range statusLine.FindAllStringSubmatch(headers[step], -1) {
			s = append(s, m[1])
		}
		return s
	}
	replayed := regexp.MustCompile(`(?mi)^Idempotent-Replayed: true\r?$`)
	checks := []struct {
		step int
		ok   bool
		want string
	}{
		{1, strings.Contains(out[1], ss), "prints the id of the saved search it created, " + ss},
		{2, fmt.Sprint(status(2)) == "[201]", fmt.Sprintf("answers 201 (got %v)", status(2))},
		{2, !replayed.MatchString(headers[2]), "is not a replay"},
		{2, strings.Contains(out[2], run.ID) && strings.Contains(out[2], snaps.Items[0].ID), "prints the Run " + run.ID + " and the snapshot " + snaps.Items[0].ID},
		{3, fmt.Sprint(status(3)) == "[200]", fmt.Sprintf("answers 200 (got %v)", status(3))},
		{3, replayed.MatchString(headers[3]), "answers Idempotent-Replayed: true"},
		{3, strings.Contains(out[3], run.ID), "prints the same Run " + run.ID},
		{4, strings.Contains(out[4], run.ID) && strings.Contains(out[4], run.Status), "prints the Run and its status " + run.Status},
		{5, strings.Contains(out[5], snaps.Items[0].ID), "lists the snapshot " + snaps.Items[0].ID},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("tour step %d %s; it printed %q (headers %q)", c.step, c.want, out[c.step], headers[c.step])
		}
	}
	for i := 1; i <= 5; i++ {
		if strings.Contains(headers[i], "curl:") || strings.Contains(headers[i], "jq: error") || strings.Contains(out[i], "null") {
			t.Errorf("tour step %d went wrong: stdout %q, stderr %q", i, out[i], headers[i])
		}
	}
}

// readmeTour returns the tour block of README.md: the lines before its
// first step, and its five steps, each from its "# N." comment on.
func readmeTour(t *testing.T) (pre string, steps []string) {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), tourMarker)
	if !ok {
		t.Fatalf("README.md has no %q marker before the curl tour", tourMarker)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatal("no ```sh block after the tour marker")
	}
	block, _, ok = strings.Cut(block, "```\n")
	if !ok {
		t.Fatal("the tour's block does not end")
	}
	step := regexp.MustCompile(`(?m)^# ([1-9])\. `)
	idx := step.FindAllStringSubmatchIndex(block, -1)
	if len(idx) != 5 {
		t.Fatalf("the tour has %d steps (# N. comments), want 5:\n%s", len(idx), block)
	}
	pre = block[:idx[0][0]]
	for i, m := range idx {
		if n := block[m[2]:m[3]]; n != fmt.Sprint(i+1) {
			t.Fatalf("tour step %d is numbered %s", i+1, n)
		}
		end := len(block)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		steps = append(steps, block[m[0]:end])
	}
	return pre, steps
}

// splitSteps splits what the tour printed at its "@@step N" lines.
func splitSteps(s string) map[int]string {
	out := map[int]string{}
	cur := 0
	for _, line := range strings.SplitAfter(s, "\n") {
		var n int
		if _, err := fmt.Sscanf(line, "@@step %d\n", &n); err == nil {
			cur = n
			continue
		}
		out[cur] += line
	}
	return out
}

// startDev runs bin/searchd dev in dir on a loopback port of the OS's
// choosing and returns its base URL, read from what dev prints, and a
// function that stops it (SIGINT: the server, then its PostgreSQL).
func startDev(t *testing.T, ctx context.Context, dir string) (string, func()) {
	t.Helper()
	dev := exec.Command(filepath.Join(dir, "bin", "searchd"), "dev")
	dev.Dir = dir
	dev.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "SEARCHD_ADDR=127.0.0.1:0"}
	var stderr bytes.Buffer
	dev.Stderr = &stderr
	pipe, err := dev.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = dev.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- dev.Wait() }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = dev.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("dev's log:\n%s", stderr.String())
		}
	}
	serving := regexp.MustCompile(`^Serving on (http://\S+)`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			if m := serving.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	select {
	case base, ok := <-found:
		if !ok {
			stop()
			t.Fatalf("dev exited without serving:\n%s", stderr.String())
		}
		return base, stop
	case <-ctx.Done():
		stop()
		t.Fatalf("dev did not serve in time:\n%s", stderr.String())
	}
	return "", stop
}

// devToken mints a token for dev's demo organization with the binary and
// the secret dev keeps, as the README says to.
func devToken(t *testing.T, dir string) string {
	t.Helper()
	secret, err := os.ReadFile(filepath.Join(dir, ".searchd-dev", "jwt-secret"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "bin", "searchd"), "token", "--org", "d0d0d0d0-0000-4000-8000-000000000001", "--sub", "tour-test")
	cmd.Env = []string{"SEARCHD_JWT_SECRET=" + strings.TrimSpace(string(secret))}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("searchd token: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// apiGet reads path as JSON into v.
func apiGet(t *testing.T, base, token, path string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d: %s", path, res.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
}
