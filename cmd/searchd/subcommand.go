package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// subcommand is one verb of a command with several (`claims show`).
type subcommand struct {
	name string
	run  func(context.Context, []string) error
}

// dispatchSubcommand runs the subcommand args[0] names among subs (two at
// least) with the rest of args. "help", "-h", "-help" and "--help" print usage on stdout;
// no subcommand prints it on stderr and, like an unknown one, answers a
// usage error prefixed by command ("claims", "runs dispatch").
func (a *app) dispatchSubcommand(ctx context.Context, command, usage string, args []string, subs ...subcommand) error {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	n := len(names)
	choice := strings.Join(names[:n-1], ", ") + " or " + names[n-1]
	if len(args) == 0 {
		fmt.Fprint(a.stderr, usage)
		return usagef("%s: name a subcommand: %s", command, choice)
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(a.stdout, usage)
		return nil
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(ctx, args[1:])
		}
	}
	return usagef("%s: unknown subcommand %q: use %s", command, args[0], choice)
}

// withDB reads the settings of command c from fs and the environment
// and, when neither they nor the command's own flags have a problem (given
// in problems), runs run on a pool of one connection on the database (see
// [openSmallPool]), with the logger the settings ask for, and closes the
// pool. Every problem is answered at once, in a usage error.
func (a *app) withDB(ctx context.Context, fs *flag.FlagSet, c cmds, problems []string, run func(*pgxpool.Pool, *slog.Logger) error) error {
	cfg, settingProblems := loadSettings(fs, a.getenv, c)
	if problems = append(problems, settingProblems...); len(problems) > 0 {
		return invalid(problems)
	}
	pool, err := openSmallPool(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	return run(pool, newLogger(a.stderr, cfg))
}

// printJSON writes v on stdout as indented JSON.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printList writes list on stdout: with asJSON as a JSON array of each
// item's view, else as table writes it for a person, its cells ended by
// tabs aligned in columns.
func printList[T, V any](a *app, asJSON bool, list []T, view func(*T) V, table func(io.Writer, []T)) error {
	if !asJSON {
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
		table(tw, list)
		return tw.Flush()
	}
	views := make([]V, len(list))
	for i := range list {
		views[i] = view(&list[i])
	}
	return a.printJSON(views)
}

// stamp writes t for a table, to the second in UTC; nil is "-".
func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// checkLimit checks --limit, from 1 to most. A problem is added to
// problems.
func checkLimit(problems *[]string, limit, most int) {
	if limit < 1 || limit > most {
		*problems = append(*problems, fmt.Sprintf("--limit: %d is out of range: from 1 to %d", limit, most))
	}
}

// readOrg reads --org, an organization id: a UUID, not the nil one. ""
// is none (uuid.Nil), a problem when required. A problem is added to
// problems.
func readOrg(problems *[]string, v string, required bool) uuid.UUID {
	id, err := uuid.Parse(v)
	switch {
	case v == "" && required:
		*problems = append(*problems, "--org: is required: the organization id, a UUID")
	case v == "":
	case err != nil:
		*problems = append(*problems, fmt.Sprintf("--org: %q is not a UUID", v))
	case id == uuid.Nil:
		*problems = append(*problems, "--org: is the nil UUID, which names no organization")
	default:
		return id
	}
	return uuid.Nil
}

// checkLine checks the value of a flag an operator's action records
// (--reason, --actor): required (need completes "is required: "), valid
// UTF-8 of at most max characters, one line. A problem is added to
// problems.
func checkLine(problems *[]string, flag, value, need string, max int) {
	switch {
	case value == "":
		*problems = append(*problems, "--"+flag+": is required: "+need)
	case utf8.RuneCountInString(value) > max || !utf8.ValidString(value):
		*problems = append(*problems, fmt.Sprintf("--%s: must be valid UTF-8 of at most %d characters", flag, max))
	case strings.ContainsFunc(value, unicode.IsControl):
		*problems = append(*problems, "--"+flag+": must be one line, without control characters")
	}
}
