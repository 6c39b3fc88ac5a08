package runs

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/sqlarg"
)

// Limits of a status report, checked by [StatusReport.Validate] and by the
// table.
const (
	// MaxResultRefBytes bounds a result reference (a URI or name, not the
	// result).
	MaxResultRefBytes = 2048
	// MaxErrorCodeLen bounds an error code, in characters.
	MaxErrorCodeLen = 100
	// MaxErrorMessageLen bounds an error message, in characters.
	MaxErrorMessageLen = 2000
	// MaxReporterBytes bounds a recorded reporter.
	MaxReporterBytes = 255
)

var errorCodePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

// StatusReport is a runtime's report of a Run's status; it sets a value, so
// the same report twice changes nothing.
type StatusReport struct {
	Status string
	// ResultRef names a succeeded Run's result, 1 to MaxResultRefBytes bytes.
	ResultRef string
	// Error is how a failed or cancelled Run ended.
	Error *RunError
	// Reporter is the runtime credential's sub; "" records none.
	Reporter string
}

// Validate returns nil or an error wrapping [ErrInvalid] naming each refused
// field as the API spells it.
func (r StatusReport) Validate() error {
	var fields []errs.Field
	bad := func(name, msg string) { fields = append(fields, errs.Field{Name: name, Message: msg}) }
	switch r.Status {
	case StatusRunning, StatusSucceeded, StatusFailed, StatusCancelled:
	case StatusQueued, StatusDispatched:
		bad("status", "must be running, succeeded, failed or cancelled: "+r.Status+" is searchd's to set")
	default:
		bad("status", "must be running, succeeded, failed or cancelled")
	}
	if r.ResultRef != "" {
		switch {
		case r.Status != StatusSucceeded:
			bad("result_ref", "is allowed only with status succeeded")
		case len(r.ResultRef) > MaxResultRefBytes:
			bad("result_ref", fmt.Sprintf("must be at most %d bytes", MaxResultRefBytes))
		case !storable(r.ResultRef):
			bad("result_ref", "must be UTF-8 text without NUL")
		}
	}
	if r.Error != nil {
		if r.Status != StatusFailed && r.Status != StatusCancelled {
			bad("error", "is allowed only with status failed or cancelled")
		}
		switch c := r.Error.Code; {
		case c == "":
			bad("error.code", "is required")
		case utf8.RuneCountInString(c) > MaxErrorCodeLen:
			bad("error.code", fmt.Sprintf("must be at most %d characters", MaxErrorCodeLen))
		case !errorCodePattern.MatchString(c):
			bad("error.code", "must be lower-case letters, digits, '_', '.' and '-', starting with a letter or digit")
		}
		if m := r.Error.Message; m != nil {
			switch {
			case !storable(*m):
				bad("error.message", "must be UTF-8 text without NUL")
			case utf8.RuneCountInString(*m) > MaxErrorMessageLen:
				bad("error.message", fmt.Sprintf("must be at most %d characters", MaxErrorMessageLen))
			}
		}
	}
	if len(r.Reporter) > MaxReporterBytes || !storable(r.Reporter) {
		bad("reporter", fmt.Sprintf("must be UTF-8 text without NUL, at most %d bytes", MaxReporterBytes))
	}
	if len(fields) == 0 {
		return nil
	}
	return &errs.Error{Kind: errs.Invalid, Message: "runs: invalid status report", Fields: fields, Err: ErrInvalid}
}

func storable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// FinishedError reports a change to a finished Run, which never changes
// (errs.Conflict, run_finished).
type FinishedError struct {
	Status  string
	Version int64
	// Cancel is set when the finished Run met a [Store.Cancel].
	Cancel bool
}

func (e *FinishedError) Error() string {
	return fmt.Sprintf("runs: the Run finished as %s (version %d); a finished Run never changes", e.Status, e.Version)
}

// ErrorKind is errs.Conflict.
func (e *FinishedError) ErrorKind() errs.Kind { return errs.Conflict }

// ErrorCode is run_finished.
func (e *FinishedError) ErrorCode() string { return "run_finished" }

