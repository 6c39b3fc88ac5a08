package migrations_test

import (
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/searchd/searchd/migrations"
)

// contractAllowed lists the migrations after migrations.ExpandOnlyAfter
// that take a contract step anyway: each names the steps (contractRules'
// names) and says why a replica of the previous release still serves
// correctly on the schema (say, the column it drops was last used two
// releases ago). Empty is the rule kept.
var contractAllowed = map[string]struct {
	steps  []string
	reason string
}{
	"00028_run_cancel.sql": {
		steps: []string{"drop", "constraint without NOT VALID"},
		reason: "the foreign key is added to agent.run_cancels, which this migration creates empty (after " +
			"distributing it: Citus refuses a local table's key to a distributed one), so there is nothing to " +
			"validate and no lock on a table in use; the dispatch's state check is dropped and added again wider (with cancelled), NOT VALID: every row " +
			"a replica of the previous release writes passes it, and that replica never leases a cancelled dispatch " +
			"(its lease takes pending rows) nor ends one (its fence asks for pending)",
	},
	"00023_provider_job_directory_by_job.sql": {
		steps: []string{"drop", "new primary key or unique constraint"},
		reason: "issue 36.6: the directory's key moves from (provider, provider_job_id) to job_id, so that two " +
			"organizations can register one provider job id; the old key is what allowed squatting, and no expand step " +
			"can keep it while allowing that. A replica of the previous release, during the roll, still resolves every " +
			"callback of a pair one organization holds (by the pair, as before); its registration names the old key in " +
			"ON CONFLICT and fails with a 500, writing nothing (one transaction), and the client's retry reaches an " +
			"upgraded replica. The CHANGELOG's upgrade notes say so",
	},
}

// contractRule is one kind of step that breaks a replica of the previous
// release, which still reads and writes the schema as it was: it belongs
// in a later release than the code that stops needing what it removes.
type contractRule struct {
	name string
	// match reports whether one statement of a migration's Up section
	// (comments removed, upper case, white space collapsed) takes it.
	match func(stmt string) bool
}

func matches(expr string) func(string) bool {
	re := regexp.MustCompile(expr)
	return re.MatchString
}

// The checks are of the text, not a parse: cheap and a little coarse (a
// word inside a function body counts too), which the allow-list absorbs.
var contractRules = []contractRule{
	{"drop", matches(`\bDROP (TABLE|COLUMN|VIEW|MATERIALIZED VIEW|FUNCTION|PROCEDURE|TRIGGER|TYPE|SCHEMA|INDEX|CONSTRAINT)\b`)},
	{"rename", matches(`\bRENAME\b`)},
	{"type change", matches(`\bALTER (COLUMN )?\S+ (SET DATA )?TYPE\b`)},
	{"set not null", matches(`\bSET NOT NULL\b`)},
	{"validate constraint", matches(`\bVALIDATE CONSTRAINT\b`)},
	{"new primary key or unique constraint", matches(`\bADD (CONSTRAINT \S+ )?(PRIMARY KEY|UNIQUE)\b`)},
	{"constraint without NOT VALID", func(stmt string) bool {
		return regexp.MustCompile(`\bADD (CONSTRAINT \S+ )?(CHECK|FOREIGN KEY)\b`).MatchString(stmt) &&
			!strings.Contains(stmt, "NOT VALID")
	}},
	{"NOT NULL column without a default", func(stmt string) bool {
		// The clauses of an ALTER TABLE, one ADD COLUMN each.
		// (White space is collapsed: no newline is left but these.)
		clauses := regexp.MustCompile(`, (ADD|ALTER|DROP)\b`).ReplaceAllString(stmt, "\n$1")
		for _, clause := range strings.Split(clauses, "\n") {
			i := strings.Index(clause, "ADD COLUMN ")
			if i < 0 {
				continue
			}
			def := clause[i:]
			if strings.Contains(def, "NOT NULL") && !strings.Contains(def, "DEFAULT") {
				return true
			}
		}
		return false
	}},
}

var (
	lineComment = regexp.MustCompile(`--[^\n]*`)
	whiteSpace  = regexp.MustCompile(`\s+`)
)

// contractSteps returns the names of the contract steps the Up section of
// the migration src takes, each once, in contractRules' order.
func contractSteps(src string) []string {
	up := src
	if i := strings.Index(up, "-- +goose Up"); i >= 0 {
		up = up[i:]
	}
	if i := strings.Index(up, "-- +goose Down"); i >= 0 {
		up = up[:i]
	}
	up = whiteSpace.ReplaceAllString(strings.ToUpper(lineComment.ReplaceAllString(up, "")), " ")
	var found []string
	for _, stmt := range strings.Split(up, ";") {
		for _, r := range contractRules {
			if r.match(stmt) && !slices.Contains(found, r.name) {
				found = append(found, r.name)
			}
		}
	}
	var ordered []string
	for _, r := range contractRules {
		if slices.Contains(found, r.name) {
			ordered = append(ordered, r.name)
		}
	}
	return ordered
}

