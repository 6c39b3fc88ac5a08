package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/api"
	"github.com/searchd/searchd/idempotency"
)

// Environment variables of the settings added with waiting and the pool.
const (
	// EnvDBMaxConns sizes the database pool of serve and dev.
	EnvDBMaxConns = "SEARCHD_DB_MAX_CONNS"
	// EnvMaxPreferWait is the longest Prefer: wait a start honours.
	EnvMaxPreferWait = "SEARCHD_MAX_PREFER_WAIT"
	// EnvSavedSearchLease is the lease of a saved-search preparation.
	EnvSavedSearchLease = "SEARCHD_SAVED_SEARCH_LEASE"
)

// Defaults and limits of the pool settings.
const (
	// DefaultDBMaxConns sizes the pool when neither the setting nor the
	// URL's pool_max_conns does. A start is a few short statements and a
	// commit, and a commit waits for its WAL flush (fsync) with no CPU
	// used on either side, so the work is bound by commit latency, not by
	// cores: connections beyond the CPU count keep the CPUs busy while
	// others wait on the disk, and PostgreSQL flushes the commits waiting
	// together in one fsync (group commit). pgx's max(4, CPUs) left a
	// 2-core server at 4, which four slow requests of one tenant filled.
	DefaultDBMaxConns = 16
)

// Defaults and limits of those settings.
const (
	// DefaultMaxPreferWait is the ceiling the API allows.
	DefaultMaxPreferWait = api.PreferWaitLimit
	// DefaultSavedSearchLease is the seed's lease, which the product keeps.
	DefaultSavedSearchLease = idempotency.SavedSearchStartLease
	// MaxSavedSearchLease bounds the saved-search lease. A preparation is
	// one short transaction, so the lease matters only after a crash: it is
	// how long the crashed replica's claim blocks every retry of its key.
	// The retention is raised to a longer lease, so without this bound one
	// crash could block a key for the plane's MaxLease of 30 days. Five
	// minutes is ten times the seed's 30 s.
	MaxSavedSearchLease = 5 * time.Minute
	maxDBMaxConns       = 1000
)

// option is one setting of a command: the flag and the environment
// variable it is read from (a flag given on the command line wins), its
// default as --help shows it, and what it means. Every setting has both,
// but for secrets, which have no flag: a flag's value is in the process
// list (ps, /proc/<pid>/cmdline) for every local user to read.
//
// A new setting is one entry in [serverOptions] (or the command's list)
// and its parsing in the command's loader, which names the setting in
// every message through [lookup].
type option struct {
	flag string // without dashes; "" for an environment-only secret
	env  string
	def  string
	help string
}

// Options shared by several commands.
var (
	optDatabaseURL = option{"database-url", EnvDatabaseURL, "required",
		"PostgreSQL connection string, such as postgres://user@host:5432/searchd; pgx settings such as " +
			"pool_max_conns may be added to it. As a flag it must hold no password (ps shows flags): " +
			"use the variable, PGPASSWORD or a ~/.pgpass file"}
	optLogLevel         = option{"log-level", EnvLogLevel, "info", "debug, info, warn or error"}
	optLogFormat        = option{"log-format", EnvLogFormat, "json", "json or text"}
	optTokenMaxLifetime = option{"token-max-lifetime", EnvTokenMaxLifetime, DefaultTokenMaxLifetime.String(),
		fmt.Sprintf("longest a bearer token may live, HS256 or the provider's: exp − iat, and exp − now, at most this "+
			"(a longer token is refused); %s to %s", minTokenMaxLifetime, maxTokenMaxLifetime)}
	optJWTSecret = option{"", EnvJWTSecret, "required",
		"HS256 secret the bearer tokens are signed with, at least 32 bytes (openssl rand -base64 48)"}
)

