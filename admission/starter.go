package admission

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-playground/validator/v10"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
	"github.com/searchd/searchd/snapshot"
)

// The errors of this package carry the kinds of package errs (their
// sentinels are errs.Error values of the kind their names say), and every
// exported method that runs SQL returns a transient database failure as an
// errs.Unavailable wrapping the driver's error (internal/dberr).
var (
	// ErrNotFound reports a saved search the organization does not have
	// live, found before any claim or by the freeze itself, and every
	// repeat of a start whose freeze found it gone.
	ErrNotFound = &errs.Error{Kind: errs.NotFound, Message: "admission: saved search not found",
		Detail: "no such saved search in your organization"}
	// ErrKeyReused reports an Idempotency-Key already used for a different
	// request, by the claim or by the Run. It is [runs.ErrKeyReused], so
	// either name matches it.
	ErrKeyReused = runs.ErrKeyReused
	// ErrInvalid is wrapped by every error about a start refused before any
	// SQL runs; validator.ValidationErrors, when wrapped too, name the
	// fields.
	ErrInvalid = errs.New(errs.Invalid, "admission: invalid start")
)

// ResourceType names the resource a completed surface.saved_search.start
// claim stores: its resource id is the snapshot id.
const ResourceType = "saved_search_snapshot"

// Config configures a [Starter].
type Config struct {
	// ReleaseTimeout bounds releasing a claim after a retryable failure.
	// The release runs on a context detached from the caller's, which may
	// be the very reason the preparation failed. Default 5 s.
	ReleaseTimeout time.Duration
	// Hub wakes a start that waits for a preparation another caller holds
	// ([SavedSearchStart.Wait]); it must be running ([idempotency.Hub.Run]).
	// Nil (the default) never waits: a live preparation answers in progress
	// at once, whatever Wait says.
	Hub *idempotency.Hub
	// Lease is the lease of a saved-search preparation's claim: how long
	// another caller waits after a crash before it reclaims the key. The
	// freeze is one short transaction, so a long lease only delays the
	// recovery; tests shorten it so a scenario that waits out a crashed
	// holder takes seconds. Default [idempotency.SavedSearchStartLease]
	// (30 s); at most [idempotency.MaxLease].
	Lease time.Duration
	// Admitted, when set, is called after each start that admitted a new
	// Run has committed it (and its dispatch): the binary wakes its
	// dispatcher with it, so a Run is delivered at once rather than at
	// the dispatcher's next interval. It must not block. Nil (the
	// default) calls nothing.
	Admitted func()
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.ReleaseTimeout = cmp.Or(c.ReleaseTimeout, 5*time.Second)
	c.Lease = cmp.Or(c.Lease, idempotency.SavedSearchStartLease)
	return c
}

// Validate returns an error naming the field and its allowed range when c,
// with its defaults applied, cannot run. [NewStarter] calls it; the binary
// also checks the Lease where it reads it, to name the setting.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Lease <= 0 || c.Lease > idempotency.MaxLease:
		return fmt.Errorf("admission: Lease is %s, want more than 0s and at most %s", c.Lease, idempotency.MaxLease)
	case c.ReleaseTimeout < 0:
		return fmt.Errorf("admission: ReleaseTimeout is %s, want 0s (the default) or more", c.ReleaseTimeout)
	}
	return nil
}

// Deps are the stores and the plane a [Starter] is built on. The caller
// constructs each once (cmd/searchd does, for the API and the console
// alike) and hands it in; every field is required.
type Deps struct {
	// Pool runs the preparation's transaction (the freeze), on a
	// connection of its own.
	Pool *pgxpool.Pool
	// Plane claims the preparations (scope surface.saved_search.start).
	Plane *idempotency.Service
	// SavedSearches answers whether a saved search is live before any
	// claim is written.
	SavedSearches *savedsearch.Store
	// Snapshots reads the frozen snapshot a replayed start carries.
	Snapshots *snapshot.Store
	// Runs admits and looks up the Runs. It must run at the plane's
	// database clock (runs.Config.Clock is Plane.Clock()): a claim and
	// the Run it admits are stamped by one clock.
	Runs *runs.Store
}

// Starter starts Runs. It is safe for concurrent use.
type Starter struct {
	pool      *pgxpool.Pool
	plane     *idempotency.Service
	searches  *savedsearch.Store
	snapshots *snapshot.Store
	runs      *runs.Store
	cfg       Config
	// hooks are set by tests alone (export_test.go).
	hooks testHooks
}

