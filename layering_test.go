package searchd

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/searchd/searchd"

// pkgImports maps each package directory of the main module (nested
// modules, testdata and node_modules skipped) to what its non-test files
// import: searchd packages as module-relative directories, others as
// import paths with a "std:" or "ext:" prefix.
func pkgImports(t *testing.T) map[string][]string {
	t.Helper()
	imports := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if _, ok := imports[dir]; !ok {
			imports[dir] = nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			rel, ok := strings.CutPrefix(p, modulePath+"/")
			switch {
			case ok:
			case strings.Contains(strings.Split(p, "/")[0], "."):
				rel = "ext:" + p
			default:
				rel = "std:" + p
			}
			if !slices.Contains(imports[dir], rel) {
				imports[dir] = append(imports[dir], rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return imports
}

// testOnly reports whether dir is test kit: code only tests link.
func testOnly(dir string) bool {
	return strings.HasPrefix(dir, "internal/testkit/") || strings.HasPrefix(dir, "test/") ||
		strings.HasSuffix(dir, "test") && strings.Contains(dir, "/")
}

// base is the bottom layer: it imports nothing of searchd above it.
func base(dir string) bool {
	return dir == "errs" || dir == "dbclock" || dir == "migrations" ||
		strings.HasPrefix(dir, "internal/") && !testOnly(dir)
}

// TestLayering holds the import rules of docs/layout.md for every package
// of the module, so no arrow runs back up:
//   - base packages (errs, dbclock, migrations, production internal/)
//     import only base packages;
//   - auth imports no package of searchd;
//   - the edges (api, console) never import each other, a driver
//     (pgx, database/sql, internal/dberr) or the migrations;
//   - no production package imports the test kit;
//   - production internal/ holds only what the binary links.
func TestLayering(t *testing.T) {
	imports := pkgImports(t)
	if len(imports) < 20 {
		t.Fatalf("found %d packages; is the test run from the module's root?", len(imports))
	}
	for dir, deps := range imports {
		for _, dep := range deps {
			if strings.HasPrefix(dep, "std:") || strings.HasPrefix(dep, "ext:") {
				edge := dir == "api" || dir == "console"
				if edge && (dep == "std:database/sql" || strings.HasPrefix(dep, "ext:github.com/jackc/")) {
					t.Errorf("the edge %s imports the driver's %s", dir, dep[4:])
				}
				continue
			}
			switch {
			case !testOnly(dir) && testOnly(dep):
				t.Errorf("%s imports the test kit %s", dir, dep)
			case base(dir) && !base(dep):
				t.Errorf("%s (base) imports %s, a layer above it", dir, dep)
			case dir == "auth":
				t.Errorf("auth imports %s; it imports no package of searchd", dep)
			case (dir == "api" || dir == "console") && slices.Contains([]string{"api", "console", "migrations", "internal/dberr"}, dep):
				t.Errorf("the edge %s imports %s", dir, dep)
			}
		}
	}
	linked := map[string]bool{}
	var link func(string)
	link = func(dir string) {
		if linked[dir] {
			return
		}
		linked[dir] = true
		for _, dep := range imports[dir] {
			link(dep)
		}
	}
	link("cmd/searchd")
	for dir := range imports {
		if strings.HasPrefix(dir, "internal/") && !testOnly(dir) && !linked[dir] {
			t.Errorf("%s is in production internal/ but the binary does not link it; tests-only code belongs in internal/testkit/", dir)
		}
	}
}

// perRequestTimers are the production files that may own a timer outside
// internal/loop, each a wait of one request or process, not a background
// loop's.
var perRequestTimers = map[string]string{
	"api/callbackbody.go":           "a callback's wait for room in the body budget",
	"console/operator.go":           "a page's wait for the shared overview read",
	"idempotency/wait.go":           "a start's wait for a claim's end",
	"internal/seatq/seatq.go":       "a request's wait for a seat",
	"runs/runstream/runstream.go":   "one stream's poll, heartbeat and longest duration",
	"internal/pgcluster/process.go": "the wait for a child process to exit",
}

// TestBackgroundLoopsRunOnLoop holds every background loop to
// internal/loop (its interval, jitter, back-off, wake and cancellable
// sleep): no other production file owns a timer or a ticker, but the
// per-request waits listed in perRequestTimers.
func TestBackgroundLoopsRunOnLoop(t *testing.T) {
	timer := regexp.MustCompile(`\btime\.(NewTimer|NewTicker|After|Tick|Sleep)\(`)
	seen := 0
	for dir := range pkgImports(t) {
		if testOnly(dir) || dir == "internal/loop" {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, name := range files {
			name = filepath.ToSlash(name)
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			src, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			seen++
			if timer.Match(src) && perRequestTimers[name] == "" {
				t.Errorf("%s owns a timer: a background loop runs on internal/loop (loop.Loop, loop.Sleep); a per-request wait goes in perRequestTimers with its reason", name)
			}
		}
	}
	if seen < 100 {
		t.Fatalf("read %d production files; is the test run from the module's root?", seen)
	}
}