// serverOptions are the settings of serve, or of dev when dev is true:
// dev changes some defaults and adds its own.
func serverOptions(dev bool) []option {
	db, addr, secret, format := optDatabaseURL, option{"addr", EnvAddr, DefaultAddr, "address to listen on, host:port"}, optJWTSecret, optLogFormat
	secret.def = "required unless " + EnvOIDCIssuer + " is set"
	if dev {
		db.def = "none: run a local cluster"
		addr.def = DefaultDevAddr
		secret.def = "generated, kept in the dev directory"
		format.def = "text"
	}
	opts := []option{
		db,
		{"db-max-conns", EnvDBMaxConns, "pool_max_conns of the URL, else " + strconv.Itoa(DefaultDBMaxConns),
			fmt.Sprintf("most connections in the database pool, 1 to %d; with waiting on, one more listens for claims, "+
				"and /readyz checks on one more of its own", maxDBMaxConns)},
		addr,
		secret,
		{"", EnvProviderSecrets, "none",
			"secrets provider callbacks are signed with (Standard Webhooks): acme=secret1,other=whsec_BASE64 (names lower-case " +
				"dotted identifiers; a secret is its raw bytes, or after whsec_ its base64 key)"},
		{"shutdown-grace", EnvShutdownGrace, DefaultShutdownGrace.String(),
			"on SIGTERM or SIGINT, how long requests in flight may finish before they are cancelled (their claims released), 0s to 1h"},
		{"max-body-bytes", EnvMaxBodyBytes, strconv.Itoa(api.DefaultMaxBodyBytes),
			fmt.Sprintf("largest request body, %d to %d bytes", minMaxBodyBytes, maxMaxBodyBytes)},
		{"callback-max-body-bytes", EnvCallbackMaxBodyBytes, "1048576, or the body limit when lower",
			fmt.Sprintf("largest provider callback body, %d bytes to the body limit: anyone can send a callback, "+
				"and its body is held until its signature is checked", minMaxBodyBytes)},
		{"callback-body-budget", EnvCallbackBodyBudget, "67108864, or twice the callback limit when more",
			fmt.Sprintf("most bytes all callback bodies awaiting their signature check hold together, from twice the callback limit "+
				"to %d; a body it cannot take answers 503 unavailable at once, unread; bodies over 64 KiB share three quarters of it",
				int64(maxCallbackBodyBudget))},
		{"callback-body-timeout", EnvCallbackBodyTimeout, api.DefaultCallbackBodyTimeout.String(),
			fmt.Sprintf("longest a callback body may take to arrive after its headers, %s to %s; a slower one answers 503 unavailable",
				minCallbackBodyTimeout, maxCallbackBodyTimeout)},
		{"max-prefer-wait", EnvMaxPreferWait, DefaultMaxPreferWait.String(),
			"longest Prefer: wait=N a start honours (a longer N is cut to it), whole seconds from 0s (never wait) to 30s"},
		{"saved-search-lease", EnvSavedSearchLease, DefaultSavedSearchLease.String(),
			"lease of a saved-search preparation: how long a start waits before it reclaims the key of a crashed replica, " +
				"more than 0s and at most " + MaxSavedSearchLease.String() + " (the limit of a saved-search lease); for tests and tuning; the seed's value is 30 s"},
		optCORSOrigins,
		optSweepInterval,
		optSweepJitter,
	}
	opts = append(opts, sweepBoundOptions()...)
	opts = append(opts, inboxOptions()...)
	opts = append(opts, dispatchOptions()...)
	opts = append(opts, admissionOptions()...)
	opts = append(opts, scheduleOptions()...)
	opts = append(opts, authOptions(dev)...)
	opts = append(opts, optLogLevel, format)
	if dev {
		opts = append(opts,
			option{"dev-dir", EnvDevDir, "./" + DefaultDevDir, "directory of the local cluster, its log and the dev secret"},
			option{"pg-bin", EnvPGBin, "searched: pg_config --bindir, /usr/lib/postgresql/*/bin, PATH", "directory of initdb and postgres"})
	}
	return opts
}

// command describes a subcommand for its --help.
type command struct {
	usage   string // "searchd serve [flags]"
	about   string
	options []option
}

var (
	serveCommand = command{"searchd serve [flags]",
		"Serve the HTTP API until SIGTERM or SIGINT, then drain (see --shutdown-grace).",
		serverOptions(false)}
	devCommand = command{"searchd dev [flags]",
		"Run locally: PostgreSQL under the dev directory (unless DATABASE_URL is set), migrations, demo data, a token, the API.",
		serverOptions(true)}
	migrateCommand = command{"searchd migrate [flags]",
		"Apply the database migrations and print the versions applied.",
		[]option{optDatabaseURL}}
	tokenCommand = command{"searchd token --org UUID [--sub S] [--ttl 1h] | searchd token --operator --sub NAME [--org UUID] | searchd token --runtime --org UUID --sub NAME",
		"Print an HS256 bearer token for the organization, signed with the secret the server verifies with. " +
			"With --operator, print an operator's token instead: the role claim \"operator\" opens the console's " +
			"operator views (every organization's claims, force-release, the sweeper's runs), which an " +
			"organization's token never reaches; --sub names the operator, recorded with every release. " +
			"With --runtime, print a runtime credential of the organization: the role claim \"runtime\" opens " +
			"PUT /v1/runs/{id}/status (status reports) and nothing else, and no other token opens that route; " +
			"--sub names the runtime, recorded with every status change it reports.",
		[]option{optJWTSecret, optTokenMaxLifetime}}
)

// registerOptions adds a string flag for every option of c that has one,
// and makes --help print c's usage, its own flags and every setting.
func registerOptions(fs *flag.FlagSet, c command) {
	settingFlags := map[string]bool{}
	for _, o := range c.options {
		if o.flag != "" {
			fs.String(o.flag, "", o.help)
			settingFlags[o.flag] = true
		}
	}
	fs.Usage = func() { printUsage(fs, c, settingFlags) }
}

