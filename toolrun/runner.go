package toolrun

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/canonjson"
	"github.com/searchd/searchd/tools"
)

// Decision is what a policy [Checkpoint] answers for a call.
type Decision uint8

const (
	// DecisionAllow: make the call.
	DecisionAllow Decision = iota + 1
	// DecisionNeedsApproval: a person must allow the call first.
	DecisionNeedsApproval
	// DecisionDeny: never make the call.
	DecisionDeny
)

// Checkpoint is the policy a call passes before it is claimed. It is asked
// only for a call the journal holds no answer for. An error it returns is
// returned by [Runner.Execute], and nothing is claimed; so is a Decision
// other than the three above, so that a policy that forgot to decide never
// allows.
type Checkpoint func(ctx context.Context, c Call) (Decision, error)

// AllowAll is a [Checkpoint] that allows every call.
func AllowAll(context.Context, Call) (Decision, error) { return DecisionAllow, nil }

// MaxStoredOutput bounds the Output the journal stores: 60 KiB, which leaves
// the rest of the plane's default store limit of 64 KiB
// ([idempotency.DefaultMaxResponseBytes]) to what is stored beside it. A
// larger output is replaced by OutputOmitted, in the live result as in every
// replay, so a replay answers exactly what the live call answered.
//
// The whole stored answer must fit the plane's limit, or the plane would
// store a reference to the resource in its place (and refuse it when the call
// names none): a replay would then answer something the live call never did,
// and a refused completion would leave the claim processing. So the answer is
// fitted before it is stored: the Message is cut first, and the Output is
// omitted only when it does not fit by itself (a plane configured with a
// limit under MaxStoredOutput).
const MaxStoredOutput = 60 << 10

// maxStoredMessage bounds the Message the journal stores.
const maxStoredMessage = 2 << 10

// maxStoredOutcome bounds the Outcome the journal stores: a tool's failure
// code, an identifier.
const maxStoredOutcome = 64

// Config configures a [Runner].
type Config struct {
	// EndingTimeout bounds completing or releasing a claim. The ending runs
	// on a context detached from the caller's, which may be the very reason
	// the call failed; a claim left unended blocks every retry for a lease.
	// Default 5 s.
	EndingTimeout time.Duration
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.EndingTimeout = cmp.Or(c.EndingTimeout, 5*time.Second)
	return c
}

// Runner executes tool calls through the journal. It is safe for concurrent
// use.
type Runner struct {
	plane *idempotency.Service
	cfg   Config
}

// NewRunner returns a runner whose journal is plane.
func NewRunner(plane *idempotency.Service, cfg Config) *Runner {
	return &Runner{plane: plane, cfg: cfg.WithDefaults()}
}

// Call is one tool call of a Run.
type Call struct {
	OrganizationID uuid.UUID
	RunID          uuid.UUID
	Spec           ToolSpec
	Tool           Tool
	// Input is the call's JSON input, as the model wrote it. It is
	// canonicalized for the key and the request hash, and the tool receives
	// the canonical form.
	Input json.RawMessage
	// Occurrence is the call's occurrence among identical calls of the Run,
	// from 1; see [Occurrences].
	Occurrence int
	// ToolCallID is the model's id for the call, passed to the tool for logs
	// and traces. It is never part of the key.
	ToolCallID string
}

// journalKey is where a call lives in the journal.
type journalKey struct {
	scope, key, hash string
	input            json.RawMessage // canonical
}

func (c Call) journalKey() (journalKey, error) {
	if err := c.Spec.Validate(); err != nil {
		return journalKey{}, err
	}
	if c.Tool == nil {
		return journalKey{}, fmt.Errorf("%w: tool %s: Tool is nil", ErrInvalid, c.Spec.Name)
	}
	if c.OrganizationID == uuid.Nil {
		return journalKey{}, fmt.Errorf("%w: organization id is the nil UUID", ErrInvalid)
	}
	canon, err := canonicalCall(c.Spec.Name, c.Input)
	if err != nil {
		return journalKey{}, err
	}
	k, err := key(c.RunID, c.Spec.Name, canon, c.Occurrence)
	if err != nil {
		return journalKey{}, err
	}
	return journalKey{scope: c.Spec.Scope(), key: k, hash: requestHash(c.Spec.Name, canon), input: canon}, nil
}

