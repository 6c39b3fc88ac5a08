package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/dbdeadline"
)

// The client-side bounds of serve and dev on waiting for the database.
// PostgreSQL's statement_timeout and lock_timeout act only when the server
// hears a statement; a database that is unreachable without refusing
// connections (a partition, a network or a proxy that accepts and never
// answers: a blackholed primary) answers nothing, and without these a
// request would wait for as long as its client does, each holding a pool
// connection, and the applier and sweeper forever.
const (
	// EnvDBConnectTimeout bounds establishing a database connection.
	EnvDBConnectTimeout = "SEARCHD_DB_CONNECT_TIMEOUT"
	// EnvDBAnswerTimeout bounds waiting for any one answer of the
	// database: a statement's, a batch's, a commit's, a pool connection.
	EnvDBAnswerTimeout = "SEARCHD_DB_ANSWER_TIMEOUT"
)

// Defaults and limits. The answer timeout is the statement timeout's
// default and 5 s more: PostgreSQL ends a statement that runs longer
// itself and says so, so no answer by then means the database is not
// there.
const (
	DefaultDBConnectTimeout = 5 * time.Second
	DefaultDBAnswerTimeout  = DefaultStatementTimeout + 5*time.Second
	maxDBConnectTimeout     = time.Minute
	maxDBAnswerTimeout      = time.Hour
)

// dbWait are the client-side bounds; zero is none.
type dbWait struct {
	// Connect is pgx's ConnectTimeout, per host; zero keeps the
	// connect_timeout of DATABASE_URL (none when it has none).
	Connect time.Duration
	// Answer is the deadline of every call (dbdeadline.Tracer).
	Answer time.Duration
}

// apply sets the bounds on the pool config pc, keeping the tracer it has.
func (w dbWait) apply(pc *pgxpool.Config) {
	if w.Connect > 0 {
		pc.ConnConfig.ConnectTimeout = w.Connect
	}
	if w.Answer <= 0 {
		return
	}
	deadline := dbdeadline.Tracer{Timeout: w.Answer}
	if pc.ConnConfig.Tracer == nil {
		pc.ConnConfig.Tracer = deadline
		return
	}
	pc.ConnConfig.Tracer = multitracer.New(pc.ConnConfig.Tracer, pgx.QueryTracer(deadline))
}

// dbWaitOptions are the settings above, for --help.
func dbWaitOptions() []option {
	return []option{
		{"db-connect-timeout", EnvDBConnectTimeout, DefaultDBConnectTimeout.String(),
			"the longest a new database connection may take to be established, per host of DATABASE_URL " +
				"(its connect_timeout is used when this is not set), 1s to 1m"},
		{"db-answer-timeout", EnvDBAnswerTimeout, DefaultDBAnswerTimeout.String(),
			"the longest searchd waits for any one answer of the database (a statement, a batch, a commit, a connection " +
				"from the pool) before it counts the database unreachable: the call fails, its connection is closed " +
				"and the request answers 503; 0s for none, up to 1h"},
	}
}

// readDBWaitSettings reads the settings above and returns what is wrong
// with them, one message per setting. An unset connect timeout is the
// default unless DATABASE_URL names a connect_timeout.
func readDBWaitSettings(fs *flag.FlagSet, getenv func(string) string, databaseURL string) (dbWait, []string) {
	var problems []string
	duration := func(fl, env string, def, lo, hi time.Duration, zeroOK bool) time.Duration {
		s := lookup(fs, fl, env, getenv)
		if s.value == "" {
			return def
		}
		d, err := time.ParseDuration(s.value)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %q is not a duration (write it like 5s or 1m)", s.name, s.value))
		case (d != 0 || !zeroOK) && (d < lo || d > hi):
			problems = append(problems, fmt.Sprintf("%s: %s is out of range: from %s to %s", s.name, d, lo, hi))
		default:
			return d
		}
		return def
	}
	w := dbWait{
		Connect: duration("db-connect-timeout", EnvDBConnectTimeout, DefaultDBConnectTimeout, time.Second, maxDBConnectTimeout, false),
		Answer:  duration("db-answer-timeout", EnvDBAnswerTimeout, DefaultDBAnswerTimeout, time.Second, maxDBAnswerTimeout, true),
	}
	if lookup(fs, "db-connect-timeout", EnvDBConnectTimeout, getenv).value == "" {
		if pc, err := pgx.ParseConfig(databaseURL); err == nil && pc.ConnectTimeout > 0 {
			w.Connect = 0 // the URL's connect_timeout stands
		}
	}
	return w, problems
}
