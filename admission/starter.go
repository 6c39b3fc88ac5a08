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

// Errors carry the kinds of package errs. Methods that run SQL return a
// transient database failure as errs.Unavailable wrapping the driver error.
var (
	// ErrNotFound reports a saved search the organization does not have live,
	// and every repeat of a start whose freeze found it gone.
	ErrNotFound = &errs.Error{Kind: errs.NotFound, Message: "admission: saved search not found",
		Detail: "no such saved search in your organization"}
	// ErrKeyReused reports an Idempotency-Key used for a different request.
	// It is [runs.ErrKeyReused].
	ErrKeyReused = runs.ErrKeyReused
	// ErrInvalid is wrapped by every start refused before any SQL;
	// validator.ValidationErrors, when wrapped too, name the fields.
	ErrInvalid = errs.New(errs.Invalid, "admission: invalid start")
)

// ResourceType is the resource type a completed surface.saved_search.start
// claim stores; its id is the snapshot id.
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

// Deps are the stores a [Starter] is built on; every field is required.
type Deps struct {
	Pool          *pgxpool.Pool
	Plane         *idempotency.Service
	SavedSearches *savedsearch.Store
	Snapshots     *snapshot.Store
	// Runs must run at Plane's database clock.
	Runs *runs.Store
}

// Starter starts Runs. It is safe for concurrent use.
type Starter struct {
	deps  Deps
	cfg   Config
	hooks testHooks
}

// testHooks let a test stop a start inside its preparation.
type testHooks struct {
	beforeFreeze func(ctx context.Context) error
	afterFreeze  func(ctx context.Context)
}

// NewStarter returns a starter built on d, or an error naming a missing
// dependency, a clock mismatch between d.Runs and d.Plane, or a bad cfg.
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
	return &Starter{deps: d, cfg: cfg.WithDefaults()}, nil
}

// Result is the answer of a start.
type Result struct {
	Run      *runs.Run
	Snapshot *snapshot.Summary
	// Created reports whether this call made the start (201); false is a
	// replay (200).
	Created bool
}

// SavedSearchStart are the inputs of [Starter.StartSavedSearch].
type SavedSearchStart struct {
	Org           uuid.UUID
	SavedSearchID uuid.UUID
	// IdempotencyKey is the client's key, unquoted: 1 to 255 bytes.
	IdempotencyKey string
	Options        StartOptions
	// Actor is recorded on the snapshot and the Run; empty records NULL.
	Actor string
	// Origin is snapshot.OriginAPI (or empty) or snapshot.OriginSchedule;
	// it is not part of the request hash.
	Origin string
	// Wait is how long to wait for another caller's live preparation of the
	// key; zero, or no [Config.Hub], answers in progress at once.
	Wait time.Duration
}

// DirectStart are the inputs of [Starter.StartDirect].
type DirectStart struct {
	Org uuid.UUID
	// Kind is "capability" or "definition".
	Kind string `validate:"required,oneof=capability definition"`
	// Name is 1 to 200 characters.
	Name string `validate:"required,max=200"`
	// Input is a JSON object of at most [MaxInputBytes]; empty or null is {}.
	Input json.RawMessage
	// IdempotencyKey is the client's key, unquoted: 1 to 255 bytes.
	IdempotencyKey string
	// Actor is recorded on the Run; empty records NULL.
	Actor string
}

// MaxInputBytes bounds a direct start's input as written by the caller; it
// bounds what one Run read costs over the Run's retention.
const MaxInputBytes = 64 << 10

// Validate checks p's kind, name and input size and shape, not its key or
// JSON syntax. It returns nil or an error wrapping [ErrInvalid], with
// validator.ValidationErrors or an errs.Field "input".
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
// replays the Run the same Idempotency-Key started. A Run under the start
// key answers first; otherwise the preparation is claimed with
// [Config.Lease], frozen (or its stored snapshot reused) and the Run admitted.
//
// Errors: [ErrInvalid] for a bad key or options; [ErrNotFound];
// [*idempotency.InFlightError] while another caller holds the preparation
// (after up to p.Wait with a hub); [ErrKeyReused]. Any other error is
// retryable: a claim this call held has been released.
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

	run, sum, err := s.deps.Runs.LookupStart(ctx, p.Org, startKey)
	switch {
	case err == nil && run.RequestHash != hash:
		return Result{}, ErrKeyReused
	case err == nil:
		return Result{Run: run, Snapshot: sum}, nil
	case !errors.Is(err, runs.ErrNotFound):
		return Result{}, err
	}

	live, err := s.deps.SavedSearches.Exists(ctx, p.Org, p.SavedSearchID)
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

// admit is a saved-search start's inputs, request hash and normalized options.
type admit struct {
	SavedSearchStart
	hash    string
	options json.RawMessage
}

// params returns the Run admission on snapshot snapID; empty name stores NULL.
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

// prepared is a completed preparation; its JSON is the claim's answer.
type prepared struct {
	// Error is "not_found" when the freeze found the saved search gone;
	// the other fields are then empty.
	Error string `json:"error,omitempty"`
	// Snapshot holds the whole snapshot; one over the store limit is stored
	// as an idempotency.ResourceRef instead.
	Snapshot        *snapshot.Summary `json:"snapshot,omitempty"`
	SavedSearchName string            `json:"saved_search_name,omitempty"`
}

const answerNotFound = "not_found"