// ErrorDetail says how the Run finished.
func (e *FinishedError) ErrorDetail() string {
	if e.Cancel {
		return "the Run finished as " + e.Status + " before it could be cancelled; a finished Run never changes"
	}
	return "the Run finished as " + e.Status + "; a finished Run never changes, and this report would change it"
}

// CurrentVersion returns Version.
func (e *FinishedError) CurrentVersion() int64 { return e.Version }

// CurrentStatus returns Status.
func (e *FinishedError) CurrentStatus() string { return e.Status }

// Report sets the status of Run id of org to r when that moves it forward:
// to running from queued or dispatched, to a terminal status from any
// non-terminal one. It returns the Run afterwards and whether this report
// changed it; a report that changes nothing is answered, so repeats and
// races change the Run once. Errors: [ErrInvalid], [ErrNotFound], a
// [*FinishedError] for a change to a finished Run. Retrying is safe.
func (s *Store) Report(ctx context.Context, org, id uuid.UUID, r StatusReport) (_ *Run, changed bool, err error) {
	defer dberr.Annotate(&err)
	if err := r.Validate(); err != nil {
		return nil, false, err
	}
	var code, message any // NULL without an error; a nil Message is NULL too
	if r.Error != nil {
		code, message = r.Error.Code, r.Error.Message
	}
	var run *Run
	err = sendInTx(ctx, s.db, func(b *pgx.Batch) {
		b.Queue(runStatusSet, pgx.StrictNamedArgs{
			"org": org, "id": id, "status": r.Status, "result_ref": sqlarg.Null(r.ResultRef),
			"error_code": code, "error_message": message, "now": s.clock.Arg(), "stopped": false,
		}).QueryRow(func(row pgx.Row) error {
			changed, err := scanRun(row)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return translate("report status", err)
			}
			run = changed
			return nil
		})
		b.Queue(statusChangeInsert, pgx.StrictNamedArgs{"org": org, "id": id, "reported_by": sqlarg.Null(r.Reporter)})
		b.Queue(eventInsert, pgx.StrictNamedArgs{"org": org, "id": id})
	})
	if err != nil {
		return nil, false, err
	}
	if run != nil {
		return run, true, nil
	}
	// Nothing changed: the Run tells a repeat from a late report.
	run, err = s.Get(ctx, org, id)
	if err != nil {
		return nil, false, err
	}
	if sameStatus(run, r) {
		return run, false, nil
	}
	if Terminal(run.Status) {
		return nil, false, &FinishedError{Status: run.Status, Version: run.Version}
	}
	// A status never moves back, so the Run cannot be anywhere else.
	return nil, false, fmt.Errorf("runs: report status: the Run is %s, which the report %s should have moved", run.Status, r.Status)
}

func sameStatus(run *Run, r StatusReport) bool {
	if run.Status != r.Status || deref(run.ResultRef) != r.ResultRef || (run.Error == nil) != (r.Error == nil) {
		return false
	}
	if r.Error == nil {
		return true
	}
	return run.Error.Code == r.Error.Code && deref(run.Error.Message) == deref(r.Error.Message) &&
		(run.Error.Message == nil) == (r.Error.Message == nil)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// StatusChange is one status change after admission: the dispatcher's
// (Reporter nil) or a runtime's report.
type StatusChange struct {
	// Version is the version the change made: 2 for the first.
	Version   int64
	Status    string
	ChangedAt time.Time
	Reporter  *string
	ResultRef *string
	Error     *RunError
}

// StatusChanges returns the status changes of Run id of org, oldest first;
// none for an unknown Run.
func (s *Store) StatusChanges(ctx context.Context, org, id uuid.UUID) (_ []StatusChange, err error) {
	defer dberr.Annotate(&err)
	rows, err := s.db.Query(ctx, runStatusChanges, org, id)
	if err != nil {
		return nil, fmt.Errorf("runs: status changes: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (StatusChange, error) {
		var (
			c             StatusChange
			code, message *string
		)
		err := row.Scan(&c.Version, &c.Status, &c.ChangedAt, &c.Reporter, &c.ResultRef, &code, &message)
		c.Error = runError(code, message)
		return c, err
	})
}
