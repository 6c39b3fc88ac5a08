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
	// Actor names who cancelled (the token's sub), recorded with the
	// status change and the cancel; "" records none. At most
	// MaxReporterBytes bytes.
	Actor string
	// Reason says why, for a person, recorded with the cancel and sent to
	// the runtime; "" for none. At most MaxCancelReasonLen characters.
	Reason string
}

// Validate checks c and returns nil, or an error of kind errs.Invalid
// wrapping [ErrInvalid] whose fields name each refused member as the API
// spells it: reason (and actor, which the API sets itself).
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

// Cancel cancels Run id of org and returns the Run as it is afterwards.
//
// A Run not yet handed to the runtime (queued: its dispatch pending, with
// an attempt in flight or not, or failed) is cancelled at once: its
// dispatch is stopped and its status set to cancelled (version + 1, the
// change recorded with c.Actor, as a runtime's report is) in one
// transaction, so no dispatcher delivers it after this commits and the
// Run is never dispatched. If an attempt to deliver it had been made (one
// in flight, or one that got no answer) the runtime may have it, and it
// is sent a cancel request too.
//
// A Run the runtime has (dispatched or running) gets its
// CancelRequestedAt set and a cancel request, a signed message package
// dispatch delivers to the runtime at least once; the Run stays as it is
// until the runtime reports it cancelled (or succeeded or failed: a Run
// that finishes anyway keeps how it finished).
//
// Cancel is idempotent: a Run cancelled already, or whose cancel was
// requested already, is answered as it is and nothing is written or sent
// again (the first cancel's actor and reason stay).
//
// Errors: an error wrapping [ErrInvalid] for a request
// [CancelRequest.Validate] refuses; [ErrNotFound] when org has no Run id;
// a [*FinishedError] for a Run that succeeded or failed. Other errors
// come from the database; a retry is safe.
func (s *Store) Cancel(ctx context.Context, org, id uuid.UUID, c CancelRequest) (_ *Run, err error) {
	defer dberr.Annotate(&err)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	args := pgx.StrictNamedArgs{"org": org, "id": id, "now": s.nowArg()}
	var run *Run
	err = sendInTx(ctx, s.db, func(b *pgx.Batch) {
		b.Queue(runDispatchStop, pgx.StrictNamedArgs{"org": org, "id": id})
		// The status change of a runtime's report, and its record: one
		// path for every change of a Run's status.
		b.Queue(runStatusSet, pgx.StrictNamedArgs{
			"org": org, "id": id, "status": StatusCancelled, "result_ref": nil,
			"error_code": nil, "error_message": nil, "now": s.nowArg(), "stopped": true,
		})
		b.Queue(statusChangeInsert, pgx.StrictNamedArgs{"org": org, "id": id, "reported_by": sqlarg.Null(c.Actor)})
		// A Run cancelled at once emits run.cancelled in this transaction;
		// a cancel request changes no status and writes nothing here.
		b.Queue(eventInsert, pgx.StrictNamedArgs{"org": org, "id": id})
		b.Queue(runCancelRequest, args)
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
	// A queued Run without a dispatch to stop: admission writes one with
	// every Run, so only a Run admitted before dispatch existed can be so.
	return nil, fmt.Errorf("runs: cancel: the Run is %s and has no dispatch to stop", run.Status)
}
