package dberr_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestInterpretClassifiesDriverErrors pins what each driver failure means
// to a caller: retry later (unavailable), the caller's input (invalid), or
// nobody knows (no kind: a 500 at the edge). The driver's error stays
// reachable with errors.As, so a caller that reads the SQLSTATE still can.
func TestInterpretClassifiesDriverErrors(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("store: op: %w", err) }
	errNotFound := errs.New(errs.NotFound, "store: not found")
	tests := []struct {
		name      string
		err       error
		kind      errs.Kind
		transport bool // a failure of the connection, worth resending at once
	}{
		{"connection refused", wrap(&pgconn.ConnectError{}), errs.Unavailable, true},
		// A server's own connection exception: a Citus coordinator that
		// lost its worker under the statement, which may have committed.
		{"connection exception", &pgconn.PgError{Code: "08006"}, errs.Unavailable, true},
		{"too many connections", wrap(&pgconn.PgError{Code: "53300"}), errs.Unavailable, false},
		{"server shutting down", wrap(&pgconn.PgError{Code: "57P01"}), errs.Unavailable, false},
		{"statement timeout", &pgconn.PgError{Code: "57014"}, errs.Unavailable, false},
		{"session ended idle in its transaction", wrap(&pgconn.PgError{Severity: "FATAL", Code: "25P03"}), errs.Unavailable, false},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, errs.Unavailable, false},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, errs.Unavailable, false},
		{"lock not available", &pgconn.PgError{Code: "55P03"}, errs.Unavailable, false},
		{"read-only server (a demoted primary)", wrap(&pgconn.PgError{Code: "25006"}), errs.Unavailable, false},
		// A Citus coordinator that lost a worker inside the commit: the
		// outcome is unknown, so the request is sent again (the message
		// is the one a worker killed under load made, SQLSTATE XX000).
		{"Citus lost a worker inside the commit", wrap(&pgconn.PgError{Code: "XX000",
			Message: "could not commit transaction for shard 102046 on at least one active node"}), errs.Unavailable, true},
		{"Citus lost every placement inside the commit", &pgconn.PgError{Code: "XX000",
			Message: "could not commit transaction on any active node"}, errs.Unavailable, true},
		{"Citus lost a worker a write on several nodes needs", wrap(&pgconn.PgError{Code: "XX000",
			Message: "failure on connection marked as essential: 127.0.0.1:9702"}), errs.Unavailable, true},
		// libpq's message, passed on by Citus when a two-phase commit was
		// cut at its PREPARE TRANSACTION (as make e2e-citus cuts it).
		{"Citus passes on libpq's lost connection", &pgconn.PgError{Code: "XX000",
			Message: "server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally\n\tbefore or while processing the request.\ninvalid socket"},
			errs.Unavailable, true},
		{"another internal error of the server", &pgconn.PgError{Code: "XX000", Message: "cache lookup failed"}, errs.Internal, false},
		{"deadline", wrap(context.DeadlineExceeded), errs.Unavailable, false},
		{"connection closed", wrap(pgconn.ErrConnClosed), errs.Unavailable, true},
		{"cut mid-reply", wrap(io.ErrUnexpectedEOF), errs.Unavailable, true},
		{"network", wrap(&net.OpError{Op: "read", Err: errors.New("reset")}), errs.Unavailable, true},
		{"value PostgreSQL cannot store", wrap(&pgconn.PgError{Code: "22P05"}), errs.Invalid, false},
		{"unique violation nobody translated", &pgconn.PgError{Code: "23505"}, errs.Internal, false},
		{"foreign key violation", wrap(&pgconn.PgError{Code: "23503"}), errs.Internal, false},
		{"no rows", wrap(pgx.ErrNoRows), errs.Internal, true},
		{"canceled by the caller", wrap(context.Canceled), errs.Internal, false},
		{"plain bug", errors.New("nil map"), errs.Internal, true},
		{"a domain error keeps its kind", wrap(errNotFound), errs.NotFound, true},
	}
	for _, tt := range tests {
		got := dberr.Interpret(tt.err)
		if k := errs.KindOf(got); k != tt.kind {
			t.Errorf("%s: KindOf(Interpret(%v)) = %q, want %q", tt.name, tt.err, k, tt.kind)
		}
		if got.Error() != tt.err.Error() {
			t.Errorf("%s: Interpret changed the message to %q", tt.name, got.Error())
		}
		if !errors.Is(got, tt.err) {
			t.Errorf("%s: Interpret(%v) does not wrap it", tt.name, tt.err)
		}
		var pgErr *pgconn.PgError
		if errors.As(tt.err, &pgErr) {
			var again *pgconn.PgError
			if !errors.As(got, &again) || again.Code != pgErr.Code || dberr.Code(got) != pgErr.Code {
				t.Errorf("%s: the SQLSTATE %s is lost after Interpret", tt.name, pgErr.Code)
			}
		}
		if dberr.Transient(tt.err) != (tt.kind == errs.Unavailable) {
			t.Errorf("%s: Transient = %v, want %v", tt.name, dberr.Transient(tt.err), tt.kind == errs.Unavailable)
		}
		if dberr.Transport(tt.err) != tt.transport {
			t.Errorf("%s: Transport = %v, want %v", tt.name, dberr.Transport(tt.err), tt.transport)
		}
	}
	if got := errs.FieldsOf(dberr.Interpret(&pgconn.PgError{Code: "22021"})); len(got) != 1 || got[0] != dberr.UnstorableField {
		t.Errorf("FieldsOf(data exception) = %+v, want [%+v]", got, dberr.UnstorableField)
	}
	if dberr.Interpret(nil) != nil || dberr.Transient(nil) || dberr.Transport(nil) {
		t.Error("nil is classified as a failure")
	}
	var err error
	dberr.Annotate(&err)
	if err != nil {
		t.Errorf("Annotate(nil) = %v", err)
	}
}