// TestMigrationsAfterTheRuleOnlyExpand holds every migration newer than
// migrations.ExpandOnlyAfter to expand-then-contract (see the package
// comment): a replica of the previous release must serve on its schema
// during a rolling upgrade. A contract step waits for a later release, or
// is listed in contractAllowed with its reason.
func TestMigrationsAfterTheRuleOnlyExpand(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, f := range files {
		v, err := strconv.ParseInt(f[:5], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
		if v <= migrations.ExpandOnlyAfter {
			continue
		}
		checked[f] = true
		src, err := fs.ReadFile(migrations.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		allowed := contractAllowed[f]
		for _, step := range contractSteps(string(src)) {
			if !slices.Contains(allowed.steps, step) {
				t.Errorf("%s takes a contract step (%s) in the release that introduces it: replicas of the previous release "+
					"still use the schema as it was during a rolling upgrade. Move it to a later release, or list it in contractAllowed "+
					"with the reason it is safe (docs/deploy.md, Upgrades)", f, step)
			}
		}
	}
	for f, a := range contractAllowed {
		if !checked[f] || a.reason == "" || len(a.steps) == 0 {
			t.Errorf("contractAllowed[%q] names no migration after %d, or no step or reason", f, migrations.ExpandOnlyAfter)
		}
	}
}

// TestContractStepsAreFound: the check can fail. It finds each kind of
// contract step, in the migrations written before the rule too, and
// passes the expand steps.
func TestContractStepsAreFound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sql  string
		want []string
	}{
		{"ALTER TABLE agent.runs DROP COLUMN note;", []string{"drop"}},
		{"DROP TABLE agent.old;", []string{"drop"}},
		{"DROP TRIGGER t ON agent.runs;", []string{"drop"}},
		{"ALTER TABLE agent.runs RENAME COLUMN note TO memo;", []string{"rename"}},
		{"ALTER TABLE agent.runs ALTER COLUMN note TYPE varchar(10);", []string{"type change"}},
		{"ALTER TABLE agent.runs ALTER note SET DATA TYPE text;", []string{"type change"}},
		{"ALTER TABLE agent.runs ALTER COLUMN note SET NOT NULL;", []string{"set not null"}},
		{"ALTER TABLE agent.runs VALIDATE CONSTRAINT runs_note_check;", []string{"validate constraint"}},
		{"ALTER TABLE agent.runs ADD CONSTRAINT runs_key UNIQUE (a, b);", []string{"new primary key or unique constraint"}},
		{"ALTER TABLE agent.runs ADD CONSTRAINT runs_note_check\n  CHECK (note <> '');", []string{"constraint without NOT VALID"}},
		{"ALTER TABLE agent.runs ADD COLUMN a text,\n ADD COLUMN b int NOT NULL;", []string{"NOT NULL column without a default"}},
		// Expand steps.
		{"CREATE TABLE agent.new (id uuid PRIMARY KEY, n int NOT NULL, CONSTRAINT c CHECK (n > 0));", nil},
		{"ALTER TABLE agent.runs ADD COLUMN a text, ADD COLUMN b bigint NOT NULL DEFAULT 1;", nil},
		{"ALTER TABLE agent.runs ADD CONSTRAINT runs_note_check CHECK (note <> '') NOT VALID;", nil},
		{"CREATE INDEX CONCURRENTLY runs_note_idx ON agent.runs (note);", nil},
		{"-- DROP COLUMN in a comment\nCREATE FUNCTION agent.f() RETURNS int LANGUAGE sql AS 'SELECT 1';", nil},
		{"-- +goose Up\nCREATE TABLE agent.x (id int);\n-- +goose Down\nDROP TABLE agent.x;", nil},
	}
	for _, tt := range tests {
		if got := contractSteps(tt.sql); !slices.Equal(got, tt.want) {
			t.Errorf("contractSteps(%q) = %q, want %q", tt.sql, got, tt.want)
		}
	}
	// Two migrations before the rule would have broken a replica of the
	// release before them: 00015 made the inbox's columns NOT NULL and
	// re-keyed it; 00019 dropped the claim-ended notification trigger.
	for f, want := range map[string]string{
		"00015_provider_job_directory.sql": "set not null",
		"00019_citus_distribution.sql":     "drop",
	} {
		src, err := fs.ReadFile(migrations.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		if got := contractSteps(string(src)); !slices.Contains(got, want) {
			t.Errorf("contractSteps(%s) = %q, want it to hold %q", f, got, want)
		}
	}
}
