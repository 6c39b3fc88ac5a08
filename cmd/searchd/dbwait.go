package main

import (
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/dbdeadline"
)

// The client-side bound on waiting for the database: statement_timeout
// and lock_timeout act only when the server hears a statement, and an
// unreachable database that does not refuse connections (a blackholed
// primary) answers nothing, so without it each request would hold a pool
// connection for as long as its client waits. There is no connect timeout
// of searchd's own (DATABASE_URL's connect_timeout applies): under
// overload every connection is slow to be made, and a connect timeout
// would abandon each attempt so the pool never fills again.
const envDBAnswerTimeout = "SEARCHD_DB_ANSWER_TIMEOUT"

// defaultDBAnswerTimeout is the statement timeout's default, 15 s, and 5 s
// more: PostgreSQL ends a statement that runs longer itself and says so,
// so no answer by then means the database is not there.
const defaultDBAnswerTimeout = 20 * time.Second

// applyAnswerTimeout sets the bound d, the deadline of every call
// (dbdeadline.Tracer), on the pool config pc, keeping the tracer it has;
// zero is none.
func applyAnswerTimeout(pc *pgxpool.Config, d time.Duration) {
	if d <= 0 {
		return
	}
	deadline := dbdeadline.Tracer{Timeout: d}
	if pc.ConnConfig.Tracer == nil {
		pc.ConnConfig.Tracer = deadline
		return
	}
	pc.ConnConfig.Tracer = multitracer.New(pc.ConnConfig.Tracer, pgx.QueryTracer(deadline))
}

// runtimeParams returns the bounds as the startup parameters of a session.
func (b sessionBounds) runtimeParams() map[string]string {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	return map[string]string{
		"idle_in_transaction_session_timeout": ms(b.IdleInTransaction),
		"lock_timeout":                        ms(b.Lock),
		"statement_timeout":                   ms(b.Statement),
	}
}
