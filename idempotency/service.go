package idempotency

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// Kind says which of the endings of a claim a caller holds.
type Kind uint8

const (
	// KindAbsent: the journal has no answer. Only [Service.Read] answers it:
	// for no row, for a processing row whose lease has passed (its worker is
	// gone, and the next Claim reclaims it) and for a row past its retention.
	KindAbsent Kind = iota + 1
	// KindClaimed: the caller owns the key. Execute, then Complete or Release.
	KindClaimed
	// KindCompleted: the stored answer. Return it and mark the call replayed.
	KindCompleted
	// KindProcessing: another worker holds a live lease. The effect may be in
	// flight, so this is never a value: retry later, or drop at an HTTP edge.
	KindProcessing
	// KindConflict: the key is stored for a different request hash.
	KindConflict
)

var kindNames = [...]string{KindAbsent: "absent", KindClaimed: "claimed", KindCompleted: "completed",
	KindProcessing: "processing", KindConflict: "conflict"}

// String returns the kind's name as the seed and the metrics spell it.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// Claim is a claim the caller owns: what [Service.Complete] and
// [Service.Release] need to end it.
type Claim struct {
	ID             uuid.UUID
	OrganizationID uuid.UUID
	Scope          string
	Key            string
	RequestHash    string
	// LeaseToken is the fence this claim carries to its ending.
	LeaseToken     uuid.UUID
	ClaimedAt      time.Time
	LeaseExpiresAt time.Time
	RetainUntil    time.Time
	// Reclaimed reports whether the claim was taken over from a worker
	// whose lease had passed, rather than inserted new.
	Reclaimed bool
}

// Outcome is what Read and Claim answer. Each field but Kind belongs to one
// kind and is zero for every other.
type Outcome struct {
	Kind Kind
	// Claim is set for KindClaimed alone.
	Claim *Claim
	// Response, ResourceType and ResourceID are set for KindCompleted alone:
	// the stored answer.
	Response     json.RawMessage
	ResourceType string
	ResourceID   string
	// Ref is set for KindCompleted alone, when the stored response was
	// larger than the store limit and a reference to the resource stands
	// in its place: Response then holds the reference, and the caller reads
	// the body from the resource.
	Ref *ResourceRef
	// RetryAfter is set for KindProcessing alone: the time until the live
	// lease passes, by the database clock.
	RetryAfter time.Duration
}

// ResourceRef stands in for a response larger than the store limit. It is
// stored as {"resource_ref": {"type": ..., "id": ...}}, so a large answer is
// not kept for the whole retention of its claim: the resource holds it.
type ResourceRef struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// refPrefix starts every stored reference, as jsonb prints it.
var refPrefix = []byte(`{"resource_ref":`)

// parseRef returns the reference a stored response holds, or nil.
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

// InFlight returns an [*InFlightError] for a processing outcome and nil for
// every other kind. A caller that an orchestrator replays returns it, so the
// step fails and is retried after the lease.
func (o Outcome) InFlight(scope, key string) error {
	if o.Kind != KindProcessing {
		return nil
	}
	return &InFlightError{Scope: scope, Key: key, RetryAfter: o.RetryAfter}
}

