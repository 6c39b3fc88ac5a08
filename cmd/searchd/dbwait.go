package main

import (
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/dbdeadline"
)

// The client-side bound of serve and dev on waiting for the database.
// PostgreSQL's statement_timeout and lock_timeout act only when the server
// hears a statement; a database that is unreachable without refusing
// connections (a partition, a network or a proxy that accepts and never
// answers: a blackholed primary) answers nothing, and without this a
// request would wait for as long as its client does, each holding a pool
// connection, and the applier and sweeper forever.
//
// There is no connect timeout of searchd's own (DATABASE_URL's
// connect_timeout still applies): the pool makes a new connection in the
// background, and a request waits for a connection from the pool at most
// the answer timeout. A connect timeout would abandon connections that
// are slow to be made, and under overload, when every connection is slow
// to be made (a burst of them after the network was cut, on a machine
// whose processors are saturated), every attempt would be abandoned and
// the pool would never fill again: the fault suite saw that with two CPU
// hogs beside it.
const envDBAnswerTimeout = "SEARCHD_DB_ANSWER_TIMEOUT"

// defaultDBAnswerTimeout is the statement timeout's default, 15 s, and 5 s
// more: PostgreSQL ends a statement that runs longer itself and says so,
// so no answer by then means the database is not there.
const defaultDBAnswerTimeout = 20 * time.Second

// dbWait is the client-side bound; zero is none.
type dbWait struct {
	// Answer is the deadline of every call (dbdeadline.Tracer).
	Answer time.Duration
}

// apply sets the bound on the pool config pc, keeping the tracer it has.
func (w dbWait) apply(pc *pgxpool.Config) {
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

// runtimeParams returns the bounds as the startup parameters of a session.
func (b sessionBounds) runtimeParams() map[string]string {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	return map[string]string{
		"idle_in_transaction_session_timeout": ms(b.IdleInTransaction),
		"lock_timeout":                        ms(b.Lock),
		"statement_timeout":                   ms(b.Statement),
	}
}
