package runs

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/sqlarg"
)

// MaxCancelReasonLen bounds the reason of a cancel, in characters.
const MaxCancelReasonLen = 500

// CancelRequest is a caller's cancel of a Run.
type CancelRequest struct {
	// Actor is the token's sub, at most MaxReporterBytes; "" records none.
	Actor string
	// Reason is sent to the runtime, at most MaxCancelReasonLen characters;
	// "" for none.
	Reason string
}

// Validate returns nil or an error wrapping [ErrInvalid] naming each refused
// field as the API spells it.
func (c CancelRequest) Validate() error {
	var fields []errs.Field
	if !storable(c.Reason) || utf8.RuneCountInString(c.Reason) > MaxCancelReasonLen {
		fields = append(fields, errs.Field{Name: "reason",
			Message: fmt.Sprintf("must be UTF-8 text without NUL, at most %d characters", MaxCancelReasonLen)})
	}
	if len(c.Actor) > MaxReporterBytes || !storable(c.Actor) {
		fields = append(fields, errs.Field{Name: "actor",
			Message: fmt.Sprintf("must be UTF-8 text without NUL, at most %d bytes", MaxReporterBytes)})
	}
	if len(fields) == 0 {
		return nil
	}
	return &errs.Error{Kind: errs.Invalid, Message: "runs: invalid cancel", Fields: fields, Err: ErrInvalid}
}

// Cancel cancels Run id of org and returns the Run afterwards. A Run the
// runtime does not have yet is cancelled at once, its dispatch stopped in the
// same transaction; a Run the runtime has (or may have, after an attempt)
// gets CancelRequestedAt and a cancel request delivered at least once, and
// keeps its status until the runtime reports. A repeat writes and sends
// nothing. Errors: [ErrInvalid], [ErrNotFound], a [*FinishedError] for a
// Run that succeeded or failed. Retrying is safe.
func (s *Store) Cancel(ctx context.Context, org, id uuid.UUID, c CancelRequest) (_ *Run, err error) {
	defer dberr.Annotate(&err)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var run *Run
	err = sendInTx(ctx, s.db, func(b *pgx.Batch) {
		b.Queue(runDispatchStop, pgx.StrictNamedArgs{"org": org, "id": id})
		b.Queue(runStatusSet, pgx.StrictNamedArgs{
			"org": org, "id": id, "status": StatusCancelled, "result_ref": nil,
			"error_code": nil, "error_message": nil, "now": s.clock.Arg(), "stopped": true,
		})
		b.Queue(statusChangeInsert, pgx.StrictNamedArgs{"org": org, "id": id, "reported_by": sqlarg.Null(c.Actor)})
		// Only a Run cancelled at once emits run.cancelled.
		b.Queue(eventInsert, pgx.StrictNamedArgs{"org": org, "id": id})
		b.Queue(runCancelRequest, pgx.StrictNamedArgs{"org": org, "id": id, "now": s.clock.Arg()})
		b.Queue(cancelInsert, pgx.StrictNamedArgs{"org": org, "id": id,
			"requested_by": sqlarg.Null(c.Actor), "reason": sqlarg.Null(c.Reason)})
		b.Queue(runGet, org, id).QueryRow(func(row pgx.Row) error {
			r, err := scanRun(row)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return translate("cancel", err)
			}
			run = r
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	switch {
	case run == nil:
		return nil, ErrNotFound
	case run.Status == StatusSucceeded || run.Status == StatusFailed:
		return nil, &FinishedError{Status: run.Status, Version: run.Version, Cancel: true}
	case run.Status == StatusCancelled || run.CancelRequestedAt != nil:
		return run, nil
	}
	// Only Runs admitted before dispatch existed lack one.
	return nil, fmt.Errorf("runs: cancel: the Run is %s and has no dispatch to stop", run.Status)
}