// Completion is the answer a claim stores. It names a resource (both
// ResourceType and ResourceID), carries a Response, or both; one that records
// neither would replay an empty success and is refused.
type Completion struct {
	ResourceType string
	ResourceID   string
	// Response must be a JSON object when set. One larger than
	// [Config.MaxResponseBytes] is stored as a [ResourceRef] to the named
	// resource, so it must name one.
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

// Observer watches the plane. Its methods are called synchronously on the
// claim path, so they must be fast and must not block.
type Observer interface {
	// ObserveClaim is called once per Claim (and ClaimWait round) that
	// returns without error, with the outcome's kind as [Kind.String]
	// names it; reclaimed reports a claimed outcome that took over a
	// passed lease.
	ObserveClaim(scope, kind string, reclaimed bool)
	// ObserveFenceLost is called when Complete ("complete") or Release
	// ("release") finds that the lease moved on.
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

// Service owns duplicate semantics on top of a [Repository]. It is safe for
// concurrent use.
type Service struct {
	repo *Repository
	cfg  Config // with its defaults, and a nopObserver for a nil Observer
}

// NewService returns a service running its statements on db, usually a
// *pgxpool.Pool. Zero fields of cfg take their defaults. Every field is set
// in code, never read from the environment, so a config that fails
// [Config.Validate] is a programmer error: NewService panics with its
// message.
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

// Clock returns the database clock the service runs at, [Config.Clock]. A
// component built on the service runs at it too.
func (s *Service) Clock() *dbclock.Clock { return s.repo.clock }

// MaxResponseBytes returns the store limit of a response, [Config.MaxResponseBytes]
// with its default applied. A caller whose answer must replay whole (not as a
// [ResourceRef]) fits its response under it before it completes.
func (s *Service) MaxResponseBytes() int { return s.cfg.MaxResponseBytes }

// maxClaimRounds bounds how often Claim goes round when the row changes
// between its statements (released, swept, reclaimed by another worker).
// Each round needs another worker to change the row in between, so running
// out means the key is being worked on: the answer is processing.
const maxClaimRounds = 4

// Read answers what the journal holds for the key, and never writes. It
// returns absent when nothing is stored, when a processing claim's lease has
// passed (so the caller's Claim reclaims it) and when a row's retention has
// passed. The request hash is compared first, whatever the lease says.
// Invalid input returns an error wrapping [ErrInvalid] or [ErrUnknownScope]
// before any SQL runs.
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

// Claim claims the key for requestHash with a lease of the given length, or
// answers what holds it: completed, processing (a live lease, never stolen)
// or conflict (a different hash, whatever the lease says). A processing claim
// whose lease has passed is reclaimed atomically, by exactly one of any
// number of racing callers; a row past its retention is replaced as if absent.
//
// The retention is the scope's constant from [Retention], raised to the
// lease when the lease is longer. Invalid input returns an error wrapping
// [ErrInvalid] or [ErrUnknownScope] before any SQL runs; other errors come
// from the database. When the reply to the statement that writes the claim
// is lost (a cut connection, a timeout, ctx ending), the claim it may have
// committed is released before Claim returns its error, so a retry of the
// key proceeds at once instead of meeting a claim nobody holds for a whole
// lease; see [Config.OrphanReleaseTimeout]. (A statement still running in
// the server when the release runs, and committing after it, is not
// covered: its claim falls to the lease rules.)
//
// A new claim costs one statement, a replay two, a reclaim three.
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
		// The id is a primary key, time-ordered (internal/ids); the lease
		// token is a fence a worker proves its lease with, random.
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
		// Processing, same hash, lease passed: its worker is gone. The
		// reclaim is conditional, so of racing callers exactly one wins; a
		// loser goes round and reads the winner's live lease. A reclaim
		// keeps the row's id.
		p.LeaseToken = uuid.New()
		if out, done, err := s.write(ctx, s.repo.Reclaim, p, rec.ID, true); done {
			return out, err
		}
	}
	return Outcome{Kind: KindProcessing, RetryAfter: time.Second}, nil
}

// write runs stmt, a statement that may write the claim (rowID,
// p.LeaseToken), and reports done with the claim it wrote, or with its
// error after releasing what it may have written (releaseOrphan); done is
// false when it wrote nothing.
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

// judge classifies a retained row for requestHash. It reports settled false
// for a processing row whose lease has passed, which the caller may reclaim.
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

// Complete stores c as the answer of claim. It reports false and no error
// when the fence moved on (another worker reclaimed the key, or the claim
// already ended): the caller must then neither retry nor raise. An invalid
// completion returns an error wrapping [ErrInvalid] before any SQL runs.
func (s *Service) Complete(ctx context.Context, claim *Claim, c Completion) (_ bool, err error) {
	defer dberr.Annotate(&err)
	return s.complete(ctx, s.repo, claim, c)
}

// CompleteTx is [Service.Complete] inside the caller's transaction tx, so a
// local effect and the completion commit or roll back together. When it
// reports false the caller should roll back: the key belongs to another
// worker.
func (s *Service) CompleteTx(ctx context.Context, tx DBTX, claim *Claim, c Completion) (_ bool, err error) {
	defer dberr.Annotate(&err)
	return s.complete(ctx, s.repo.WithTx(tx), claim, c)
}

