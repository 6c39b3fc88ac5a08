package searchd

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGoClientReadmeBuildsThroughAReplace does what client/README.md tells
// a Go user with a local checkout to do: a fresh module beside the
// checkout (here a link to this repository, named searchd), the README's
// replace and tidy commands run as written, and its example compiled in a
// program. It needs the modules the client imports in the module cache
// (go -C client mod download puts them there), and nothing else of the machine's:
// no checksum database is asked, so a new machine passes it too.
func TestGoClientReadmeBuildsThroughAReplace(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("client/README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```(sh|go)\n(.*?)```\n").FindAllStringSubmatch(string(b), -1)
	var shell, example string
	for _, m := range blocks {
		switch {
		case m[1] == "sh" && strings.Contains(m[2], "go mod edit -replace"):
			shell = m[2]
		case m[1] == "go":
			example = m[2]
		}
	}
	if shell == "" || example == "" {
		t.Fatalf("client/README.md lacks the replace commands or the Go example (%d blocks)", len(blocks))
	}
	if !strings.Contains(string(b), "go get github.com/searchd/searchd/client") {
		t.Error("client/README.md does not show go get with the client's import path")
	}

	repo, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(repo, filepath.Join(dir, "searchd")); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(dir, "app")
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}
	// The example is a fragment: its import goes on top, its statements
	// into a function that has what they use.
	imp := regexp.MustCompile(`(?m)^import "[^"]+"\n`)
	src := "package main\n\nimport \"context\"\n" + strings.Join(imp.FindAllString(example, -1), "") +
		"\nfunc run(ctx context.Context, token, savedSearchID string) error {\n" + imp.ReplaceAllString(example, "") +
		"\t_ = started\n\treturn err\n}\n\nfunc main() { _ = run }\n"
	if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = app
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s\nmain.go:\n%s", name, strings.Join(args, " "), err, out, src)
		}
	}
	run("go", "mod", "init", "example.com/app")
	// The app's checksums start as the client module's go.sum, as a
	// user's would once the modules are known: go mod tidy checks every
	// module it adds against them and, with GOPROXY=off, cannot ask the
	// checksum database, which a new machine has cached nothing of (a
	// warm cache once hid that). A module the client needs that its
	// go.sum lacks fails the tidy rather than going unchecked.
	sums, err := os.ReadFile("client/go.sum")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "go.sum"), sums, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(shell, "\n") {
		if line, _, _ = strings.Cut(line, "#"); strings.TrimSpace(line) != "" {
			run("sh", "-c", line)
		}
	}
	run("go", "build", "-o", os.DevNull, ".")
}