// testHooks let a test stop a start at a point of its preparation.
type testHooks struct {
	// beforeFreeze runs just before the preparation's transaction; an
	// error it returns is a failure of the freeze.
	beforeFreeze func(ctx context.Context) error
	// afterFreeze runs after this call froze the snapshot, completed its
	// claim and admitted its Run.
	afterFreeze func(ctx context.Context)
}

// NewStarter returns a starter built on d that claims saved-search
// preparations through d.Plane. Zero fields of cfg take their defaults.
//
// It returns an error naming the field when a dependency is missing, when
// d.Runs and d.Plane run at different database clocks, or when cfg fails
// [Config.Validate]; a Starter it returns can run.
func NewStarter(d Deps, cfg Config) (*Starter, error) {
	switch {
	case d.Pool == nil:
		return nil, errors.New("admission: Deps.Pool is required")
	case d.Plane == nil:
		return nil, errors.New("admission: Deps.Plane is required")
	case d.SavedSearches == nil:
		return nil, errors.New("admission: Deps.SavedSearches is required")
	case d.Snapshots == nil:
		return nil, errors.New("admission: Deps.Snapshots is required")
	case d.Runs == nil:
		return nil, errors.New("admission: Deps.Runs is required")
	case d.Runs.Clock() != d.Plane.Clock():
		return nil, errors.New("admission: Deps.Runs and Deps.Plane run at different database clocks; build both with the same one")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Starter{
		pool:      d.Pool,
		plane:     d.Plane,
		searches:  d.SavedSearches,
		snapshots: d.Snapshots,
		runs:      d.Runs,
		cfg:       cfg.WithDefaults(),
	}, nil
}

// Result is the answer of a start.
type Result struct {
	Run *runs.Run
	// Snapshot is the frozen input of a saved-search Run; nil for a direct
	// one.
	Snapshot *snapshot.Summary
	// Created reports whether this call made the start (201): for a
	// saved-search start, the call that froze the snapshot the Run carries,
	// whichever call's insert admitted the Run; for a direct start, the
	// call that admitted it. False is a replay (200).
	Created bool
}

// SavedSearchStart are the inputs of [Starter.StartSavedSearch].
type SavedSearchStart struct {
	Org           uuid.UUID
	SavedSearchID uuid.UUID
	// IdempotencyKey is the client's key, unquoted: 1 to 255 bytes.
	IdempotencyKey string
	// Options are normalized before they are hashed and stored.
	Options StartOptions
	// Actor is recorded on the snapshot and the Run; empty records NULL.
	Actor string
	// Origin is recorded on the snapshot: snapshot.OriginAPI (empty is
	// the same) for a client's start, snapshot.OriginSchedule for the
	// schedule drain's. It is not part of the request hash: a start key
	// names one start, whoever asks for it.
	Origin string
	// Wait is how long to wait for a preparation of the same key another
	// caller holds (a live claim) to end, instead of answering in progress
	// at once: woken when it completes or is released, reclaiming it when
	// its lease passes. Zero (the default) does not wait; so does a Starter
	// without [Config.Hub]. The caller bounds it (the API to 30 s).
	Wait time.Duration
}

// DirectStart are the inputs of [Starter.StartDirect]; [DirectStart.Validate]
// states their rules.
type DirectStart struct {
	Org uuid.UUID
	// Kind is "capability" or "definition".
	Kind string `validate:"required,oneof=capability definition"`
	// Name is 1 to 200 characters.
	Name string `validate:"required,max=200"`
	// Input is a JSON object of at most [MaxInputBytes] bytes as the
	// caller wrote it; empty or null is {}.
	Input json.RawMessage
	// IdempotencyKey is the client's key, unquoted: 1 to 255 bytes.
	IdempotencyKey string
	// Actor is recorded on the Run; empty records NULL.
	Actor string
}

// MaxInputBytes bounds the input of a direct start, in bytes of its JSON
// as the caller wrote it. A Run keeps its input for 396 days and the Run
// list pages leave it out, so the bound is what one Run read can cost.
const MaxInputBytes = 64 << 10

// Validate checks the kind, the name and the input of p (not its key,
// which [Starter.StartDirect] checks first): the one statement of these
// rules, which an edge runs before it starts anything. It returns nil, or
// an error of kind errs.Invalid wrapping [ErrInvalid]: with the
// validator.ValidationErrors naming Kind and Name when either is refused;
// else with an errs.Field named "input" when the input is not a JSON
// object or is over [MaxInputBytes]. Input is not parsed: a caller that
// has not checked it is well-formed JSON learns so from StartDirect.
func (p DirectStart) Validate() error {
	if err := check(p); err != nil {
		return err
	}
	if in := bytes.TrimSpace(p.Input); len(in) > 0 && in[0] != '{' && string(in) != "null" {
		return invalidInput("must be an object")
	}
	if len(p.Input) > MaxInputBytes {
		return invalidInput(fmt.Sprintf(
			"must be at most %d bytes of JSON as sent (the input size limit); it is %d", MaxInputBytes, len(p.Input)))
	}
	return nil
}

// invalidInput is the refusal of a direct start's input for reason.
func invalidInput(reason string) error {
	return &errs.Error{Kind: errs.Invalid, Message: "admission: invalid start: input " + reason,
		Fields: []errs.Field{{Name: "input", Message: reason}}, Err: ErrInvalid}
}

var validate = validator.New(validator.WithRequiredStructEnabled())

func check(v any) error {
	if err := validate.Struct(v); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func checkKey(key string) error {
	if err := idempotency.ValidateKey(key); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// StartSavedSearch starts a Run on a frozen copy of the saved search, or
// replays the Run the same Idempotency-Key already started.
//
// The flow, in order:
//  0. The Run under the stable start key answers first: same request, a
//     replay; different request, ErrKeyReused. A replay is this one
//     statement, and it works for the Run's 396 days, long after the claim's
//     24 hours.
//  1. A saved search org does not have live answers ErrNotFound, before any
//     claim is written.
//  2. The preparation is claimed in scope surface.saved_search.start with
//     the lease of [Config.Lease] (30 s by default). Claimed: the snapshot is frozen and the claim
//     completed with it in one transaction. Completed: the stored snapshot
//     is used and none is written. Processing: with p.Wait and a hub, the
//     start first waits that long for the holder's claim to end and takes
//     whichever of these it then meets (a completion, or a claim of its
//     own after a release or a passed lease); otherwise, or when the wait
//     runs out, *idempotency.InFlightError. Conflict: ErrKeyReused.
//  3. The Run is admitted under the start key, carrying the snapshot, the
//     normalized options and the saved search's name at the freeze.
//
// Errors: an error wrapping [ErrInvalid] for a refused key or options;
// [ErrNotFound] (also replayed from a claim whose freeze found the saved
// search gone); an [*idempotency.InFlightError] with RetryAfter of at least
// a second when another caller holds a live preparation or took it over;
// [ErrKeyReused]. Any other error is a retryable failure: the claim, if this
// call held one, has been released, and a retry runs the preparation again.
func (s *Starter) StartSavedSearch(ctx context.Context, p SavedSearchStart) (_ Result, err error) {
	defer dberr.Annotate(&err)
	if err := checkKey(p.IdempotencyKey); err != nil {
		return Result{}, err
	}
	opts := p.Options.Normalize()
	if err := opts.validate(); err != nil {
		return Result{}, err
	}
	hash := SavedSearchRequestHash(p.SavedSearchID, opts)
	startKey := runs.SavedSearchStartKey(p.IdempotencyKey)

	run, sum, err := s.runs.LookupStart(ctx, p.Org, startKey)
	switch {
	case err == nil && run.RequestHash != hash:
		return Result{}, ErrKeyReused
	case err == nil:
		return Result{Run: run, Snapshot: sum}, nil
	case !errors.Is(err, runs.ErrNotFound):
		return Result{}, err
	}

	live, err := s.searches.Exists(ctx, p.Org, p.SavedSearchID)
	if err != nil {
		return Result{}, err
	}
	if !live {
		return Result{}, ErrNotFound
	}

	options, err := json.Marshal(opts)
	if err != nil {
		return Result{}, fmt.Errorf("admission: encoding options: %w", err)
	}
	return s.prepare(ctx, admit{SavedSearchStart: p, hash: hash, options: options})
}

// admit is a saved-search start on its way to admission: its inputs, its
// request hash and its normalized options as stored on the Run.
type admit struct {
	SavedSearchStart
	hash    string
	options json.RawMessage
}

// params returns the Run admission of a on snapshot snapID, named name (the
// saved search's name at the freeze; empty stores NULL).
func (a admit) params(snapID uuid.UUID, name string) runs.AdmitParams {
	var n *string
	if name != "" {
		n = &name
	}
	return runs.AdmitParams{
		OrganizationID: a.Org,
		Kind:           runs.KindSavedSearch,
		StartKey:       runs.SavedSearchStartKey(a.IdempotencyKey),
		RequestHash:    a.hash,
		SavedSearchID:  &a.SavedSearchID,
		SnapshotID:     &snapID,
		Name:           n,
		Options:        a.options,
		Actor:          a.Actor,
	}
}

// prepared is what admission needs of a completed preparation. Its JSON is
// the claim's stored answer.
type prepared struct {
	// Error is "not_found" for the business answer of a freeze that found
	// the saved search gone; everything else is then empty.
	Error string `json:"error,omitempty"`
	// Snapshot holds the whole snapshot; reading decodes its summary
	// fields. A snapshot larger than the plane's store limit is stored as a
	// reference to the snapshot record instead (idempotency.ResourceRef).
	Snapshot *snapshot.Summary `json:"snapshot,omitempty"`
	// SavedSearchName names the Run.
	SavedSearchName string `json:"saved_search_name,omitempty"`
}

const answerNotFound = "not_found"

// prepare claims the preparation of a's start and answers it: a claim of
// its own is frozen and admitted in one transaction (see freeze); a
// completed claim's stored answer is admitted by admitSavedSearch.
func (s *Starter) prepare(ctx context.Context, a admit) (Result, error) {
	// Without a hub nobody would wake the wait, so it does not begin.
	wait := a.Wait
	if s.cfg.Hub == nil {
		wait = 0
	}
	out, err := s.plane.ClaimWait(ctx, s.cfg.Hub, a.Org, idempotency.ScopeSavedSearchStart, a.IdempotencyKey, a.hash,
		s.cfg.Lease, wait)
	if err != nil {
		return Result{}, fmt.Errorf("admission: claim: %w", err)
	}
	switch out.Kind {
	case idempotency.KindClaimed:
		return s.freeze(ctx, a, out.Claim)
	case idempotency.KindCompleted:
		prep, err := s.storedAnswer(ctx, a.Org, out)
		if err != nil {
			return Result{}, err
		}
		return s.admitSavedSearch(ctx, a, prep)
	case idempotency.KindProcessing:
		return Result{}, inFlight(a.IdempotencyKey, out.RetryAfter)
	case idempotency.KindConflict:
		return Result{}, ErrKeyReused
	}
	return Result{}, fmt.Errorf("admission: claim answered %s", out.Kind)
}

// freeze does the work claim owns, ends the claim and admits the Run, in
// ONE transaction of two round trips: BEGIN with the freeze read, then the
// snapshot, the Run, the fenced completion and COMMIT, pipelined. So the
// snapshot, the completion and the Run exist together or not at all, and a
// new start commits twice in all (the claim, then this):
//   - a saved search gone since the check is a business answer: the claim
//     is completed with it, and every repeat answers ErrNotFound;
//   - a completion refused by the fence (our lease passed and another
//     worker reclaimed the key) aborts the transaction before its COMMIT:
//     nothing is written, that worker owns the preparation, and the answer
//     is in progress;
//   - any other failure is retryable: the claim is released, so the next
//     attempt runs instead of waiting out the lease.
//
// The Run insert is admission as ever: the unique start key decides, and a
// Run already admitted under it (by an earlier preparation whose claim has
// expired) is read after the commit and answered.
func (s *Starter) freeze(ctx context.Context, a admit, claim *idempotency.Claim) (Result, error) {
	f, err := s.freezeTx(ctx, a, claim)
	switch {
	case err == nil && f.run == nil:
		// The start key was admitted before this preparation: answer that
		// Run, as admitSavedSearch answers any repeat.
		return s.admitSavedSearch(ctx, a, &prepared{Snapshot: &f.snapshot, SavedSearchName: f.savedSearchName})
	case err == nil:
		s.admitted()
		if s.hooks.afterFreeze != nil {
			s.hooks.afterFreeze(ctx)
		}
		return Result{Run: f.run, Snapshot: &f.snapshot, Created: true}, nil
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrKeyReused):
		return Result{}, err
	case errors.Is(err, idempotency.ErrFenceLost):
		return Result{}, inFlight(a.IdempotencyKey, time.Second)
	}
	// The release is fenced and conditional on the claim being unfinished,
	// so it is safe even when the commit went through and only its answer
	// was lost: it then deletes nothing, and a retry finds the Run.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ReleaseTimeout)
	defer cancel()
	if _, rerr := s.plane.Release(rctx, claim); rerr != nil {
		err = errors.Join(err, fmt.Errorf("release claim: %w", rerr))
	}
	return Result{}, fmt.Errorf("admission: prepare: %w", err)
}

// frozen is what the preparation's transaction committed: the snapshot
// (its summary and the saved search's name at the freeze) and the Run it
// admitted, nil when the start key had admitted one before.
type frozen struct {
	snapshot        snapshot.Summary
	savedSearchName string
	run             *runs.Run
}

// freezeTx runs freeze's transaction, in two round trips (see
// pipelinedTx): BEGIN and the freeze read; then the snapshot, the Run, the
// fenced completion and COMMIT. A saved search gone since the check
// completes the claim with that answer and returns [ErrNotFound].
func (s *Starter) freezeTx(ctx context.Context, a admit, claim *idempotency.Claim) (frozen, error) {
	if s.hooks.beforeFreeze != nil {
		if err := s.hooks.beforeFreeze(ctx); err != nil {
			return frozen{}, err
		}
	}
	var f frozen
	err := inPipelinedTx(ctx, s.pool, s.cfg.ReleaseTimeout, func(tx *pipelinedTx) error {
		// Round trip 1: BEGIN and the freeze read.
		first := tx.batch()
		read := snapshot.QueueRead(first, a.Org, a.SavedSearchID, a.Actor, a.Origin)
		if err := tx.send(ctx, first); err != nil {
			return err
		}
		snap, err := read.Snapshot()
		notFound := errors.Is(err, snapshot.ErrNotFound)
		if err != nil && !notFound {
			return err
		}

		// Round trip 2: the snapshot, the Run that refers to it, the
		// fenced completion, COMMIT. The completion goes last: from it to
		// the COMMIT the transaction holds the claim's row lock, which a
		// concurrent claim of the same key would wait on (ON CONFLICT
		// waits for the row's updater), so it must not be held while an
		// insert waits; a lost fence still aborts everything before it.
		second := tx.batch()
		var admitted *runs.QueuedAdmit
		c := idempotency.Completion{Response: json.RawMessage(`{"error":"` + answerNotFound + `"}`)}
		if !notFound {
			c = idempotency.Completion{ResourceType: ResourceType, ResourceID: snap.ID.String()}
			if c.Response, err = answer(snap); err != nil {
				return err
			}
			snapshot.QueueInsert(second, snap, claim.ID)
			if admitted, err = s.runs.QueueAdmit(second, a.params(snap.ID, snap.SavedSearchName)); err != nil {
				return err
			}
		}
		completion, err := s.plane.QueueComplete(second, claim, c)
		if err != nil {
			return err
		}
		if err := tx.commit(ctx, second); err != nil {
			return err
		}
		// A start waiting on this claim is woken after the commit, on the
		// connection the transaction used (see idempotency.QueuedCompletion).
		completion.Announce(ctx, tx.conn)
		if notFound {
			return ErrNotFound
		}
		f = frozen{snapshot: snap.Summary(), savedSearchName: snap.SavedSearchName}
		f.run, err = admitted.Run()
		return err
	})
	return f, err
}

// answer returns the claim response for snap: the whole snapshot with the
// saved search's name. The plane stores a reference to the snapshot record
// in its place when it is larger than the store limit.
func answer(snap *snapshot.Snapshot) (json.RawMessage, error) {
	return json.Marshal(struct {
		Snapshot        *snapshot.Snapshot `json:"snapshot"`
		SavedSearchName string             `json:"saved_search_name"`
	}{snap, snap.SavedSearchName})
}

// storedAnswer reads the answer of a completed claim: inline, or through the
// reference the plane stored for a large snapshot, from the immutable
// snapshot record, which outlives the claim.
func (s *Starter) storedAnswer(ctx context.Context, org uuid.UUID, out idempotency.Outcome) (*prepared, error) {
	if out.Ref != nil {
		id, err := uuid.Parse(out.Ref.ID)
		if out.Ref.Type != ResourceType || err != nil {
			return nil, fmt.Errorf("admission: the stored answer refers to %s %q, not a snapshot", out.Ref.Type, out.Ref.ID)
		}
		snap, err := s.snapshots.Get(ctx, org, id)
		if err != nil {
			return nil, fmt.Errorf("admission: reading the referred snapshot: %w", err)
		}
		return &prepared{Snapshot: new(snap.Summary()), SavedSearchName: snap.SavedSearchName}, nil
	}
	var prep prepared
	if err := json.Unmarshal(out.Response, &prep); err != nil {
		return nil, fmt.Errorf("admission: decoding the stored answer: %w", err)
	}
	if prep.Error == answerNotFound {
		return nil, ErrNotFound
	}
	if out.ResourceType != ResourceType || prep.Snapshot == nil || prep.Snapshot.ID.String() != out.ResourceID {
		return nil, fmt.Errorf("admission: the stored answer names no snapshot (resource %s %s)",
			out.ResourceType, out.ResourceID)
	}
	return &prep, nil
}

// inFlight is the in-progress answer. Retry-After is whole seconds and at
// least one, so a client never retries in a tight loop.
func inFlight(key string, retryAfter time.Duration) error {
	retryAfter = time.Duration(idempotency.RetryAfterSeconds(retryAfter)) * time.Second
	return &idempotency.InFlightError{Scope: idempotency.ScopeSavedSearchStart, Key: key, RetryAfter: retryAfter}
}

// admitSavedSearch admits the Run of a start whose preparation another
// caller completed (or, from an earlier version of searchd, completed
// without admitting its Run): usually the Run exists and this is a replay.
func (s *Starter) admitSavedSearch(ctx context.Context, a admit, prep *prepared) (Result, error) {
	// 201 belongs to the start that froze the snapshot, and that start
	// admitted its Run in the same transaction (freezeTx). Whoever gets
	// here read a completed preparation or found the key admitted: it is
	// a repeat of the start and answers 200, even when its insert admits
	// the Run (of a preparation an earlier searchd completed without one).
	run, _, err := s.runs.Admit(ctx, a.params(prep.Snapshot.ID, prep.SavedSearchName))
	if err != nil {
		return Result{}, err
	}
	sum := prep.Snapshot
	if run.SnapshotID != nil && *run.SnapshotID != sum.ID {
		// The Run was admitted from an earlier preparation of this key,
		// whose claim has since expired: answer with that Run's snapshot.
		snap, err := s.snapshots.Get(ctx, a.Org, *run.SnapshotID)
		if err != nil {
			return Result{}, fmt.Errorf("admission: reading the Run's snapshot: %w", err)
		}
		sum = new(snap.Summary())
	}
	return Result{Run: run, Snapshot: sum}, nil
}

// StartDirect starts a capability or definition Run, or replays the Run the
// same Idempotency-Key already started. Admission is the agent.runs insert
// alone; no row is written in agent.idempotency_keys.
//
// Errors: an error wrapping [ErrInvalid] for a refused key, kind, name or
// input (see [DirectStart.Validate]); [ErrKeyReused] when the key started a Run for a
// different kind, name or input. Other errors come from the database and are
// retryable.
func (s *Starter) StartDirect(ctx context.Context, p DirectStart) (_ Result, err error) {
	defer dberr.Annotate(&err)
	if err := checkKey(p.IdempotencyKey); err != nil {
		return Result{}, err
	}
	if err := p.Validate(); err != nil {
		return Result{}, err
	}
	input, err := canonicalInput(p.Input)
	if err != nil {
		return Result{}, err
	}
	name := p.Name
	run, created, err := s.runs.Admit(ctx, runs.AdmitParams{
		OrganizationID: p.Org,
		Kind:           p.Kind,
		StartKey:       runs.DirectStartKey(p.IdempotencyKey),
		RequestHash:    directHash(p.Kind, p.Name, input),
		Name:           &name,
		Input:          input,
		Actor:          p.Actor,
	})
	if err != nil {
		return Result{}, err
	}
	if created {
		s.admitted()
	}
	return Result{Run: run, Created: created}, nil
}

// admitted tells Config.Admitted that a Run was admitted.
func (s *Starter) admitted() {
	if s.cfg.Admitted != nil {
		s.cfg.Admitted()
	}
}