// Execute makes the call c once for its Run, or answers what the journal
// holds for it.
//
//  1. The journal is read first. A completed call returns its stored
//     answer with Replayed set; neither policy nor the tool is called, so a
//     replay works whatever the policy says now and for the whole tool
//     retention of 30 days.
//  2. policy decides. Needs-approval returns [ErrApprovalRequired] and deny
//     [ErrDenied]; in both cases nothing is written.
//  3. The call is claimed with the lease c.Spec.Lease() and c.Tool is
//     called with a deadline of c.Spec.Timeout, and with the key when the
//     vendor honours one.
//  4. The claim ends. A success or a business failure completes it and is
//     returned as a [Result] (a business failure is a Result that is not
//     OK, with a nil error). A retryable [*ToolError] releases it and is
//     returned as the error. An uncertain one completes it with
//     [OutcomeUncertain], returned as a Result with a nil error: the caller
//     surfaces it and must not retry.
//
// When the call was claimed before by a worker that never ended its claim
// and the lease passed, Execute reclaims it: a tool whose vendor honours the
// key is called again with the same key, and the vendor dedupes; for any
// other tool the first worker may have made the effect, so the call is
// completed as uncertain without calling the tool. A tool that panics leaves
// its claim to the lease in the same way: the panic is not recovered, since
// the call may have had its effect before it.
//
// Errors, each with a zero Result:
//   - an error wrapping [ErrInvalid] for a call that cannot be keyed, before
//     anything is read;
//   - an [*idempotency.InFlightError], matching [ErrClaimInFlight], when
//     another worker holds a live claim on the call; the caller's step must
//     fail and be retried, and must not report a result;
//   - [ErrApprovalRequired] and [ErrDenied] from the checkpoint;
//   - a wrapped retryable [*ToolError]: the claim was released;
//   - an error wrapping [ErrFenceLost]: this worker's lease passed and
//     another reclaimed the call before this one could end it;
//   - an error wrapping [ErrKeyConflict];
//   - the checkpoint's own error, or a database error. A database error
//     while ending a claim leaves it to its lease, and the next attempt
//     after the lease reclaims it as described above.
func (r *Runner) Execute(ctx context.Context, c Call, policy Checkpoint) (Result, error) {
	jk, err := c.journalKey()
	if err != nil {
		return Result{}, err
	}
	if policy == nil {
		return Result{}, fmt.Errorf("%w: tool %s: no policy checkpoint", ErrInvalid, c.Spec.Name)
	}

	out, err := r.plane.Read(ctx, c.OrganizationID, jk.scope, jk.key, jk.hash)
	if err != nil {
		return Result{}, fmt.Errorf("tools: %s: reading the journal: %w", c.Spec.Name, err)
	}
	if out.Kind != idempotency.KindAbsent {
		return settled(out, jk)
	}

	// The checkpoint runs after the read and before the claim: a claim
	// taken for a call a person has not allowed yet would hold the key for
	// a lease and make the approved call meet it in flight.
	decision, err := policy(ctx, c)
	if err != nil {
		return Result{}, fmt.Errorf("tools: %s: policy checkpoint: %w", c.Spec.Name, err)
	}
	switch decision {
	case DecisionAllow:
	case DecisionNeedsApproval:
		return Result{}, fmt.Errorf("%w: %s", ErrApprovalRequired, c.Spec.Name)
	case DecisionDeny:
		return Result{}, fmt.Errorf("%w: %s", ErrDenied, c.Spec.Name)
	default:
		return Result{}, fmt.Errorf("tools: %s: policy checkpoint answered no decision (%d)", c.Spec.Name, decision)
	}

	out, err = r.plane.Claim(ctx, c.OrganizationID, jk.scope, jk.key, jk.hash, c.Spec.Lease())
	if err != nil {
		return Result{}, fmt.Errorf("tools: %s: claiming the call: %w", c.Spec.Name, err)
	}
	if out.Kind != idempotency.KindClaimed {
		return settled(out, jk)
	}
	return r.run(ctx, c, jk, out.Claim)
}