// prepare claims a's preparation, then freezes it (own claim) or admits the
// stored answer (completed claim).
func (s *Starter) prepare(ctx context.Context, a admit) (Result, error) {
	// Without a hub nobody would wake the wait.
	wait := a.Wait
	if s.cfg.Hub == nil {
		wait = 0
	}
	out, err := s.deps.Plane.ClaimWait(ctx, s.cfg.Hub, a.Org, idempotency.ScopeSavedSearchStart, a.IdempotencyKey, a.hash,
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

// freeze freezes the snapshot, admits the Run and completes the claim in one
// transaction, so all three exist together or not at all. A saved search
// gone since the check is completed as ErrNotFound for every repeat; a lost
// fence answers in progress; any other failure releases the claim. A Run
// already under the start key (an expired earlier claim) is answered.
func (s *Starter) freeze(ctx context.Context, a admit, claim *idempotency.Claim) (Result, error) {
	f, err := s.freezeTx(ctx, a, claim)
	switch {
	case err == nil && f.run == nil:
		// Admitted before this preparation: answer that Run.
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
	// Safe even if the commit went through: release is fenced and
	// conditional; a retry then finds the Run.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ReleaseTimeout)
	defer cancel()
	if _, rerr := s.deps.Plane.Release(rctx, claim); rerr != nil {
		err = errors.Join(err, fmt.Errorf("release claim: %w", rerr))
	}
	return Result{}, fmt.Errorf("admission: prepare: %w", err)
}

// frozen is what the freeze committed; run is nil when the start key had
// been admitted before.
type frozen struct {
	snapshot        snapshot.Summary
	savedSearchName string
	run             *runs.Run
}

// freezeTx runs freeze's transaction.
func (s *Starter) freezeTx(ctx context.Context, a admit, claim *idempotency.Claim) (frozen, error) {
	if s.hooks.beforeFreeze != nil {
		if err := s.hooks.beforeFreeze(ctx); err != nil {
			return frozen{}, err
		}
	}
	var f frozen
	err := inPipelinedTx(ctx, s.deps.Pool, s.cfg.ReleaseTimeout, func(tx *pipelinedTx) error {
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

		// The completion goes last: from it to COMMIT we hold the claim's
		// row lock, which a concurrent claim of the key waits on.
		second := tx.batch()
		var admitted *runs.QueuedAdmit
		c := idempotency.Completion{Response: json.RawMessage(`{"error":"` + answerNotFound + `"}`)}
		if !notFound {
			c = idempotency.Completion{ResourceType: ResourceType, ResourceID: snap.ID.String()}
			if c.Response, err = answer(snap); err != nil {
				return err
			}
			snapshot.QueueInsert(second, snap, claim.ID)
			if admitted, err = s.deps.Runs.QueueAdmit(second, a.params(snap.ID, snap.SavedSearchName)); err != nil {
				return err
			}
		}
		completion, err := s.deps.Plane.QueueComplete(second, claim, c)
		if err != nil {
			return err
		}
		if err := tx.commit(ctx, second); err != nil {
			return err
		}
		// Wake waiters after the commit, on the transaction's connection.
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

// answer returns the claim response for snap.
func answer(snap *snapshot.Snapshot) (json.RawMessage, error) {
	return json.Marshal(struct {
		Snapshot        *snapshot.Snapshot `json:"snapshot"`
		SavedSearchName string             `json:"saved_search_name"`
	}{snap, snap.SavedSearchName})
}

// storedAnswer reads a completed claim's answer, inline or by reference.
func (s *Starter) storedAnswer(ctx context.Context, org uuid.UUID, out idempotency.Outcome) (*prepared, error) {
	if out.Ref != nil {
		id, err := uuid.Parse(out.Ref.ID)
		if out.Ref.Type != ResourceType || err != nil {
			return nil, fmt.Errorf("admission: the stored answer refers to %s %q, not a snapshot", out.Ref.Type, out.Ref.ID)
		}
		snap, err := s.deps.Snapshots.Get(ctx, org, id)
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

// inFlight is the in-progress answer, Retry-After at least one second.
func inFlight(key string, retryAfter time.Duration) error {
	retryAfter = time.Duration(idempotency.RetryAfterSeconds(retryAfter)) * time.Second
	return &idempotency.InFlightError{Scope: idempotency.ScopeSavedSearchStart, Key: key, RetryAfter: retryAfter}
}

// admitSavedSearch admits the Run of a preparation another caller completed.
func (s *Starter) admitSavedSearch(ctx context.Context, a admit, prep *prepared) (Result, error) {
	// Only the start that froze the snapshot answers 201; this is a repeat
	// and answers 200, even if its insert admits the Run.
	run, _, err := s.deps.Runs.Admit(ctx, a.params(prep.Snapshot.ID, prep.SavedSearchName))
	if err != nil {
		return Result{}, err
	}
	sum := prep.Snapshot
	if run.SnapshotID != nil && *run.SnapshotID != sum.ID {
		// Admitted from an earlier, expired claim: use that Run's snapshot.
		snap, err := s.deps.Snapshots.Get(ctx, a.Org, *run.SnapshotID)
		if err != nil {
			return Result{}, fmt.Errorf("admission: reading the Run's snapshot: %w", err)
		}
		sum = new(snap.Summary())
	}
	return Result{Run: run, Snapshot: sum}, nil
}

// StartDirect starts a capability or definition Run, or replays the Run the
// same Idempotency-Key started. Errors: [ErrInvalid] (see
// [DirectStart.Validate]); [ErrKeyReused] for a different request under the
// key. Other errors are retryable.
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
	run, created, err := s.deps.Runs.Admit(ctx, runs.AdmitParams{
		OrganizationID: p.Org,
		Kind:           p.Kind,
		StartKey:       runs.DirectStartKey(p.IdempotencyKey),
		RequestHash:    directHash(p.Kind, p.Name, input),
		Name:           &p.Name,
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

func (s *Starter) admitted() {
	if s.cfg.Admitted != nil {
		s.cfg.Admitted()
	}
}
