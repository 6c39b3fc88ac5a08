package idempotency

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/ids"
	"github.com/searchd/searchd/internal/loop"
	"github.com/searchd/searchd/internal/sqlarg"
)

// Kind is the state of a claim as a caller sees it.
type Kind uint8

const (
	// KindAbsent: nothing retained, or a processing claim whose lease passed.
	// Only [Service.Read] answers it.
	KindAbsent Kind = iota + 1
	// KindClaimed: the caller owns the key; Complete or Release it.
	KindClaimed
	// KindCompleted: the stored answer, to replay.
	KindCompleted
	// KindProcessing: another worker's live lease; retry later.
	KindProcessing
	// KindConflict: the key is stored for a different request hash.
	KindConflict
)

var kindNames = [...]string{KindAbsent: "absent", KindClaimed: "claimed", KindCompleted: "completed",
	KindProcessing: "processing", KindConflict: "conflict"}

// String returns the kind's name as metrics spell it.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// Claim is a claim the caller owns.
type Claim struct {
	ID             uuid.UUID
	OrganizationID uuid.UUID
	Scope          string
	Key            string
	RequestHash    string
	LeaseToken     uuid.UUID
	ClaimedAt      time.Time
	LeaseExpiresAt time.Time
	RetainUntil    time.Time
	// Reclaimed reports whether the claim was taken over from a passed lease.
	Reclaimed bool
}

// Outcome is what Read and Claim answer; fields other than Kind are zero
// unless their comment names the kind.
type Outcome struct {
	Kind Kind
	// Claim is set for KindClaimed.
	Claim *Claim
	// Response, ResourceType and ResourceID are set for KindCompleted.
	Response     json.RawMessage
	ResourceType string
	ResourceID   string
	// Ref is set for KindCompleted when the response was over the store limit.
	Ref *ResourceRef
	// RetryAfter is set for KindProcessing: the time until the lease passes.
	RetryAfter time.Duration
}

// ResourceRef stands in for a response larger than the store limit, stored
// as {"resource_ref": {"type": ..., "id": ...}}.
type ResourceRef struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

var refPrefix = []byte(`{"resource_ref":`)

func parseRef(response json.RawMessage) *ResourceRef {
	if !bytes.HasPrefix(response, refPrefix) {
		return nil
	}
	var v struct {
		Ref *ResourceRef `json:"resource_ref"`
	}
	if json.Unmarshal(response, &v) != nil || v.Ref == nil || v.Ref.ID == "" {
		return nil
	}
	return v.Ref
}

// InFlight returns an [*InFlightError] for a processing outcome, else nil.
func (o Outcome) InFlight(scope, key string) error {
	if o.Kind != KindProcessing {
		return nil
	}
	return &InFlightError{Scope: scope, Key: key, RetryAfter: o.RetryAfter}
}

// Completion is the answer a claim stores: a resource (type and id), a
// Response, or both.
type Completion struct {
	ResourceType string
	ResourceID   string
	// Response must be a JSON object; one over [Config.MaxResponseBytes] is
	// stored as a [ResourceRef], so the completion must then name a resource.
	Response json.RawMessage
}

// Config configures a [Service].
type Config struct {
	// Clock is the database clock every statement runs at. Nil (the
	// default) passes NULL into the SQL, so every replica shares the
	// database's clock; tests hand in a stub, and every component built on
	// the service ([Service.Clock]) runs at the same one.
	Clock *dbclock.Clock
	// MaxResponseBytes is the store limit: a completion whose response is
	// larger stores a [ResourceRef] in its place. Default
	// [DefaultMaxResponseBytes].
	MaxResponseBytes int
	// Observer is told every claim outcome and every lost fence, for
	// metrics and traces. Nil observes nothing.
	Observer Observer
	// OrphanReleaseTimeout bounds the release Claim makes when the reply
	// to its insert (or reclaim) is lost, so the claim it may have written
	// does not block the key for a lease. Default 5 s.
	OrphanReleaseTimeout time.Duration
}