// QueueComplete queues on b the completion of claim with c, fenced by its
// lease token, for a caller that sends it in one round trip with its own
// writes and the COMMIT of their transaction (a [pgx.Batch] that began the
// transaction, or the batch after it). [Service.CompleteTx] reports a lost
// fence as false for the caller to roll back; a queued completion cannot,
// since the COMMIT is on its way before the answer comes back. So it fails
// instead: when the fence has moved on, the statement raises, the
// transaction is aborted, the statements queued after it (the COMMIT too)
// do not run, and nothing the transaction wrote is kept. The batch's
// results then return an error wrapping [ErrFenceLost]; the caller rolls
// back and must neither retry nor report a failure, because another worker
// owns the key. Once the batch has committed, the caller calls
// [QueuedCompletion.Announce], which tells the claim's waiters, if any.
//
// An invalid completion returns an error wrapping [ErrInvalid] and queues
// nothing.
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

// QueuedCompletion is a completion [Service.QueueComplete] queued on a
// batch.
type QueuedCompletion struct {
	repo   *Repository
	claim  *Claim
	waited bool // set when the batch ran the completion
}

// Announce tells the waiters of the claim that it ended ([NotifyChannel]),
// when a waiter marked it; otherwise it sends nothing. Call it on the
// connection that ran the batch, once its COMMIT succeeded: the waiters
// then read the answer. It is best effort: a waiter not told reads the
// claim again when the holder's lease passes.
func (q *QueuedCompletion) Announce(ctx context.Context, db DBTX) {
	if q.waited {
		_ = q.repo.announceEnd(ctx, db, q.claim.OrganizationID, q.claim.Scope, q.claim.Key)
	}
}

// storedCompletion checks c and returns what is stored for it: c, or c
// with a [ResourceRef] in place of a response over the store limit.
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

// Release deletes claim, which made no effect, so the next attempt executes.
// It reports false and no error when the fence moved on; the caller must
// then do nothing, because another worker owns the key.
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

// releaseRetrying deletes the processing claim (id, token). A release
// usually follows a failure, often of the very connection it would run on.
// The delete is fenced and idempotent (a second one finds nothing to
// delete), so a transport failure is retried: a release that fails once
// would leave the key blocked for a whole lease.
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

// releaseOrphan is what Claim does when a statement that may have written
// the claim (id, token) failed without an answer from the server: a cut
// connection, a timeout, the caller's context ending. The statement may
// have committed and only its reply been lost; the claim would then sit
// processing, held by nobody, and every retry would meet its live lease
// for a whole lease (at a webhook edge, a retry that meets it is dropped
// as a duplicate: the delivery would be lost). The id and the token were
// minted before the statement, so that exact claim is released, on a
// context detached from the caller's (which may be the very failure) and
// bounded by [Config.OrphanReleaseTimeout]. The release is fenced by the
// token: when the statement never ran it deletes nothing, and it can never
// delete a claim another worker holds. An answer of the server that the
// statement failed ([dberr.Answered]) means it wrote nothing, so none is
// needed; a Citus coordinator's "could not commit" is not such an answer. It returns cause, joined with the release's error when the
// release failed too.
func (s *Service) releaseOrphan(ctx context.Context, org, id, token uuid.UUID, cause error) error {
	if dberr.Answered(cause) {
		return cause
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OrphanReleaseTimeout)
	defer cancel()
	// More attempts than a Release: the failure that lost the reply (a cut
	// network, a restarted server) has usually taken every idle connection
	// of the pool with it, and each attempt may draw one that is dead.
	if _, err := s.releaseRetrying(rctx, org, id, token, orphanReleaseAttempts); err != nil {
		return errors.Join(cause, fmt.Errorf("idempotency: release the claim the failed statement may have written: %w", err))
	}
	return cause
}

// releaseAttempts bounds the attempts of one Release, and
// orphanReleaseAttempts those of the release after a lost reply.
const (
	releaseAttempts       = 3
	orphanReleaseAttempts = 10
)

// MaxKeyLen is the longest key, in bytes.
const MaxKeyLen = 255

// maxHashLen bounds a request hash; a hex SHA-256 is 64 bytes.
const maxHashLen = 128

// validateKey checks the inputs that address a claim and returns the scope's
// retention.
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
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return &InputError{Field: "key", Reason: "holds a control character"}
		}
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// maxResourceLen bounds a resource type or id.
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

// isJSONObject reports whether b is valid JSON whose top value is an object.
func isJSONObject(b json.RawMessage) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return json.Valid(b)
		}
		return false
	}
	return false
}
