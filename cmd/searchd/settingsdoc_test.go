package main

import (
	"bufio"
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSettingsDocsAreCurrent: docs/settings.md and searchd.example.env
// are what the settings table makes, byte for byte, so neither drifts from
// the settings the code reads.
func TestSettingsDocsAreCurrent(t *testing.T) {
	t.Parallel()
	for _, f := range []struct {
		path  string
		write func(io.Writer)
	}{
		{"../../docs/settings.md", writeSettingsMarkdown},
		{"../../searchd.example.env", writeExampleEnv},
	} {
		var want bytes.Buffer
		f.write(&want)
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Errorf("%v; run `%s` at the repository's root to write it", err, regenerate)
			continue
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s differs from what the settings table makes (%s); run `%s` at the repository's root and commit it",
				filepath.Base(f.path), firstDifference(string(got), want.String()), regenerate)
		}
	}
}

// firstDifference describes the first line where got and want differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + " is " + strconv.Quote(gl) + ", the table makes " + strconv.Quote(wl)
		}
	}
	return "same lines"
}

// variableName is a name searchd reads from the environment.
var variableName = regexp.MustCompile(`^(SEARCHD_[A-Z0-9_]+|OTEL_[A-Z0-9_]+|DATABASE_URL|GOMEMLIMIT)$`)

// TestEveryVariableReadIsInTheSettingsTable: every variable named in the
// code of cmd/searchd is a setting of the table (or a removed one it warns
// of), and every call reading the environment names its variable by a
// constant, so no setting can be read without being documented. The
// loaders of every command read nothing else.
func TestEveryVariableReadIsInTheSettingsTable(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	for _, s := range allSettings() {
		if known[s.env] {
			t.Errorf("%s is in the settings table twice", s.env)
		}
		known[s.env] = true
		if s.was.env != "" {
			known[s.was.env] = true
		}
	}
	for _, r := range removedSettings {
		known[r.env] = true
	}

	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	named := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					return true
				}
				v, err := strconv.Unquote(n.Value)
				if err == nil && variableName.MatchString(v) {
					named++
					if !known[v] {
						t.Errorf("%s: %s is read but is not in the settings table (settings.go)", fset.Position(n.Pos()), v)
					}
				}
			case *ast.CallExpr:
				if isEnvRead(n.Fun) && len(n.Args) == 1 {
					switch n.Args[0].(type) {
					case *ast.Ident, *ast.BasicLit, *ast.SelectorExpr:
					default:
						t.Errorf("%s: the environment is read by a computed name; name the variable by a constant of the settings table",
							fset.Position(n.Pos()))
					}
				}
			}
			return true
		})
	}
	if named < len(allSettings()) {
		t.Errorf("found %d variables named in the code, fewer than the %d settings: the walk is broken", named, len(allSettings()))
	}

	// What the loaders read, whatever the command.
	for _, c := range []cmds{cmdServe, cmdDev, cmdMigrate, cmdToken, cmdSweep, cmdClaimsShow, cmdClaimsChange, cmdInbox, cmdRunsList, cmdRunsRetry} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		read := map[string]bool{}
		loadSettings(fs, func(k string) string { read[k] = true; return "" }, c)
		for k := range read {
			if !known[k] {
				t.Errorf("%s: the loader read %s, which is not in the settings table", c, k)
			}
		}
		if len(read) == 0 {
			t.Errorf("%s: the loader read no variable", c)
		}
	}
}

// isEnvRead reports whether fun reads the environment: getenv, a.getenv,
// os.Getenv or os.LookupEnv.
func isEnvRead(fun ast.Expr) bool {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name == "getenv"
	case *ast.SelectorExpr:
		return f.Sel.Name == "getenv" || f.Sel.Name == "Getenv" || f.Sel.Name == "LookupEnv"
	}
	return false
}

// TestDocumentedDefaultsAreTheDefaults: each setting set to the default
// the table documents as a value (the `# NAME=value` lines of
// searchd.example.env) loads the configuration nothing set loads, under
// serve and under dev, so the documented defaults are the ones in force.
func TestDocumentedDefaultsAreTheDefaults(t *testing.T) {
	t.Parallel()
	required := map[string]string{envDatabaseURL: "postgres://searchd@localhost:5432/searchd", envJWTSecret: goodSecret}
	for _, c := range []cmds{cmdServe, cmdDev, cmdSweep, cmdToken} {
		dev := c == cmdDev
		withDefaults := maps.Clone(required)
		set := 0
		for _, s := range allSettings() {
			if lit := s.kind.literal(dev); s.in&c != 0 && lit != "" {
				withDefaults[s.env] = lit
				set++
			}
		}
		if set == 0 {
			t.Fatalf("%s: %d settings with a default written as a value; the table is broken", c, set)
		}
		load := func(env map[string]string) serverConfig {
			cfg, problems := loadSettings(flag.NewFlagSet("x", flag.ContinueOnError), func(k string) string { return env[k] }, c)
			if len(problems) > 0 {
				t.Fatalf("%s: %v", c, problems)
			}
			return cfg
		}
		got, want := reflect.ValueOf(load(withDefaults)), reflect.ValueOf(load(required))
		for i := range got.NumField() {
			if !got.Type().Field(i).IsExported() {
				continue
			}
			if g, w := got.Field(i).Interface(), want.Field(i).Interface(); !reflect.DeepEqual(g, w) {
				t.Errorf("%s: every setting at its documented default loads %s %+v; nothing set loads %+v",
					c, got.Type().Field(i).Name, g, w)
			}
		}
	}
}

