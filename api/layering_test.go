package api_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTheEdgesImportNoDriver holds the layering docs/layout.md
// states: the HTTP edge and the console speak to the domain packages, the
// error kinds and auth, never to a database driver, database/sql or the
// migrations (readiness is handed in by the binary), and never to each
// other: authentication is package auth's, which imports no package of
// searchd at all.
func TestTheEdgesImportNoDriver(t *testing.T) {
	driver := []string{"github.com/jackc/", "database/sql", "github.com/searchd/searchd/migrations", "github.com/searchd/searchd/internal/dberr"}
	for dir, forbidden := range map[string][]string{
		".":          append([]string{"github.com/searchd/searchd/console"}, driver...),
		"../console": append([]string{"github.com/searchd/searchd/api"}, driver...),
		"../auth":    append([]string{"github.com/searchd/searchd/"}, driver...),
	} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			src, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			checked++
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, bad := range forbidden {
					if strings.HasPrefix(path, bad) {
						t.Errorf("%s imports %s, which docs/layout.md forbids", name, path)
					}
				}
			}
		}
		if checked == 0 {
			t.Fatalf("no Go files found in %s", dir)
		}
	}
}