// settled answers an outcome that is not ours to execute: a completed call
// replays, a live claim is in flight, and a conflict is an error.
func settled(out idempotency.Outcome, jk journalKey) (Result, error) {
	switch out.Kind {
	case idempotency.KindCompleted:
		if out.Ref != nil {
			// The Runner fits every answer under the store limit, so some
			// other writer stored this one over it: its body is gone, and a
			// zero Result would report a failure nobody observed.
			return Result{}, fmt.Errorf("tools: %s key %s: the stored answer is a reference to %s %s, not the answer: it was stored over the limit",
				jk.scope, jk.key, out.Ref.Type, out.Ref.ID)
		}
		res, err := tools.DecodeAnswer(out.Response, out.ResourceType, out.ResourceID)
		if err != nil {
			return Result{}, fmt.Errorf("tools: %s key %s: %w", jk.scope, jk.key, err)
		}
		res.Replayed = true
		return res, nil
	case idempotency.KindProcessing:
		return Result{}, out.InFlight(jk.scope, jk.key)
	case idempotency.KindConflict:
		return Result{}, fmt.Errorf("%w: %s key %s", ErrKeyConflict, jk.scope, jk.key)
	}
	return Result{}, fmt.Errorf("tools: %s key %s: the journal answered %s", jk.scope, jk.key, out.Kind)
}

// run makes the call claim owns and ends the claim.
func (r *Runner) run(ctx context.Context, c Call, jk journalKey, claim *idempotency.Claim) (Result, error) {
	if claim.Reclaimed && !c.Spec.VendorIdempotency {
		// The worker that held the claim before ended without a word: it
		// may have crashed before the call, or after the vendor acted.
		// Without a vendor key nothing dedupes a second send, so the honest
		// answer is uncertain, and a person decides.
		return r.complete(ctx, jk, claim, Result{
			Outcome: OutcomeUncertain,
			Message: "an earlier attempt of this call ended without an answer, and the vendor takes no idempotency key: it may have made the call",
		})
	}

	cc := CallContext{
		OrganizationID: c.OrganizationID,
		RunID:          c.RunID,
		Occurrence:     c.Occurrence,
		ToolCallID:     c.ToolCallID,
	}
	if c.Spec.VendorIdempotency {
		cc.IdempotencyKey = jk.key
	}
	callCtx, cancel := context.WithTimeout(ctx, c.Spec.Timeout)
	res, err := c.Tool.Call(callCtx, cc, jk.input)
	cancel()
	if err == nil {
		return r.complete(ctx, jk, claim, res)
	}

	var te *ToolError
	if !errors.As(err, &te) {
		// An error the tool did not classify: nobody knows whether the
		// vendor acted. A vendor that dedupes by the key makes the retry
		// safe; any other makes it a coin flip, so it is uncertain.
		te = &ToolError{Code: "unclassified", Retryable: c.Spec.VendorIdempotency, Uncertain: !c.Spec.VendorIdempotency, Err: err}
		err = te
	}
	switch {
	case te.Uncertain:
		return r.complete(ctx, jk, claim, Result{Outcome: OutcomeUncertain, Message: err.Error()})
	case te.Retryable:
		return Result{}, r.release(ctx, c, jk, claim, err)
	}
	code := te.Code
	if code == "" || code == OutcomeOK || code == OutcomeUncertain {
		code = OutcomeFailed
	}
	return r.complete(ctx, jk, claim, Result{Outcome: code, Message: err.Error()})
}