// Observer receives claim metrics, synchronously; it must not block.
type Observer interface {
	// ObserveClaim is called for each successful Claim; reclaimed reports a
	// takeover of a passed lease.
	ObserveClaim(scope, kind string, reclaimed bool)
	// ObserveFenceLost is called when Complete or Release finds the lease
	// taken over.
	ObserveFenceLost(scope, op string)
}

type nopObserver struct{}

func (nopObserver) ObserveClaim(string, string, bool) {}
func (nopObserver) ObserveFenceLost(string, string)   {}

// DefaultMaxResponseBytes is the default store limit of a response, 64 KiB.
const DefaultMaxResponseBytes = 64 << 10

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, DefaultMaxResponseBytes)
	c.OrphanReleaseTimeout = cmp.Or(c.OrphanReleaseTimeout, 5*time.Second)
	return c
}

// Validate reports a configuration that cannot work, naming the field.
func (c Config) Validate() error {
	if c.MaxResponseBytes < 0 {
		return fmt.Errorf("idempotency: MaxResponseBytes is %d, want a positive size", c.MaxResponseBytes)
	}
	return nil
}

// Service implements claims on a [Repository]. It is safe for concurrent use.
type Service struct {
	repo *Repository
	cfg  Config // with its defaults, and a nopObserver for a nil Observer
}

// NewService returns a service on db. It panics if cfg fails
// [Config.Validate]: config is set in code.
func NewService(db DBTX, cfg Config) *Service {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.WithDefaults()
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	return &Service{repo: NewRepository(db, cfg.Clock), cfg: cfg}
}

// Repository returns the repository the service runs on.
func (s *Service) Repository() *Repository { return s.repo }

// Clock returns the database clock the service runs at.
func (s *Service) Clock() *dbclock.Clock { return s.repo.clock }

// MaxResponseBytes returns the effective store limit of a response.
func (s *Service) MaxResponseBytes() int { return s.cfg.MaxResponseBytes }

// maxClaimRounds bounds Claim's retries while others keep changing the row;
// running out answers processing.
const maxClaimRounds = 4

// Read reports what is stored for the key without writing; absent when
// nothing is retained or a processing lease passed. Invalid input returns an
// error wrapping [ErrInvalid] or [ErrUnknownScope].
func (s *Service) Read(ctx context.Context, organizationID uuid.UUID, scope, key, requestHash string) (_ Outcome, err error) {
	defer dberr.Annotate(&err)
	if _, err := validateKey(organizationID, scope, key, requestHash); err != nil {
		return Outcome{}, err
	}
	rec, err := s.repo.Get(ctx, organizationID, scope, key)
	if err != nil {
		return Outcome{}, err
	}
	if rec == nil || !rec.Retained() {
		return Outcome{Kind: KindAbsent}, nil
	}
	if out, settled := judge(rec, requestHash); settled {
		return out, nil
	}
	return Outcome{Kind: KindAbsent}, nil // processing, lease passed: reclaimable
}

// Claim claims the key for requestHash with lease, or reports what holds it.
// Of racing callers exactly one reclaims a passed lease with the same hash; a
// row past retention is replaced; retention is the scope's, raised to the
// lease. Invalid input returns an error wrapping [ErrInvalid] or
// [ErrUnknownScope] before any SQL. If the writing statement's reply is
// lost, the claim it may have committed is released before returning.
func (s *Service) Claim(ctx context.Context, organizationID uuid.UUID, scope, key, requestHash string, lease time.Duration) (_ Outcome, err error) {
	defer dberr.Annotate(&err)
	out, err := s.claim(ctx, organizationID, scope, key, requestHash, lease)
	if err == nil {
		s.cfg.Observer.ObserveClaim(scope, out.Kind.String(), out.Claim != nil && out.Claim.Reclaimed)
	}
	return out, err
}