// printUsage writes c's help: the flags of the command itself (registered
// on fs besides the settings), then every setting with its flag, its
// variable, its default and its meaning.
func printUsage(fs *flag.FlagSet, c command, settingFlags map[string]bool) {
	w := fs.Output()
	fmt.Fprintf(w, "usage: %s\n\n", c.usage)
	for _, line := range wrap(c.about, 78) {
		fmt.Fprintln(w, line)
	}
	var own []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !settingFlags[f.Name] {
			own = append(own, f)
		}
	})
	if len(own) > 0 {
		fmt.Fprintf(w, "\nflags:\n")
		for _, f := range own {
			def := ""
			if f.DefValue != "" && f.DefValue != "false" {
				def = " (default " + f.DefValue + ")"
			}
			fmt.Fprintf(w, "  --%s%s\n        %s\n", f.Name, def, f.Usage)
		}
	}
	if len(c.options) > 0 {
		fmt.Fprintf(w, "\nsettings: a flag given wins over its environment variable\n")
		for _, o := range c.options {
			printOption(w, o)
		}
	}
}

func printOption(w io.Writer, o option) {
	name := "--" + o.flag + ", " + o.env
	if o.flag == "" {
		name = o.env + " (environment only: a secret)"
	}
	fmt.Fprintf(w, "  %s\n        default: %s\n", name, o.def)
	for _, line := range wrap(o.help, 70) {
		fmt.Fprintf(w, "        %s\n", line)
	}
}

// wrap breaks text into lines of at most width bytes, at spaces; a word
// longer than width stands on a line of its own.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// passwordInDSN matches the password keyword of a keyword/value
// connection string.
var passwordInDSN = regexp.MustCompile(`(^|\s)password\s*=`)

// holdsPassword reports whether the connection string dsn carries a
// password, in a URL's user info or query, or as a keyword.
func holdsPassword(dsn string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return strings.Contains(dsn, "@") // unparseable: assume the worst
		}
		_, has := u.User.Password()
		return has || u.Query().Has("password")
	}
	return passwordInDSN.MatchString(dsn)
}

// databaseURLProblem checks the connection string a setting holds and
// returns what is wrong with it, or "". None of the messages quotes the
// string, which may hold a password.
func databaseURLProblem(s setting) string {
	if _, err := pgxpool.ParseConfig(s.value); err != nil {
		// The parser's message may quote the string, password and all.
		return "is not a valid PostgreSQL connection string (postgres://user:password@host:port/database)"
	}
	if strings.HasPrefix(s.name, "--") && holdsPassword(s.value) {
		return "holds a password, which every local user can read in the process list; set " + EnvDatabaseURL +
			" instead, or give the password in PGPASSWORD or a ~/.pgpass file"
	}
	return ""
}

// readLogSettings reads the log level and format from the flags on fs and
// the environment, dev choosing text as the default format, and returns
// what is wrong with them, one message per setting.
func readLogSettings(fs *flag.FlagSet, getenv func(string) string, dev bool) (slog.Level, string, []string) {
	var level slog.Level
	var problems []string
	ls := lookup(fs, "log-level", EnvLogLevel, getenv)
	if ls.value != "" {
		if err := level.UnmarshalText([]byte(ls.value)); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %q is not a level: use debug, info, warn or error", ls.name, ls.value))
		}
	}
	fset := lookup(fs, "log-format", EnvLogFormat, getenv)
	format := strings.ToLower(fset.value)
	switch format {
	case "":
		format = "json"
		if dev {
			format = "text"
		}
	case "json", "text":
	default:
		problems = append(problems, fmt.Sprintf("%s: %q is not a log format: use json or text", fset.name, fset.value))
	}
	return level, format, problems
}

// readPoolAndWaitSettings reads --db-max-conns and --max-prefer-wait into
// cfg and returns what is wrong with them.
func readPoolAndWaitSettings(fs *flag.FlagSet, getenv func(string) string, cfg *serverConfig) []string {
	var problems []string
	conns := lookup(fs, "db-max-conns", EnvDBMaxConns, getenv)
	if conns.value != "" {
		n, err := strconv.Atoi(conns.value)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %q is not a whole number of connections", conns.name, conns.value))
		case n < 1 || n > maxDBMaxConns:
			problems = append(problems, fmt.Sprintf("%s: %d is out of range: from 1 to %d", conns.name, n, maxDBMaxConns))
		default:
			cfg.DBMaxConns = int32(n)
		}
	}
	wait := lookup(fs, "max-prefer-wait", EnvMaxPreferWait, getenv)
	cfg.MaxPreferWait = DefaultMaxPreferWait
	if wait.value != "" {
		d, err := time.ParseDuration(wait.value)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %q is not a duration (write it like 30s, or 0s to never wait)", wait.name, wait.value))
		case d < 0 || d > api.PreferWaitLimit || d%time.Second != 0:
			problems = append(problems, fmt.Sprintf("%s: %s is out of range: whole seconds from 0s to %s", wait.name, d, api.PreferWaitLimit))
		default:
			cfg.MaxPreferWait = d
		}
	}
	return problems
}
