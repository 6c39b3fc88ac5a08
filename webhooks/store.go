package webhooks

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/searchd/searchd/dbclock"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/ids"
	"github.com/searchd/searchd/internal/outbound"
	"github.com/searchd/searchd/internal/shardpass"
	"github.com/searchd/searchd/internal/sqlarg"
)

// EventTypes are the types of a Run's events, in the order a Run may go
// through them.
var EventTypes = []string{"run.admitted", "run.dispatched", "run.running", "run.succeeded", "run.failed", "run.cancelled"}

// Endpoint states.
const (
	StateEnabled  = "enabled"
	StateDisabled = "disabled"
)

// Limits of an endpoint's fields and of the reads.
const (
	MaxURLBytes        = 2048
	MaxDescriptionLen  = 500
	MaxEndpoints       = 100
	DefaultListLimit   = 50
	MaxDeliveriesLimit = 200
	// KeptAttempts is how many attempts of a delivery are kept, the
	// newest; the delivery counts them all.
	KeptAttempts = 20
	// MaxAnswerLen bounds the recorded answer of an attempt, in characters.
	MaxAnswerLen = 2000
	// secretBytes is the length of a new endpoint's signing key.
	secretBytes = 32
)

var (
	// ErrNotFound reports an endpoint the organization does not have.
	ErrNotFound = errs.New(errs.NotFound, "webhooks: not found")
	// ErrInvalid reports input refused before any SQL.
	ErrInvalid = errs.New(errs.Invalid, "webhooks: invalid input")
	// ErrTooMany reports a new endpoint beyond [MaxEndpoints]: a 409
	// webhook_endpoint_limit.
	ErrTooMany = &errs.Error{Kind: errs.Conflict, Code: "webhook_endpoint_limit",
		Message: "webhooks: the organization has as many endpoints as it may",
		Detail:  fmt.Sprintf("your organization has %d webhook endpoints, the most it may have; delete one first", MaxEndpoints)}
)

// Config configures a [Store].
type Config struct {
	// Clock is the database clock (nil: the database's now()).
	Clock *dbclock.Clock
	// AllowHTTPLoopback accepts endpoint URLs of http:// to a loopback
	// host (localhost, 127.0.0.0/8, ::1), for development and tests;
	// otherwise an endpoint must be https.
	AllowHTTPLoopback bool
}

// DBTX is a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type DBTX interface {
	shardpass.DB
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Store keeps webhook endpoints and their deliveries. It is safe for
// concurrent use.
type Store struct {
	db  DBTX
	cfg Config
}

// NewStore returns a store running its statements on db. Every Config is
// valid.
func NewStore(db DBTX, cfg Config) *Store { return &Store{db: db, cfg: cfg} }