// TestExampleEnvSetsOnlyRequiredSettings: the lines searchd.example.env
// sets are the required settings, and its placeholder secret is refused
// until it is replaced: the file as written never starts a server with a
// secret everyone knows.
func TestExampleEnvSetsOnlyRequiredSettings(t *testing.T) {
	t.Parallel()
	var file bytes.Buffer
	writeExampleEnv(&file)
	env := map[string]string{}
	defaults := 0
	sc := bufio.NewScanner(&file)
	for sc.Scan() {
		line := sc.Text()
		if name, _, ok := strings.Cut(strings.TrimPrefix(line, "# "), "="); ok && variableName.MatchString(name) {
			defaults++
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("line %q is neither a comment nor NAME=value", line)
		}
		env[name] = value
	}
	if defaults != len(allSettings()) {
		t.Errorf("the example env has %d NAME= lines, want one per setting, %d", defaults, len(allSettings()))
	}
	if len(env) != 2 || env[envDatabaseURL] == "" || env[envJWTSecret] == "" {
		t.Errorf("the example env sets %v, want DATABASE_URL and SEARCHD_JWT_SECRET alone", env)
	}
	h := newHarness(env)
	if code := h.run("serve"); code != 2 || !strings.Contains(h.stderr.String(), envJWTSecret+": auth: Config.Secret is 9 bytes long") {
		t.Errorf("serve with the example env as written = %d %q, want 2 refusing the placeholder secret", code, h.stderr.String())
	}
}

// TestEverySettingIsDocumented: each row of the settings table has a
// variable and a flag of its own (none for a secret), a default, the
// values it takes and a meaning, and names commands that read it.
func TestEverySettingIsDocumented(t *testing.T) {
	t.Parallel()
	flags := map[string]bool{}
	for _, s := range allSettings() {
		switch {
		case !variableName.MatchString(s.env):
			t.Errorf("%q is not a variable name", s.env)
		case s.secret && s.flag != "":
			t.Errorf("%s is a secret with a flag, --%s: a flag's value is in the process list", s.env, s.flag)
		case s.flag != "" && flags[s.flag]:
			t.Errorf("--%s is the flag of two settings", s.flag)
		case s.in == 0 || s.in.String() == "":
			t.Errorf("%s is read by no command", s.env)
		case s.defaultText(false) == "" || s.valuesText() == "" || s.meaning == "":
			t.Errorf("%s: default %q, values %q, meaning %q: want each", s.env, s.defaultText(false), s.valuesText(), s.meaning)
		}
		flags[s.flag] = true
	}
}

// TestNoSettingSaysItsDefaultOrRangeTwice: a setting's default and range
// are written once, in its Config (a package's, or cmd/searchd's own
// serverConfig): no kind carries a default or a range, so a row writes
// neither but as documentation (def, values) of a default its Config
// leaves zero because it depends on another setting. It fails when a row
// documents a default its Config holds, and when a field row's default
// or range is not what defaults and the Config's Validate say.
func TestNoSettingSaysItsDefaultOrRangeTwice(t *testing.T) {
	t.Parallel()
	fields := 0
	for _, s := range allSettings() {
		switch s.kind.(type) {
		case field[int], field[int32], field[int64], field[time.Duration]:
			fields++
			if s.kind.values() == "" {
				t.Errorf(`%s: its Config's Validate says no range: is its error "pkg: Config.Field is V; it must be R"?`, s.env)
			}
		case text, boolean:
		default:
			continue // custom and external: parsed by a function of their own, or elsewhere
		}
		if held := s.kind.literal(false); held != "" && (s.def != "" || s.devDef != "" || s.values != "") {
			t.Errorf("%s: its row documents its default or values (%q, %q, %q), but its Config holds them (default %q)",
				s.env, s.def, s.devDef, s.values, held)
		}
	}
	if fields < 40 {
		t.Errorf("%d field rows, want at least 40: the table is broken", fields)
	}
}