func (s *Service) claim(ctx context.Context, organizationID uuid.UUID, scope, key, requestHash string, lease time.Duration) (Outcome, error) {
	retention, err := validateKey(organizationID, scope, key, requestHash)
	if err != nil {
		return Outcome{}, err
	}
	if lease <= 0 || lease > MaxLease {
		return Outcome{}, &InputError{Field: "lease", Reason: "must be positive and at most " + MaxLease.String()}
	}
	p := ClaimParams{
		OrganizationID: organizationID,
		Scope:          scope,
		Key:            key,
		RequestHash:    requestHash,
		Lease:          lease,
		Retention:      retention,
	}
	for range maxClaimRounds {
		p.ID, p.LeaseToken = ids.New(), uuid.New()
		if out, done, err := s.write(ctx, s.repo.TryClaim, p, p.ID, false); done {
			return out, err
		}
		rec, err := s.repo.Get(ctx, organizationID, scope, key)
		if err != nil {
			return Outcome{}, err
		}
		switch {
		case rec == nil:
			continue // released or swept since the insert: claim again
		case !rec.Retained():
			p.ID, p.LeaseToken = ids.New(), uuid.New()
			if out, done, err := s.write(ctx, s.repo.ReplaceExpired, p, p.ID, false); done {
				return out, err
			}
			continue
		}
		if out, settled := judge(rec, requestHash); settled {
			return out, nil
		}
		// Reclaim a passed lease; the update is conditional, so one racer
		// wins and the others loop and see its live lease.
		p.LeaseToken = uuid.New()
		if out, done, err := s.write(ctx, s.repo.Reclaim, p, rec.ID, true); done {
			return out, err
		}
	}
	return Outcome{Kind: KindProcessing, RetryAfter: time.Second}, nil
}

// write runs stmt; done is false when nothing was written. On error it
// releases a possibly written claim first.
func (s *Service) write(ctx context.Context, stmt func(context.Context, ClaimParams) (*Record, error),
	p ClaimParams, rowID uuid.UUID, reclaimed bool) (_ Outcome, done bool, _ error) {
	rec, err := stmt(ctx, p)
	if err != nil {
		return Outcome{}, true, s.releaseOrphan(ctx, p.OrganizationID, rowID, p.LeaseToken, err)
	}
	if rec == nil {
		return Outcome{}, false, nil
	}
	return claimed(rec, reclaimed), true, nil
}

// judge classifies a retained row; settled is false for a processing row
// whose lease has passed.
func judge(rec *Record, requestHash string) (Outcome, bool) {
	switch {
	case rec.RequestHash != requestHash:
		return Outcome{Kind: KindConflict}, true
	case rec.Status == StatusCompleted:
		return Outcome{
			Kind:         KindCompleted,
			Response:     rec.Response,
			ResourceType: rec.ResourceType,
			ResourceID:   rec.ResourceID,
			Ref:          parseRef(rec.Response),
		}, true
	case rec.LeaseLive():
		return Outcome{Kind: KindProcessing, RetryAfter: rec.LeaseExpiresAt.Sub(rec.ObservedAt)}, true
	}
	return Outcome{}, false
}

func claimed(rec *Record, reclaimed bool) Outcome {
	return Outcome{Kind: KindClaimed, Claim: &Claim{
		ID:             rec.ID,
		OrganizationID: rec.OrganizationID,
		Scope:          rec.Scope,
		Key:            rec.Key,
		RequestHash:    rec.RequestHash,
		LeaseToken:     rec.LeaseToken,
		ClaimedAt:      rec.ClaimedAt,
		LeaseExpiresAt: rec.LeaseExpiresAt,
		RetainUntil:    rec.RetainUntil,
		Reclaimed:      reclaimed,
	}}
}

// Complete stores c as the answer of claim. On false (lease taken over or
// claim ended) the caller must do nothing more. An invalid completion returns
// an error wrapping [ErrInvalid].
func (s *Service) Complete(ctx context.Context, claim *Claim, c Completion) (_ bool, err error) {
	defer dberr.Annotate(&err)
	return s.complete(ctx, s.repo, claim, c)
}

// CompleteTx is [Service.Complete] in tx; on false roll back.
func (s *Service) CompleteTx(ctx context.Context, tx DBTX, claim *Claim, c Completion) (_ bool, err error) {
	defer dberr.Annotate(&err)
	return s.complete(ctx, s.repo.WithTx(tx), claim, c)
}

