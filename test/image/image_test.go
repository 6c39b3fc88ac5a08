//go:build image

// Package image tests the container image of issue 29: `make image` as a
// user runs it, its base overridden to scratch (no registry is reachable
// here) and its storage a throwaway vfs directory, then the image's labels,
// user and default command, and the binary found in its exported
// filesystem: static, and answering `searchd version` with the VERSION
// file's version and the commit it was stamped with.
//
// It is behind the build tag image; `make test-image` runs it (.ci/run
// does). It needs podman (Debian's package) and runs as root, as CI does.
package image

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// binaryPath is where the Containerfile puts searchd, without the leading /.
const binaryPath = "usr/local/bin/searchd"

func TestImageRunsSearchdAsItsLabelsSay(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(file))
	// podman refuses a runroot path of 50 characters or more: t.TempDir's
	// are longer.
	store, err := os.MkdirTemp("", "searchd-image-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(store) })
	podman := "podman --root " + filepath.Join(store, "root") + " --runroot " + filepath.Join(store, "run") +
		" --tmpdir " + filepath.Join(store, "tmp") + " --storage-driver vfs --events-backend none"
	const tag = "localhost/searchd-image-test:latest"
	const commit = "0123456789abcdef0123456789abcdef01234567"

	build := exec.Command("make", "image", "PODMAN="+podman, "IMAGE="+tag, "IMAGE_BASE=scratch", "COMMIT="+commit)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command("sh", "-c", podman+" "+strings.Join(args, " "))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return out
	}

	var inspect []struct {
		Config struct {
			User       string
			Entrypoint []string
			Cmd        []string
			Labels     map[string]string
		}
	}
	if err := json.Unmarshal(run("image", "inspect", tag), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("podman image inspect: %v (%d images)", err, len(inspect))
	}
	cfg := inspect[0].Config
	for label, want := range map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": commit,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.source":   "https://github.com/searchd/searchd",
		"org.opencontainers.image.title":    "searchd",
	} {
		if got := cfg.Labels[label]; got != want {
			t.Errorf("label %s = %q, want %q", label, got, want)
		}
	}
	if u := strings.Split(cfg.User, ":")[0]; u == "" || u == "0" || u == "root" {
		t.Errorf("the image runs as user %q, want a non-root user", cfg.User)
	}
	if got := append(append([]string{}, cfg.Entrypoint...), cfg.Cmd...); strings.Join(got, " ") != "/"+binaryPath+" serve" {
		t.Errorf("entrypoint %q and command %q, want /%s serve", cfg.Entrypoint, cfg.Cmd, binaryPath)
	}

	// The filesystem, as a container of the image would see it.
	id := strings.TrimSpace(string(run("create", tag)))
	fs := filepath.Join(store, "fs.tar")
	run("export", "-o", fs, id)
	run("rm", id)
	dir := filepath.Join(store, "fs")
	names := untar(t, fs, dir)
	for _, want := range []string{binaryPath, "usr/share/doc/searchd/LICENSE"} {
		if !names[want] {
			t.Errorf("the image has no %s; it has %v", want, names)
		}
	}
	bin := filepath.Join(dir, binaryPath)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s has a %v program header: it is linked dynamically, and the minimal base has no libc", binaryPath, p.Type)
		}
	}
	f.Close()
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", binaryPath, err, out)
	}
	want := regexp.MustCompile(`^searchd ` + regexp.QuoteMeta(version) + ` \(commit ` + commit + `, go1\.[0-9.]+\)\n$`)
	if !want.Match(out) {
		t.Errorf("the image's searchd version printed %q, want %v", out, want)
	}
	t.Logf("image %s: labels %v; user %s; its binary: %s", tag, cfg.Labels, cfg.User, bytes.TrimSpace(out))
}

// untar extracts the regular files of the tar at path into dir and
// returns the names it holds.
func untar(t *testing.T, path, dir string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(filepath.Clean("/"+h.Name), "/")
		names[name] = true
		if h.Typeflag != tar.TypeReg {
			continue
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, tr); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
}