// complete stores res as the answer of claim and returns what it stored, so
// the live result and every replay answer the same: normalized, and fitted
// to the store limit of the plane the Runner runs on as [MaxStoredOutput]
// says, so that the plane never refuses it nor stores a reference in its
// place. (A plane limit too small for
// {"ok":...,"outcome":...,"output_omitted":true}, some 60 bytes, is the one
// configuration it cannot serve.)
func (r *Runner) complete(ctx context.Context, jk journalKey, claim *idempotency.Claim, res Result) (Result, error) {
	res, body, err := fitAnswer(normalize(res), r.plane.MaxResponseBytes())
	if err != nil {
		return Result{}, fmt.Errorf("tools: %s key %s: encoding the answer: %w", jk.scope, jk.key, err)
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.EndingTimeout)
	defer cancel()
	ok, err := r.plane.Complete(ectx, claim, idempotency.Completion{
		ResourceType: res.ResourceType,
		ResourceID:   res.ResourceID,
		Response:     body,
	})
	if err != nil {
		return Result{}, fmt.Errorf("tools: %s key %s: completing the claim: %w", jk.scope, jk.key, err)
	}
	if !ok {
		return Result{}, fmt.Errorf("%w: %s key %s: the call's answer was not stored", ErrFenceLost, jk.scope, jk.key)
	}
	return res, nil
}

// release deletes claim after the retryable failure cause and returns the
// error Execute answers.
func (r *Runner) release(ctx context.Context, c Call, jk journalKey, claim *idempotency.Claim, cause error) error {
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.EndingTimeout)
	defer cancel()
	ok, err := r.plane.Release(ectx, claim)
	switch {
	case err != nil:
		return fmt.Errorf("tools: %s: %w (releasing the claim: %w)", c.Spec.Name, cause, err)
	case !ok:
		return fmt.Errorf("%w: %s key %s: %w", ErrFenceLost, jk.scope, jk.key, cause)
	}
	return fmt.Errorf("tools: %s: %w", c.Spec.Name, cause)
}

// fitAnswer returns res, changed as little as it takes for its stored form
// to fit limit bytes, and that form. The Output is omitted when the answer
// does not fit even without a message; otherwise the Message is cut to its
// longest prefix that fits (a binary search: a character may take up to six
// bytes once escaped).
func fitAnswer(res Result, limit int) (Result, []byte, error) {
	body, err := tools.EncodeAnswer(res)
	if err != nil || len(body) <= limit {
		return res, body, err
	}
	bare := res
	bare.Message = ""
	b, err := tools.EncodeAnswer(bare)
	if err != nil {
		return res, nil, err
	}
	if len(b) > limit && len(res.Output) > 0 {
		res.Output, res.OutputOmitted = nil, true
		return fitAnswer(res, limit)
	}
	if len(b) > limit {
		return res, nil, fmt.Errorf("an answer of %d bytes does not fit the store limit of %d", len(b), limit)
	}
	msg := res.Message
	// No message fits and the whole one does not: n is the longest prefix
	// shorter than msg that fits.
	n := sort.Search(len(msg)-1, func(i int) bool {
		res.Message = strings.ToValidUTF8(msg[:i+1], "")
		b, err := tools.EncodeAnswer(res)
		return err != nil || len(b) > limit
	})
	res.Message = strings.ToValidUTF8(msg[:n], "")
	body, err = tools.EncodeAnswer(res)
	return res, body, err
}

// normalize makes res storable: an outcome that agrees with OK, an output
// that is valid JSON within [MaxStoredOutput] in canonical form (the form a
// replay decodes too, so both carry the same bytes), a bounded message and a
// resource named by both its type and its id or not at all. A tool that broke
// these rules has still made its call, so its answer is trimmed, never
// refused: refusing it would leave the claim unended.
func normalize(res Result) Result {
	res.Replayed, res.ResolvedBy = false, ""
	switch {
	case res.OK:
		res.Outcome = OutcomeOK
	case res.Outcome == "" || res.Outcome == OutcomeOK:
		res.Outcome = OutcomeFailed
	}
	if len(res.Output) > 0 {
		canon, err := canonjson.Canonicalize(res.Output)
		if err != nil || len(canon) > MaxStoredOutput {
			canon, res.OutputOmitted = nil, true
		}
		res.Output = canon
	}
	res.Outcome = strings.ToValidUTF8(res.Outcome[:min(len(res.Outcome), maxStoredOutcome)], "")
	res.Message = strings.ToValidUTF8(res.Message[:min(len(res.Message), maxStoredMessage)], "")
	if res.ResourceType == "" || res.ResourceID == "" || len(res.ResourceType) > 255 || len(res.ResourceID) > 255 {
		res.ResourceType, res.ResourceID = "", ""
	}
	return res
}