// QueueComplete queues the fenced completion of claim on b, to commit in one
// round trip with the caller's writes. A lost fence aborts the transaction:
// the batch returns an error wrapping [ErrFenceLost]; roll back, do not
// retry. After the commit, call [QueuedCompletion.Announce]. An invalid
// completion returns an error wrapping [ErrInvalid] and queues nothing.
func (s *Service) QueueComplete(b *pgx.Batch, claim *Claim, c Completion) (*QueuedCompletion, error) {
	c, err := s.storedCompletion(claim, c)
	if err != nil {
		return nil, err
	}
	q := &QueuedCompletion{repo: s.repo, claim: claim}
	scope, id := claim.Scope, claim.ID
	b.Queue(claimCompleteOrAbort, claim.OrganizationID, claim.ID, claim.LeaseToken,
		sqlarg.Null(c.ResourceType), sqlarg.Null(c.ResourceID), sqlarg.JSON(c.Response)).
		QueryRow(func(row pgx.Row) error {
			err := row.Scan(&q.waited)
			switch {
			case dberr.Code(err) == sqlStateFenceLost:
				s.cfg.Observer.ObserveFenceLost(scope, "complete")
				return fmt.Errorf("%w: claim %s", ErrFenceLost, id)
			case err != nil:
				return fmt.Errorf("idempotency: complete claim: %w", err)
			}
			return nil
		})
	return q, nil
}

// QueuedCompletion is a completion queued by [Service.QueueComplete].
type QueuedCompletion struct {
	repo   *Repository
	claim  *Claim
	waited bool // set when the batch ran the completion
}

// Announce notifies waiters, if any marked the claim, on the batch's
// connection after its COMMIT succeeded; best effort (waiters reread at
// lease end).
func (q *QueuedCompletion) Announce(ctx context.Context, db DBTX) {
	if q.waited {
		_ = q.repo.announceEnd(ctx, db, q.claim.OrganizationID, q.claim.Scope, q.claim.Key)
	}
}

// storedCompletion validates c, replacing an oversized response by a [ResourceRef].
func (s *Service) storedCompletion(claim *Claim, c Completion) (Completion, error) {
	if claim == nil {
		return c, &InputError{Field: "claim", Reason: "is nil; only a claimed outcome can be completed"}
	}
	if err := validateCompletion(c); err != nil {
		return c, err
	}
	if len(c.Response) > s.cfg.MaxResponseBytes {
		if c.ResourceID == "" {
			return c, &InputError{Field: "response", Reason: fmt.Sprintf(
				"is %d bytes, over the store limit of %d, and names no resource to refer to", len(c.Response), s.cfg.MaxResponseBytes)}
		}
		ref, err := json.Marshal(struct {
			Ref ResourceRef `json:"resource_ref"`
		}{ResourceRef{Type: c.ResourceType, ID: c.ResourceID}})
		if err != nil {
			return c, err
		}
		c.Response = ref
	}
	return c, nil
}

func (s *Service) complete(ctx context.Context, repo *Repository, claim *Claim, c Completion) (bool, error) {
	c, err := s.storedCompletion(claim, c)
	if err != nil {
		return false, err
	}
	rec, err := repo.Complete(ctx, claim.OrganizationID, claim.ID, claim.LeaseToken, c.ResourceType, c.ResourceID, c.Response)
	if err != nil {
		return false, err
	}
	if rec == nil {
		s.cfg.Observer.ObserveFenceLost(claim.Scope, "complete")
	}
	return rec != nil, nil
}

// Release deletes claim after a failure that made no effect. On false (lease
// taken over) the caller must do nothing more.
func (s *Service) Release(ctx context.Context, claim *Claim) (_ bool, err error) {
	defer dberr.Annotate(&err)
	if claim == nil {
		return false, &InputError{Field: "claim", Reason: "is nil; only a claimed outcome can be released"}
	}
	ok, err := s.releaseRetrying(ctx, claim.OrganizationID, claim.ID, claim.LeaseToken, releaseAttempts)
	if err == nil && !ok {
		s.cfg.Observer.ObserveFenceLost(claim.Scope, "release")
	}
	return ok, err
}

