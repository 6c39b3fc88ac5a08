package providerjobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/ids"
	"github.com/searchd/searchd/internal/sqlarg"
	"github.com/searchd/searchd/runs"
)

// Errors carry the kinds of package errs; a transient database failure is an
// errs.Unavailable wrapping the driver error.
var (
	// ErrNotFound reports a job that does not exist in the organization.
	ErrNotFound = &errs.Error{Kind: errs.NotFound, Message: "providerjobs: job not found",
		Detail: "no such provider job in your organization"}
	// ErrRunNotFound reports a registration for a Run the organization lacks.
	ErrRunNotFound = &errs.Error{Kind: errs.NotFound, Message: "providerjobs: run not found",
		Detail: "no such run in your organization"}
	// ErrAlreadyRegistered reports a (provider, provider job id) pair the
	// organization registered already for another Run.
	ErrAlreadyRegistered = &errs.Error{Kind: errs.Conflict, Code: "already_registered",
		Message: "providerjobs: provider job already registered",
		Detail: "your organization registered this provider job id already, for another run; " +
			"a provider's job id names one job of an organization"}
	// ErrInvalid is wrapped by every input error, returned before any SQL.
	ErrInvalid = errs.New(errs.Invalid, "providerjobs: invalid input")
)

// Status is the state of a job.
type Status string

// The statuses of a job; succeeded and failed are terminal.
const (
	StatusPending   Status = "pending"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
)

// Terminal reports whether s is a status a job never leaves.
func (s Status) Terminal() bool { return s == StatusSucceeded || s == StatusFailed }