// Endpoint is an organization's webhook endpoint.
type Endpoint struct {
	OrganizationID uuid.UUID `json:"-"`
	ID             uuid.UUID `json:"id"`
	URL            string    `json:"url"`
	Description    string    `json:"description"`
	// EventTypes are the types it receives; nil is every type.
	EventTypes []string `json:"event_types"`
	// Secret is the whsec_ signing key; [Store.List] leaves it empty.
	Secret         string     `json:"secret,omitempty"`
	State          string     `json:"state"`
	DisabledReason *string    `json:"disabled_reason"`
	DisabledAt     *time.Time `json:"disabled_at"`
	// FailingSince is when the current run of failed attempts began;
	// nil while the last attempt delivered.
	FailingSince *time.Time `json:"failing_since"`
	CreatedAt    time.Time  `json:"created_at"`
	CreatedBy    string     `json:"created_by"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

// MarshalJSON writes every type for a nil EventTypes.
func (e Endpoint) MarshalJSON() ([]byte, error) {
	type plain Endpoint
	if e.EventTypes == nil {
		e.EventTypes = EventTypes
	}
	return json.Marshal(plain(e))
}

// CreateParams are a new endpoint's fields.
type CreateParams struct {
	URL         string
	Description string
	// EventTypes subscribes to these types; nil or empty is every type.
	EventTypes []string
	// Actor is the creator's credential subject.
	Actor string
}

// UpdateParams change an endpoint; a nil field is left as it is.
type UpdateParams struct {
	URL         *string
	Description *string
	EventTypes  *[]string
	// State enables or disables it. Enabling a disabled endpoint clears
	// its failure and makes its pending deliveries due at once.
	State *string
	// Actor is who changes it, named in the reason of a disable.
	Actor string
}

// checkURL returns a field error for a URL an endpoint may not have.
func (s *Store) checkURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case raw == "" || err != nil || u.Host == "" || u.User != nil:
		return invalid("url", "must be an absolute https URL without credentials")
	case len(raw) > MaxURLBytes:
		return invalid("url", fmt.Sprintf("must be at most %d bytes", MaxURLBytes))
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && s.cfg.AllowHTTPLoopback && loopback(u.Hostname()):
		return nil
	case u.Scheme == "http" && s.cfg.AllowHTTPLoopback:
		return invalid("url", "must be https (http only to a loopback host)")
	}
	return invalid("url", "must be https")
}

func loopback(host string) bool { return host == "localhost" || net.ParseIP(host).IsLoopback() }

func invalid(field, msg string) error {
	return &errs.Error{Kind: errs.Invalid, Err: fmt.Errorf("%w: %s %s", ErrInvalid, field, msg),
		Fields: []errs.Field{{Name: field, Message: msg}}}
}

// check returns the field error of the first set field of p that an
// endpoint may not have.
func (s *Store) check(p UpdateParams) error {
	if p.URL != nil {
		if err := s.checkURL(*p.URL); err != nil {
			return err
		}
	}
	if p.Description != nil && len([]rune(*p.Description)) > MaxDescriptionLen {
		return invalid("description", fmt.Sprintf("must be at most %d characters", MaxDescriptionLen))
	}
	if p.EventTypes != nil && slices.ContainsFunc(*p.EventTypes, func(t string) bool { return !slices.Contains(EventTypes, t) }) {
		return invalid("event_types", "must name only "+strings.Join(EventTypes, ", "))
	}
	if p.State != nil && *p.State != StateEnabled && *p.State != StateDisabled {
		return invalid("state", "must be enabled or disabled")
	}
	return nil
}

// typesArg is the stored form of event types: sorted and unique, NULL
// (every type) when none or not set.
func typesArg(types *[]string) any {
	if types == nil || len(*types) == 0 {
		return nil
	}
	sorted := slices.Clone(*types)
	slices.Sort(sorted)
	return slices.Compact(sorted)
}

// NewSecret returns a fresh signing key: whsec_ and the standard base64
// of 32 random bytes.
func NewSecret() string {
	b := make([]byte, secretBytes)
	rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// Create creates an enabled endpoint of org with a fresh secret and
// returns it. It returns an error wrapping [ErrInvalid], naming the field,
// for a URL that is not https (or http to loopback when allowed), a
// description over MaxDescriptionLen characters or an unknown event type,
// and an error wrapping [ErrTooMany] beyond MaxEndpoints.
func (s *Store) Create(ctx context.Context, org uuid.UUID, p CreateParams) (_ *Endpoint, err error) {
	defer dberr.Annotate(&err)
	if err := s.check(UpdateParams{URL: &p.URL, Description: &p.Description, EventTypes: &p.EventTypes}); err != nil {
		return nil, err
	}
	if p.Actor == "" {
		return nil, fmt.Errorf("%w: an endpoint needs its creator", ErrInvalid)
	}
	// The lock serializes the organization's creates, so two cannot both
	// take the last place.
	var e *Endpoint
	err = pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, endpointCreateLock, org); err != nil {
			return fmt.Errorf("webhooks: lock the organization's creates: %w", err)
		}
		var n int
		if err := tx.QueryRow(ctx, endpointCount, org).Scan(&n); err != nil {
			return fmt.Errorf("webhooks: count the organization's endpoints: %w", err)
		}
		if n >= MaxEndpoints {
			return ErrTooMany
		}
		rows, _ := tx.Query(ctx, endpointInsert, pgx.StrictNamedArgs{
			"org": org, "id": ids.New(), "url": p.URL, "description": p.Description, "event_types": typesArg(&p.EventTypes),
			"secret": NewSecret(), "actor": p.Actor, "now": s.cfg.Clock.Arg(),
		})
		e, err = pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByPos[Endpoint])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("webhooks: create: %w", err)
	}
	return e, nil
}

// Get returns endpoint id of org, with its secret, or [ErrNotFound].
func (s *Store) Get(ctx context.Context, org, id uuid.UUID) (_ *Endpoint, err error) {
	defer dberr.Annotate(&err)
	rows, _ := s.db.Query(ctx, endpointGet, org, id)
	e, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByPos[Endpoint])
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "webhooks: get")
	}
	return e, nil
}

// List returns org's endpoints, oldest first (at most MaxEndpoints),
// without their secrets.
func (s *Store) List(ctx context.Context, org uuid.UUID) (_ []Endpoint, err error) {
	defer dberr.Annotate(&err)
	rows, _ := s.db.Query(ctx, endpointList, org, MaxEndpoints)
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Endpoint])
	if err != nil {
		return nil, fmt.Errorf("webhooks: list: %w", err)
	}
	for i := range list {
		list[i].Secret = ""
	}
	return list, nil
}

// Update changes endpoint id of org and returns it, with its secret. It
// returns field errors as [Store.Create] does (and for a state other than
// enabled or disabled), or [ErrNotFound].
func (s *Store) Update(ctx context.Context, org, id uuid.UUID, p UpdateParams) (_ *Endpoint, err error) {
	defer dberr.Annotate(&err)
	if err := s.check(p); err != nil {
		return nil, err
	}
	rows, _ := s.db.Query(ctx, endpointUpdate, pgx.StrictNamedArgs{"org": org, "id": id, "now": s.cfg.Clock.Arg(),
		"set_url": p.URL != nil, "url": p.URL, "set_description": p.Description != nil, "description": p.Description,
		"set_event_types": p.EventTypes != nil, "event_types": typesArg(p.EventTypes), "state": p.State,
		"reason": "disabled by " + cmp.Or(p.Actor, "a user")})
	e, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByPos[Endpoint])
	if err != nil {
		return nil, sqlarg.RowError(err, ErrNotFound, "webhooks: update")
	}
	return e, nil
}

// Delete deletes endpoint id of org with its deliveries, or returns
// [ErrNotFound].
func (s *Store) Delete(ctx context.Context, org, id uuid.UUID) (err error) {
	defer dberr.Annotate(&err)
	tag, err := s.db.Exec(ctx, endpointDelete, org, id)
	if err != nil {
		return fmt.Errorf("webhooks: delete: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// RunError is a failed or cancelled Run's error, as the Run has it.
type RunError struct {
	Code    string  `json:"code"`
	Message *string `json:"message"`
}

// Event is one change of a Run, the data of a delivery's message (the
// API's RunEvent).
type Event struct {
	RunID      uuid.UUID `json:"run_id"`
	Seq        int64     `json:"seq"`
	Type       string    `json:"type"`
	Status     string    `json:"status"`
	OccurredAt time.Time `json:"occurred_at"`
	ResultRef  *string   `json:"result_ref,omitempty"`
	Error      *RunError `json:"error,omitempty"`
}

// Message is the body of a delivery: a Standard Webhooks message.
type Message = outbound.Message[Event]

// MessageID is the webhook-id of a Run's event seq: the same for every
// attempt and every endpoint, so a receiver drops what it has seen.
func MessageID(run uuid.UUID, seq int64) string { return fmt.Sprintf("run_%s_%d", run, seq) }

// Attempt is one attempt of a delivery.
type Attempt struct {
	Attempt    int        `json:"attempt"`
	StartedAt  time.Time  `json:"started_at"`
	EndedAt    *time.Time `json:"ended_at"`
	Outcome    string     `json:"outcome"`
	StatusCode *int       `json:"status_code"`
	DurationMS *float64   `json:"duration_ms"`
	Answer     *string    `json:"answer"`
}

// Delivery is one event's delivery to one endpoint, with its kept
// attempts.
type Delivery struct {
	OrganizationID uuid.UUID  `json:"-"`
	EndpointID     uuid.UUID  `json:"endpoint_id"`
	WebhookID      string     `json:"webhook_id"`
	Event          Event      `json:"event"`
	State          string     `json:"state"`
	Attempts       int        `json:"attempts"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	CreatedAt      time.Time  `json:"created_at"`
	LastAttemptAt  *time.Time `json:"last_attempt_at"`
	DeliveredAt    *time.Time `json:"delivered_at"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      *string    `json:"last_error"`
	// History are the newest KeptAttempts attempts, oldest first.
	History []Attempt `json:"attempt_history"`
}

// Deliveries returns at most limit (0 is DefaultListLimit) of endpoint
// id's newest deliveries, newest first, with their kept attempts. It
// returns [ErrNotFound] when org has no such endpoint, and an error
// wrapping [ErrInvalid] for a limit out of 1 to MaxDeliveriesLimit.
func (s *Store) Deliveries(ctx context.Context, org, id uuid.UUID, limit int) (_ []Delivery, err error) {
	defer dberr.Annotate(&err)
	limit = cmp.Or(limit, DefaultListLimit)
	if limit < 1 || limit > MaxDeliveriesLimit {
		return nil, invalid("limit", fmt.Sprintf("must be 1 to %d", MaxDeliveriesLimit))
	}
	if _, err := s.Get(ctx, org, id); err != nil {
		return nil, err
	}
	rows, _ := s.db.Query(ctx, deliveryList, org, id, limit)
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Delivery, error) {
		var (
			d             Delivery
			code, message *string
			next          time.Time
		)
		err := row.Scan(&d.OrganizationID, &d.EndpointID, &d.Event.RunID, &d.Event.Seq, &d.Event.Type, &d.Event.Status,
			&d.Event.OccurredAt, &d.Event.ResultRef, &code, &message, &d.State, &d.Attempts, &next, &d.CreatedAt,
			&d.LastAttemptAt, &d.DeliveredAt, &d.LastStatusCode, &d.LastError, &d.History)
		if code != nil {
			d.Event.Error = &RunError{Code: *code, Message: message}
		}
		if d.State == "pending" && !next.IsZero() && next.Year() < 9999 {
			d.NextAttemptAt = &next
		}
		d.WebhookID = MessageID(d.Event.RunID, d.Event.Seq)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("webhooks: deliveries: %w", err)
	}
	return list, nil
}

// Leased is a delivery a lease pass took, with what it carries and where.
type Leased struct {
	OrganizationID uuid.UUID
	EndpointID     uuid.UUID
	RunID          uuid.UUID
	Seq            int64
	// Attempt is the attempt's number, its fence.
	Attempt int
	Event   Event
	URL     string
	Secret  string
}

// LeasePass leases at most limit due deliveries for lease (see
// deliveryLease), one shard at a time on a cluster. Replicas running
// passes at once lease disjoint sets. It returns what it leased, with a
// shard's failure joined in err.
func (s *Store) LeasePass(ctx context.Context, limit int, lease time.Duration) (all []Leased, err error) {
	defer dberr.Annotate(&err)
	if limit < 1 || lease <= 0 {
		return nil, fmt.Errorf("%w: a lease pass needs a positive limit and lease", ErrInvalid)
	}
	clock, err := shardpass.Clock(ctx, s.db, s.cfg.Clock.Arg())
	if err != nil {
		return nil, fmt.Errorf("webhooks: lease: read the clock: %w", err)
	}
	all, err = outbound.Lease(ctx, s.db, leaseDue, limit, clock, lease, deliveryLease, pgx.NamedArgs{"kept": KeptAttempts},
		func(row pgx.CollectableRow) (Leased, error) {
			var (
				l             Leased
				code, message *string
			)
			err := row.Scan(&l.OrganizationID, &l.EndpointID, &l.RunID, &l.Seq, &l.Attempt, &l.Event.Type,
				&l.Event.Status, &l.Event.OccurredAt, &l.Event.ResultRef, &code, &message, &l.URL, &l.Secret)
			l.Event.RunID, l.Event.Seq = l.RunID, l.Seq
			l.Event.OccurredAt = l.Event.OccurredAt.UTC()
			if code != nil {
				l.Event.Error = &RunError{Code: *code, Message: message}
			}
			return l, err
		})
	if err != nil {
		return all, fmt.Errorf("webhooks: lease: %w", err)
	}
	return all, nil
}

// End is how one attempt ended, for [Store.End].
type End struct {
	Leased
	Delivered bool
	// StatusCode is the endpoint's HTTP status; 0 when none came.
	StatusCode int
	// Answer is what went wrong or what the endpoint answered.
	Answer   string
	Duration time.Duration
	// RetryIn is how long a failed attempt's retry waits.
	RetryIn time.Duration
	// DisableAfter is how long an endpoint may fail before this attempt
	// disables it.
	DisableAfter time.Duration
}

// End records how an attempt ended. It reports whether the fence held
// (false: the delivery was leased again or is delivered, and only the
// attempt's record changed) and whether this attempt disabled the
// endpoint.
func (s *Store) End(ctx context.Context, e End) (held, disabled bool, err error) {
	defer dberr.Annotate(&err)
	clock, err := shardpass.Clock(ctx, s.db, s.cfg.Clock.Arg())
	if err != nil {
		return false, false, fmt.Errorf("webhooks: end attempt: read the clock: %w", err)
	}
	code, answer := outbound.EndArgs(e.StatusCode, e.Answer, MaxAnswerLen)
	args := pgx.StrictNamedArgs{
		"org": e.OrganizationID, "endpoint": e.EndpointID, "run": e.RunID, "seq": e.Seq, "attempt": e.Attempt,
		"state": "pending", "next_attempt_at": clock.Add(max(e.RetryIn, 0).Truncate(time.Microsecond)),
		"delivered_at": nil, "status_code": code, "last_error": answer, "clock": clock, "outcome": "retry",
		"duration_us": e.Duration.Microseconds(), "answer": answer, "delivered": e.Delivered,
		"disable_before": clock.Add(-e.DisableAfter),
		"reason":         fmt.Sprintf("every attempt failed for more than %s", e.DisableAfter),
	}
	if e.Delivered {
		args["state"], args["next_attempt_at"], args["delivered_at"], args["last_error"], args["outcome"] =
			"delivered", nil, clock, nil, "delivered"
	}
	if err := s.db.QueryRow(ctx, deliveryEnd, args).Scan(&held, &disabled); err != nil {
		return false, false, fmt.Errorf("webhooks: end attempt: %w", err)
	}
	return held, disabled, nil
}
