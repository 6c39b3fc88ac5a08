// Command searchd is the saved-search service: it migrates its database,
// serves the HTTP API (and sweeps what is past its retention while it
// does), sweeps once for an outside scheduler, mints development tokens,
// lets an operator inspect and mend claims, the inbox and dispatches, and
// runs a complete local setup with one command; `searchd help` lists the
// commands ([usageHead]).
//
// Configuration comes from the environment, and from flags that win over
// it, but for secrets, which are read from the environment alone; see
// `searchd help` and `searchd <command> --help`. Exit status: 0 success,
// 1 failure, 2 usage or configuration error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/dispatch"
)

func main() {
	a := &app{
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
		now:    time.Now,
	}
	os.Exit(a.run(context.Background(), os.Args[1:]))
}

// app is the command with its surroundings, so tests can run it in
// process.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
	// dbClock is the one database clock every store of every command runs
	// at: nil, the database's now(), outside tests (see package dbclock).
	dbClock *dbclock.Clock
	// ready, when set, is told the address serve listens on (tests).
	ready func(addr string)
	// backlogWatch, when set, paces serve's watcher of the dispatch
	// backlog (its Interval and WarnEvery; tests).
	backlogWatch dispatch.WatchConfig
}

const usageHead = `usage: searchd <command> [flags]

commands:
  migrate   apply the database migrations (DATABASE_URL) and print the versions applied
  serve     serve the HTTP API
  token     print an HS256 bearer token: searchd token --org UUID [--sub S] [--ttl 1h];
            --operator for an operator's, --runtime --sub NAME for a runtime credential,
            --admin --sub NAME for an organization's admin (who manages service keys)
  dev       run locally: start PostgreSQL under ./.searchd-dev (unless DATABASE_URL
            is set), migrate, create demo data, print a token and a curl command, serve
  claims    show or force-release one claim: searchd claims show|release --org UUID
            --scope S --key K [--json | --reason TEXT]; or resolve an uncertain tool
            call: searchd claims resolve ... --as delivered|retry --actor WHO --reason TEXT
  sweep     delete the claims, Runs, snapshots, dropped deliveries, resolutions and inbox
            arrivals past their retention, once, in bounded passes, and print the counts (for cron or
            a Kubernetes CronJob; serve also sweeps, every SEARCHD_SWEEP_INTERVAL)
  inbox     inspect the provider inbox: searchd inbox show --provider P --delivery-id ID
            [--json], or searchd inbox list [--provider P] [--status S] [--limit N] [--json]
  runs      the hand-off of Runs to the runtime: searchd runs dispatch list [--state failed|pending]
            [--org UUID] [--limit N] [--json], or searchd runs dispatch retry --run UUID
            --reason TEXT [--actor WHO] (a failed dispatch alone)
  keys      service keys of an organization: searchd keys create --org UUID --name N
            --scope S [--scope S] [--expires-in 720h] | list --org UUID [--json] |
            revoke --org UUID --id UUID [--actor WHO]; create prints the token once
  version   print the version, commit and Go version of this binary
  settings  print every setting with its default and values: an example env file
            (searchd settings --format markdown: the reference, docs/settings.md)
  help      print this text

Every setting has a flag, which wins, and an environment variable; secrets
have the variable alone. searchd <command> --help lists a command's settings
with their flags, variables, defaults, values and meanings; searchd settings
prints all of them as an example env file (searchd.example.env), and
docs/settings.md is the reference.
`

// usage is the text of searchd help: the commands, then every variable
// with its default, from [settingsTable].
func usage() string {
	var b strings.Builder
	b.WriteString(usageHead)
	b.WriteString("\nenvironment (default; dev's when it differs):\n")
	for _, s := range allSettings() {
		def := s.defaults(func(dev bool) string { return plain(s.defaultText(dev)) })
		if len(s.env) > 38 {
			fmt.Fprintf(&b, "  %s\n  %-38s %s\n", s.env, "", def)
			continue
		}
		fmt.Fprintf(&b, "  %-38s %s\n", s.env, def)
	}
	return b.String()
}

// run runs the command line args and returns the exit status.
func (a *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.stderr, usage())
		return 2
	}
	help := func(context.Context, []string) error {
		fmt.Fprint(a.stdout, usage())
		return nil
	}
	commands := map[string]func(context.Context, []string) error{
		"migrate": a.migrate, "serve": a.serve, "token": a.token, "dev": a.dev, "claims": a.claims, "sweep": a.sweep,
		"inbox": a.inbox, "runs": a.runs, "keys": a.keys, "version": a.printVersion, "settings": a.settings,
		"help": help, "-h": help, "-help": help, "--help": help,
	}
	err := usagef("unknown command %q; run `searchd help`", args[0])
	if cmd, ok := commands[args[0]]; ok {
		err = cmd(ctx, args[1:])
	}
	if err == nil || errors.Is(err, errHelp) {
		return 0
	}
	fmt.Fprintf(a.stderr, "searchd: %v\n", err)
	if errors.As(err, new(*usageError)) {
		return 2
	}
	return 1
}

// flagSet returns a flag set for a subcommand that reports its errors as
// usage errors rather than exiting, with the flags of c's settings and its
// --help (see [registerOptions]) unless c is the zero command.
func (a *app) flagSet(name string, c command) *flag.FlagSet {
	fs := flag.NewFlagSet("searchd "+name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	if c != (command{}) {
		registerOptions(fs, c)
	}
	return fs
}

// parse parses args into fs, turning flag errors into usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return &usageError{msg: err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}