// releaseRetrying retries transport failures: a release often follows a
// broken connection, and the fenced delete is idempotent.
func (s *Service) releaseRetrying(ctx context.Context, org, id, token uuid.UUID, attempts int) (ok bool, err error) {
	for attempt := range attempts {
		if ok, err = s.repo.Release(ctx, org, id, token); !dberr.Transport(err) {
			break
		}
		if attempt+1 < attempts && !loop.Sleep(ctx, min(time.Duration(attempt+1)*50*time.Millisecond, 500*time.Millisecond)) {
			break
		}
	}
	return ok, err
}

// releaseOrphan releases the claim a statement may have committed when its
// reply was lost (id and token were minted beforehand), on a detached context
// bounded by [Config.OrphanReleaseTimeout]; a server error ([dberr.Answered])
// wrote nothing. It returns cause, joined with the release error if any.
func (s *Service) releaseOrphan(ctx context.Context, org, id, token uuid.UUID, cause error) error {
	if dberr.Answered(cause) {
		return cause
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OrphanReleaseTimeout)
	defer cancel()
	// More attempts: the lost reply usually took the pool's idle
	// connections with it, and each attempt may draw a dead one.
	if _, err := s.releaseRetrying(rctx, org, id, token, orphanReleaseAttempts); err != nil {
		return errors.Join(cause, fmt.Errorf("idempotency: release the claim the failed statement may have written: %w", err))
	}
	return cause
}

// Attempts of one Release and of the release after a lost reply.
const (
	releaseAttempts       = 3
	orphanReleaseAttempts = 10
)

// MaxKeyLen is the longest key, in bytes.
const MaxKeyLen = 255

// maxHashLen bounds a request hash; a hex SHA-256 is 64 bytes.
const maxHashLen = 128

func validateKey(organizationID uuid.UUID, scope, key, requestHash string) (time.Duration, error) {
	if organizationID == uuid.Nil {
		return 0, &InputError{Field: "organization_id", Reason: "is the nil UUID"}
	}
	if scope == "" {
		return 0, &InputError{Field: "scope", Reason: "is empty"}
	}
	retention, err := Retention(scope)
	if err != nil {
		return 0, err
	}
	if err := ValidateKey(key); err != nil {
		return 0, err
	}
	if requestHash == "" || len(requestHash) > maxHashLen || !printableASCII(requestHash) {
		return 0, &InputError{Field: "request_hash", Reason: "must be 1 to 128 printable ASCII characters"}
	}
	return retention, nil
}

// ValidateKey returns an [*InputError] when key is empty, longer than
// [MaxKeyLen] bytes, not valid UTF-8 or holds a control character.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return &InputError{Field: "key", Reason: "is empty"}
	case len(key) > MaxKeyLen:
		return &InputError{Field: "key", Reason: "is longer than 255 bytes"}
	case !utf8.ValidString(key):
		return &InputError{Field: "key", Reason: "is not valid UTF-8"}
	case strings.ContainsFunc(key, unicode.IsControl):
		return &InputError{Field: "key", Reason: "holds a control character"}
	}
	return nil
}

func printableASCII(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x21 || r > 0x7e })
}

const maxResourceLen = 255

func validateCompletion(c Completion) error {
	if (c.ResourceType == "") != (c.ResourceID == "") {
		return &InputError{Field: "completion", Reason: "a resource needs both its type and its id"}
	}
	if len(c.ResourceType) > maxResourceLen || len(c.ResourceID) > maxResourceLen {
		return &InputError{Field: "completion", Reason: "resource type and id are at most 255 bytes"}
	}
	if len(c.Response) == 0 && c.ResourceID == "" {
		return &InputError{Field: "completion", Reason: "records neither a response nor a resource"}
	}
	if len(c.Response) > 0 && !isJSONObject(c.Response) {
		return &InputError{Field: "response", Reason: "is not a JSON object"}
	}
	return nil
}

func isJSONObject(b json.RawMessage) bool {
	trimmed := bytes.TrimLeft(b, " \t\n\r")
	return len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(b)
}
