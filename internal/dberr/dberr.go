// Package dberr classifies PostgreSQL errors in one place: which are
// transient, which are connection failures rather than server answers, and
// how a store turns them into the kinds of package errs, so the HTTP edge
// needs no driver.
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

// Transient reports whether the same request may succeed later: a
// connection failure or timeout, a server shutting down, read-only (a
// demoted primary or standby), or aborting for serialization, deadlock or
// lock_not_available, or a Citus coordinator that lost a worker. Errors
// about the statement itself (unique violation, data exception) are not
// transient.
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

// sqlStateReadOnly is read_only_sql_transaction. Every later write on the
// connection fails the same way, while a new connection may reach the new
// primary (with target_session_attrs=read-write).
const sqlStateReadOnly = "25006"

// ClosingOnPgError returns a pgconn.Config.OnPgError handler that closes
// the connection on a read-only error (SQLSTATE 25006), so the pool
// reconnects to the current primary, and otherwise defers to next (nil
// keeps the connection). The statement still fails, as Unavailable.
func ClosingOnPgError(next pgconn.PgErrorHandler) pgconn.PgErrorHandler {
	return func(conn *pgconn.PgConn, pgErr *pgconn.PgError) bool {
		if pgErr.Code == sqlStateReadOnly {
			return false
		}
		return next == nil || next(conn, pgErr)
	}
}

// Answered reports whether err is a PostgreSQL error saying the statement
// failed as a whole and wrote nothing. Without one (a cut connection, a
// timeout) the statement may have committed with only its reply lost.
func Answered(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && !outcomeUnknown(pgErr)
}

// outcomeUnknown reports whether pgErr comes from a server that lost its
// connection to where the statement ran (a Citus coordinator that lost a
// worker: class 08, or XX000 with a citusLostWorker message), so whether
// it wrote is unknown; only resending an idempotent write finds out.
func outcomeUnknown(pgErr *pgconn.PgError) bool {
	if strings.HasPrefix(pgErr.Code, "08") {
		return true
	}
	return pgErr.Code == "XX000" && slices.ContainsFunc(citusLostWorker, func(prefix string) bool {
		return strings.HasPrefix(pgErr.Message, prefix)
	})
}

// citusLostWorker are prefixes of Citus 13's XX000 messages (its own and
// libpq's, passed on) saying a worker was lost under a transaction.
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

// Transport reports whether err is a connection failure, neither
// [Answered] nor the caller's context ending: an idempotent statement is
// worth resending at once on another connection.
func Transport(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return !Answered(err)
}

// Code returns the SQLSTATE of the PostgreSQL error in err's chain, or "".
func Code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// UnstorableField is the [errs.Field] [Interpret] gives a data exception.
var UnstorableField = errs.Field{Name: "", Message: "holds a value that cannot be stored"}

// Interpret wraps err in a domain kind at a store's boundary: a
// [Transient] error becomes [errs.Unavailable], a data exception (class
// 22) becomes [errs.Invalid] with [UnstorableField] (bad input the store's
// checks missed, not a 500). Nil, errors that already have a kind, and the
// rest are returned unchanged.
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
	case strings.HasPrefix(Code(err), "22"):
		return &errs.Error{Kind: errs.Invalid, Fields: []errs.Field{UnstorableField}, Err: err}
	}
	return err
}

// Annotate applies [Interpret] to *errp: defer dberr.Annotate(&err).
func Annotate(errp *error) {
	*errp = Interpret(*errp)
}
