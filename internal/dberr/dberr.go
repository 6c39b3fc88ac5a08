// Package dberr is the one place searchd reads PostgreSQL's errors: which
// failures are transient (the same statement may succeed later), which are
// a failure of the connection rather than an answer of the server, and how
// a store turns them into the domain's error kinds (package errs) at its
// boundary. Every store asks it, so the HTTP edge, which only reads kinds,
// needs no driver, and no two packages disagree on what "retry later"
// means.
package dberr

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/searchd/searchd/errs"
)

// Transient reports whether err says the database could not be used now,
// so that the same request may succeed later: no connection, a lost
// connection, a timeout, a server shutting down or refusing connections,
// a server that refuses writes (a primary demoted under a failover, or a
// standby: SQLSTATE 25006), a transaction the server aborted for a
// conflict the caller did not retry (a serialization failure, a deadlock,
// a lock not available), or a server that lost its own connection to
// where it forwarded the statement (a Citus coordinator; see
// outcomeUnknown). An answer of the server about the statement itself (a
// unique violation, a data exception) is not transient: it fails again.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		switch {
		case outcomeUnknown(pgErr):
			return true
		case strings.HasPrefix(pgErr.Code, "53"), // insufficient resources
			strings.HasPrefix(pgErr.Code, "57"), // operator intervention: shutdown, cancel, timeout
			pgErr.Code == "25P03",               // idle_in_transaction_session_timeout: the session was ended
			pgErr.Code == sqlStateReadOnly,      // read_only_sql_transaction: see sqlStateReadOnly
			pgErr.Code == "40001",               // serialization_failure
			pgErr.Code == "40P01",               // deadlock_detected
			pgErr.Code == "55P03":               // lock_not_available
			return true
		}
		return false
	case errors.As(err, &connectErr),
		pgconn.SafeToRetry(err),
		pgconn.Timeout(err),
		errors.Is(err, pgconn.ErrConnClosed),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF),
		errors.As(err, &netErr):
		return true
	}
	return false
}

// sqlStateReadOnly is read_only_sql_transaction: a write sent to a session
// that may not write (the server is a standby, or a primary made read-only
// as it was demoted). Every later write on that connection fails the same
// way, while a new connection may reach the new primary (a multi-host URL
// with target_session_attrs=read-write skips a read-only server).
const sqlStateReadOnly = "25006"

// ClosingOnPgError returns a [pgconn.PgErrorHandler] for a pool's
// connection config (pgconn.Config.OnPgError) that closes the connection
// on a read-only error (SQLSTATE 25006), and otherwise answers what next answers (pgx's
// default closes on FATAL errors; a nil next keeps every other
// connection). A closed connection is dropped by its pool when released,
// so the next acquire connects afresh, to whichever server is the primary
// then. The statement still returns its error, which [Interpret] makes
// unavailable (503).
func ClosingOnPgError(next pgconn.PgErrorHandler) pgconn.PgErrorHandler {
	return func(conn *pgconn.PgConn, pgErr *pgconn.PgError) bool {
		if pgErr.Code == sqlStateReadOnly {
			return false
		}
		return next == nil || next(conn, pgErr)
	}
}

// Answered reports whether err is an answer of the server (a PostgreSQL
// error) that the statement ran, or was refused, and failed as a whole, so
// it wrote nothing. A failure without one (a cut connection, a timeout)
// may have committed with only its reply lost, and so may the statement
// behind an answer that does not know ([outcomeUnknown]).
func Answered(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && !outcomeUnknown(pgErr)
}

// outcomeUnknown reports whether pgErr is an answer of a server that
// forwarded the statement and lost its own connection to where it ran, so
// that it cannot know whether the statement wrote: a Citus coordinator
// that lost a worker. It says so with a connection exception (class 08)
// or with the catch-all SQLSTATE XX000 and one of the messages of
// citusLostWorker. The caller may take the writes neither as done nor as
// undone: the same request must be sent again and find out (a fenced,
// idempotent write does).
func outcomeUnknown(pgErr *pgconn.PgError) bool {
	if strings.HasPrefix(pgErr.Code, "08") {
		return true
	}
	return pgErr.Code == "XX000" && slices.ContainsFunc(citusLostWorker, func(prefix string) bool {
		return strings.HasPrefix(pgErr.Message, prefix)
	})
}

// citusLostWorker begins the messages of a Citus coordinator's XX000
// errors that say it lost a worker under a transaction, as Citus 13 and
// libpq word them: Citus's own, for the COMMIT it sends a worker after
// committing its own part and for a transaction on several nodes, and
// libpq's, which Citus passes on under XX000 when a worker's connection
// breaks under a statement (seen when a two-phase commit was cut at its
// PREPARE TRANSACTION).
var citusLostWorker = []string{
	"could not commit transaction", // "… for shard N on at least one active node", "… on any active node"
	"failure on connection marked as essential",
	"server closed the connection unexpectedly",
	"could not receive data from server",
	"could not send data to server",
	"connection not open",
	"no connection to the server",
	"lost synchronization with server",
	"SSL SYSCALL error",
}

// Transport reports whether err is a failure of the connection rather than
// an answer of the server that the statement wrote nothing ([Answered]),
// and not the caller giving up (its context canceled or past its
// deadline): a fenced, idempotent statement that failed so is worth
// sending again at once, on another connection.
func Transport(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return !Answered(err)
}

// Code returns the SQLSTATE of the PostgreSQL error in err's chain, or ""
// when there is none.
func Code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// DataException reports whether err is a PostgreSQL data exception (class
// 22): a value the statement carried that PostgreSQL cannot store.
func DataException(err error) bool {
	return strings.HasPrefix(Code(err), "22")
}

// UnstorableField is the [errs.Field] of a data exception: the input holds
// a value PostgreSQL cannot store, at a place the store cannot name.
var UnstorableField = errs.Field{Name: "", Message: "holds a value that cannot be stored"}

// Interpret translates err at a store's boundary into the domain's kinds,
// keeping err wrapped (errors.Is and errors.As still reach the driver's
// error):
//   - nil, and an error that has a kind already, are returned unchanged;
//   - a [Transient] error becomes an [errs.Unavailable];
//   - a [DataException] becomes an [errs.Invalid] naming [UnstorableField]:
//     input the store's own checks should have refused first, still the
//     caller's input, never a failure of the service;
//   - anything else is returned unchanged: [errs.Internal].
func Interpret(err error) error {
	if err == nil {
		return nil
	}
	if k := errs.KindOf(err); k != errs.Internal {
		return err
	}
	switch {
	case Transient(err):
		return errs.Wrap(errs.Unavailable, err)
	case DataException(err):
		return &errs.Error{Kind: errs.Invalid, Fields: []errs.Field{UnstorableField}, Err: err}
	}
	return err
}

// Annotate is [Interpret] for a deferred call on a named error result:
//
//	func (s *Store) Get(ctx context.Context, id uuid.UUID) (_ *Thing, err error) {
//		defer dberr.Annotate(&err)
func Annotate(errp *error) {
	*errp = Interpret(*errp)
}