// Job is a job searchd started at a provider for a Run. Its fields are in
// the order of jobColumns, which rows are read by.
type Job struct {
	// ID is searchd's id of the job, named by its callback path.
	ID             uuid.UUID `json:"id"`
	OrganizationID uuid.UUID `json:"organization_id"`
	RunID          uuid.UUID `json:"run_id"`
	// Provider names the provider; its claim scope is webhook.<provider>.
	Provider string `json:"provider"`
	// ProviderJobID is unique per organization and provider.
	ProviderJobID string `json:"provider_job_id"`
	Status        Status `json:"status"`
	// Result is the last applied delivery's result, if any.
	Result json.RawMessage `json:"result"`
	// Version is 1 at registration and grows with every applied delivery.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// RegisterParams are the inputs of [Service.Register].
type RegisterParams struct {
	RunID uuid.UUID
	// Provider is a provider name; see [ValidateProvider].
	Provider string
	// ProviderJobID is the provider's id; see [ValidateJobID].
	ProviderJobID string
}

// MaxJobIDLen is the longest provider job id, in characters.
const MaxJobIDLen = 255

// DropRetention is how long drops and finished arrivals are kept: the longest
// claim retention, so a drop outlives any claim it could be compared with.
const DropRetention = idempotency.ToolRetention

// ValidateProvider returns an error wrapping [ErrInvalid] unless name is a
// dotted lower-case identifier such as "acme.jobs".
func ValidateProvider(name string) error {
	if _, err := idempotency.Retention(Scope(name)); err != nil {
		return fmt.Errorf("%w: provider %q is not a lower-case dotted identifier of at most 100 characters "+
			"(letters a-z, digits, '_', '-', dots between them)", ErrInvalid, name)
	}
	return nil
}

// Scope returns the claim scope of provider's deliveries.
func Scope(provider string) string { return idempotency.WebhookScopePrefix + provider }

// ValidateJobID returns an error wrapping [ErrInvalid] unless id is 1 to
// [MaxJobIDLen] characters of valid UTF-8 without control characters.
func ValidateJobID(id string) error {
	if id == "" || !utf8.ValidString(id) || utf8.RuneCountInString(id) > MaxJobIDLen || strings.ContainsFunc(id, unicode.IsControl) {
		return fmt.Errorf("%w: provider job id must be 1 to %d characters of UTF-8 without control characters",
			ErrInvalid, MaxJobIDLen)
	}
	return nil
}

// DB can begin transactions; a *pgxpool.Pool is one.
type DB interface {
	Querier
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Config configures a [Service].
type Config struct {
	// Observer counts drops and the inbox's work. Default [NopObserver].
	Observer Observer
	// ReleaseTimeout bounds releasing a claim after a failure. The release
	// runs on a context detached from the caller's, which may be the very
	// reason the delivery failed. Default 5 s.
	ReleaseTimeout time.Duration
	// Lease is the lease of a delivery: of its webhook.<provider> claim,
	// and of its arrival in the inbox while a worker applies it; the
	// applier takes a pending arrival over once it has passed. Default
	// idempotency.WebhookLease (30 s); shorter for tests.
	Lease time.Duration
	// ApplyTimeout bounds the handler's apply of the arrival it landed.
	// Default half the Lease, so a handler never applies past its lease.
	ApplyTimeout time.Duration
	// MaxBackoff bounds the wait between two failed attempts to apply an
	// arrival, which doubles from a second. Default 1 min.
	MaxBackoff time.Duration
	// Logger receives the failures that do not change an answer: an apply
	// left to the applier, a drop the audit could not record. Default
	// discards.
	Logger *slog.Logger
	// Wake, when set, is called (and must not block) when a copy meets an
	// arrival whose worker's lease has passed, so the applier of this
	// process takes it without waiting for its next poll.
	Wake func()

	// beforeApply, set by tests alone, runs inside the delivery's
	// transaction just before the job is updated; an error it returns is a
	// failure of the apply.
	beforeApply func(ctx context.Context, tx pgx.Tx) error
	// beforeAudit, set by tests alone, runs before each write to the drop
	// audit; an error it returns is a failure of that write.
	beforeAudit func() error
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Observer = cmp.Or[Observer](c.Observer, NopObserver{})
	c.ReleaseTimeout = cmp.Or(c.ReleaseTimeout, 5*time.Second)
	c.Lease = cmp.Or(c.Lease, idempotency.WebhookLease)
	c.ApplyTimeout = cmp.Or(c.ApplyTimeout, c.Lease/2)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, time.Minute)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	return c
}

// Service registers and reads provider jobs and receives their callbacks. It
// is safe for concurrent use.
type Service struct {
	db    DB
	plane *idempotency.Service
	cfg   Config
	// applierClock, set by tests alone, stubs the waits of RunApplier.
	applierClock func(context.Context, time.Duration) bool
}

// New returns a service on db that claims deliveries through plane, at its
// database clock.
func New(db DB, plane *idempotency.Service, cfg Config) *Service {
	return &Service{db: db, plane: plane, cfg: cfg.WithDefaults()}
}

func (s *Service) nowArg() any { return s.plane.Clock().Arg() }

// registerAttempts bounds retries when the conflicting job vanished with its
// Run between insert and lookup.
const registerAttempts = 3

// Register registers a pending job for Run p.RunID of org, with its directory
// entry in one transaction, and reports whether this call created it; the
// pair already registered for the same Run returns that job. Errors:
// [ErrInvalid] before any SQL, [ErrRunNotFound], [ErrAlreadyRegistered] for
// the pair registered for another Run.
func (s *Service) Register(ctx context.Context, org uuid.UUID, p RegisterParams) (_ *Job, _ bool, err error) {
	defer dberr.Annotate(&err)
	switch {
	case org == uuid.Nil:
		return nil, false, fmt.Errorf("%w: organization id is the nil UUID", ErrInvalid)
	case p.RunID == uuid.Nil:
		return nil, false, fmt.Errorf("%w: run id is the nil UUID", ErrInvalid)
	}
	if err := cmp.Or(ValidateProvider(p.Provider), ValidateJobID(p.ProviderJobID)); err != nil {
		return nil, false, err
	}
	for range registerAttempts {
		var job *Job
		err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
			var err error
			job, err = s.insertJob(ctx, tx, org, p)
			return err
		})
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return job, true, nil
		case errors.As(err, &pgErr) && pgErr.Code == "23503":
			// The Run was deleted between the read and the insert.
			return nil, false, ErrRunNotFound
		case !errors.Is(err, pgx.ErrNoRows):
			return nil, false, fmt.Errorf("providerjobs: register: %w", err)
		}
		// Nothing inserted: no such Run, or a conflict (DO NOTHING, so retries
		// log no error). This read sees a conflicting job committed after the
		// insert began.
		var runFound bool
		var existingID, existingRun *uuid.UUID
		if err := s.db.QueryRow(ctx, jobRegistered, org, p.RunID, p.Provider, p.ProviderJobID).
			Scan(&runFound, &existingID, &existingRun); err != nil {
			return nil, false, fmt.Errorf("providerjobs: register: read the registered job: %w", err)
		}
		switch {
		case !runFound:
			return nil, false, ErrRunNotFound
		case existingID == nil:
			// The conflicting job went with its Run meanwhile: try again.
			continue
		case *existingRun != p.RunID:
			return nil, false, ErrAlreadyRegistered
		}
		job, err = s.Get(ctx, org, *existingID)
		switch {
		case err == nil:
			return job, false, nil
		case !errors.Is(err, ErrNotFound):
			return nil, false, fmt.Errorf("providerjobs: register: %w", err)
		}
		// Gone since the lookup, with its Run: the next insert says so.
	}
	return nil, false, fmt.Errorf("providerjobs: register: the job (%s, %q) kept changing; retry", p.Provider, p.ProviderJobID)
}

// insertJob inserts the job and its directory entry, or returns pgx.ErrNoRows.
func (s *Service) insertJob(ctx context.Context, tx pgx.Tx, org uuid.UUID, p RegisterParams) (*Job, error) {
	rows, _ := tx.Query(ctx, jobInsert, pgx.StrictNamedArgs{
		"id": ids.New(), "org": org, "run_id": p.RunID, "provider": p.Provider,
		"provider_job_id": p.ProviderJobID, "now": s.nowArg(),
	})
	job, err := pgx.CollectOneRow(rows, pgx.RowToAddrOfStructByPos[Job])
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, directoryInsert, pgx.StrictNamedArgs{
		"provider": p.Provider, "provider_job_id": p.ProviderJobID, "org": org, "job_id": job.ID,
		"registered_at": job.CreatedAt, "retention_us": runs.Retention.Microseconds(),
	}); err != nil {
		return nil, fmt.Errorf("write the directory entry: %w", err)
	}
	return job, nil
}

// Get returns job id of org, or [ErrNotFound].
func (s *Service) Get(ctx context.Context, org, id uuid.UUID) (_ *Job, err error) {
	defer dberr.Annotate(&err)
	rows, _ := s.db.Query(ctx, jobGet, org, id)
	job, err := pgx.CollectOneRow(rows, pgx.RowToAddrOfStructByPos[Job])
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "providerjobs: get")
	}
	return job, nil
}