// TestInterpretClassifiesRealServerAnswers provokes the answers on a real
// PostgreSQL: a unique violation fails again (no kind), a cancelled
// statement (statement_timeout) may succeed later, and a value the server
// cannot store is the caller's input.
func TestInterpretClassifiesRealServerAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDB(t)
	if _, err := pool.Exec(ctx, `create table dberr_t (id int primary key)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `insert into dberr_t values (1)`); err != nil {
		t.Fatal(err)
	}
	_, dup := pool.Exec(ctx, `insert into dberr_t values (1)`)
	_, bad := pool.Exec(ctx, `select 'not a number'::int`)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `set local statement_timeout = '10ms'`); err != nil {
		t.Fatal(err)
	}
	_, slow := tx.Exec(ctx, `select pg_sleep(1)`)
	_ = tx.Rollback(ctx)
	// A session that may not write, as every session of a standby or of a
	// primary demoted read-only is.
	ro, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ro.Rollback(ctx) }()
	if _, err := ro.Exec(ctx, `set transaction read only`); err != nil {
		t.Fatal(err)
	}
	_, readOnly := ro.Exec(ctx, `insert into dberr_t values (2)`)
	for _, tt := range []struct {
		name string
		err  error
		code string
		kind errs.Kind
	}{
		{"unique violation", dup, "23505", errs.Internal},
		{"invalid text for an integer", bad, "22P02", errs.Invalid},
		{"statement timeout", slow, "57014", errs.Unavailable},
		{"a write in a read-only session", readOnly, "25006", errs.Unavailable},
	} {
		got := dberr.Interpret(tt.err)
		if dberr.Code(got) != tt.code || errs.KindOf(got) != tt.kind {
			t.Errorf("%s: Interpret(%v) = SQLSTATE %q kind %q, want %s %s", tt.name, tt.err, dberr.Code(got), errs.KindOf(got), tt.code, tt.kind)
		}
		if !dberr.Answered(got) || dberr.Transport(got) {
			t.Errorf("%s: an answer of the server reads as a transport failure", tt.name)
		}
	}
	// A server nobody listens on: a connection failure, transient.
	cfg, err := pgx.ParseConfig("postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, refused := pgx.ConnectConfig(cctx, cfg)
	if got := dberr.Interpret(refused); refused == nil || errs.KindOf(got) != errs.Unavailable || !dberr.Transport(got) {
		t.Errorf("Interpret(connect to a closed port: %v) = kind %q, want unavailable and a transport failure", refused, errs.KindOf(got))
	}
}

// TestClosingOnPgErrorClosesAReadOnlyConnection runs each answer on a real
// connection whose config carries the handler over pgx's default: a write
// refused as read-only (25006) closes the connection, so a pool would drop
// it, and still returns its error; another statement error keeps the
// connection; a FATAL error still closes it, as pgx's default does.
func TestClosingOnPgErrorClosesAReadOnlyConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDBURL(t)
	connect := func(t *testing.T) *pgx.Conn {
		t.Helper()
		cfg, err := pgx.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.OnPgError = dberr.ClosingOnPgError(cfg.OnPgError)
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(ctx) })
		return conn
	}
	if _, err := connect(t).Exec(ctx, `create table dberr_ro (id int primary key)`); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, setup, stmt, code string
		closed                  bool
	}{
		{"a write in a read-only session", `set default_transaction_read_only = on`, `insert into dberr_ro values (1)`, "25006", true},
		{"a statement error", ``, `select 'x'::int`, "22P02", false},
		{"a FATAL error (pgx's default)", ``, `select pg_terminate_backend(pg_backend_pid())`, "57P01", true},
	} {
		conn := connect(t)
		if tt.setup != "" {
			if _, err := conn.Exec(ctx, tt.setup); err != nil {
				t.Fatal(err)
			}
		}
		_, err := conn.Exec(ctx, tt.stmt)
		if dberr.Code(err) != tt.code {
			t.Errorf("%s: %s = %v, want SQLSTATE %s", tt.name, tt.stmt, err, tt.code)
		}
		if conn.IsClosed() != tt.closed {
			t.Errorf("%s: connection closed = %v, want %v", tt.name, conn.IsClosed(), tt.closed)
		}
	}
	if _, err := connect(t).Exec(ctx, `insert into dberr_ro values (1)`); err != nil {
		t.Errorf("a write on a new connection: %v", err)
	}
}
