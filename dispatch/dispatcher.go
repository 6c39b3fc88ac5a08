package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/internal/outbound"
)

// Defaults and limits of a [Config] beside those of [outbound.Config].
const (
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 5 * time.Minute
	MaxTimeout        = 5 * time.Minute
	// MinSecretLen is the shortest signing key accepted, in bytes: the
	// Standard Webhooks specification asks for 24 to 64 random bytes.
	MinSecretLen = 24
)

// Observer receives the dispatcher's measurements; *telemetry.Metrics is
// one. Its methods must not block.
type Observer interface {
	ObserveDispatchAttempt(outcome string, d time.Duration)
}

// Config configures a [Dispatcher]. URL and Secret are required; the zero
// value of every other field is its default. Timeout is at most
// MaxTimeout; the back-off waits default to DefaultMinBackoff and
// DefaultMaxBackoff. Interval is the wait while nothing is due; a local
// admission wakes the dispatcher sooner ([Dispatcher.Wake]).
type Config struct {
	outbound.Config
	// URL is the runtime's endpoint every delivery is POSTed to: http or
	// https, absolute. Redirects are not followed.
	URL string
	// Secret is the Standard Webhooks signing key (the decoded bytes of a
	// whsec_ secret), at least MinSecretLen bytes.
	Secret []byte
	// Observer receives the measurements; nil drops them.
	Observer Observer
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Config = c.Config.WithDefaults(DefaultMinBackoff, DefaultMaxBackoff)
	return c
}

// Validate returns an error naming the field and its allowed range when c,
// with its defaults, cannot run: "dispatch: Config.F is V; it must be R".
// The ranges are checked before URL and Secret, so a Config without them
// still tells whether its other fields are in range (cmd/searchd asks).
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := c.Check("dispatch: Config", MaxTimeout); err != nil {
		return err
	}
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		return errors.New("dispatch: Config.URL is required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("dispatch: Config.URL is not an absolute http or https URL, such as https://runtime.internal/searchd/runs")
	case len(c.Secret) < MinSecretLen:
		return fmt.Errorf("dispatch: Config.Secret is a key of %d bytes; it must be at least %d", len(c.Secret), MinSecretLen)
	}
	return nil
}

// Dispatcher delivers the outbox's due dispatches to the runtime. It is
// safe for concurrent use.
type Dispatcher struct {
	store  *Store
	cfg    Config
	lease  time.Duration
	signer *standardwebhooks.Webhook
	wake   chan struct{}
	clock  func(context.Context, time.Duration) bool // tests' stub of the waits of Run
}

// NewDispatcher returns a dispatcher of store's outbox, or an error naming
// the field of cfg that cannot work.
func NewDispatcher(store *Store, cfg Config) (*Dispatcher, error) {
	if store == nil {
		return nil, errors.New("dispatch: a Dispatcher needs a Store")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	signer, err := standardwebhooks.NewWebhookRaw(cfg.Secret)
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	if cfg.Client == nil {
		cfg.Client = outbound.Client(cfg.Concurrency)
	}
	return &Dispatcher{store: store, cfg: cfg, lease: outbound.LeaseFor(cfg.Timeout), signer: signer, wake: make(chan struct{}, 1)}, nil
}

// Lease returns the lease of one delivery, outbound.LeaseFor(Config.Timeout).
func (d *Dispatcher) Lease() time.Duration { return d.lease }

// Wake makes a running dispatcher pass now; an admission in this process
// calls it. It never blocks.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers due dispatches as [outbound.Run] does, a Wake waking it
// too, until ctx ends, and returns nil. Replicas share the outbox through
// SKIP LOCKED.
func (d *Dispatcher) Run(ctx context.Context) error {
	lease := func(ctx context.Context, n int) ([]Leased, error) { return d.store.LeasePass(ctx, n, d.lease) }
	outbound.Run(ctx, "dispatch", d.cfg.Config, d.wake, d.clock, lease, func(ctx context.Context, l Leased) { d.Deliver(ctx, l) })
	return nil
}

// Deliver makes one attempt of a leased dispatch and records how it ended,
// for a caller that runs its own passes. It returns the outcome, or ""
// when nothing was sent (the Run is gone, or its message could not be
// read: the dispatch is leased again after its lease).
func (d *Dispatcher) Deliver(ctx context.Context, l Leased) Outcome {
	start := time.Now()
	base := ctx
	ctx, cancel := context.WithTimeout(base, d.lease)
	defer cancel()
	message, id := d.store.Message, l.RunID.String()
	if l.Cancel {
		message, id = d.store.CancelMessage, CancelMessageID(l.RunID)
	}
	body, err := message(ctx, l.OrganizationID, l.RunID)
	if errors.Is(err, ErrNotFound) {
		return "" // swept with its Run meanwhile: nothing to deliver
	}
	if err != nil {
		d.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "dispatch: reading the message failed; the dispatch is delivered again after its lease",
			slog.String("run_id", l.RunID.String()), slog.Int("attempt", l.Attempt), slog.String("error", err.Error()))
		return ""
	}
	a := outbound.Post(ctx, d.cfg.Client, d.signer, d.cfg.URL, d.cfg.UserAgent, id, body, d.cfg.Timeout)
	out := outcome(a)
	e := End{Leased: l, Outcome: out, StatusCode: a.Status, Answer: a.Text}
	if out == OutcomeRetry {
		e.RetryIn = outbound.Retry(l.Attempt, d.cfg.MinBackoff, d.cfg.MaxBackoff, a.RetryAfter)
	}
	// Not the lease's deadline: a dispatcher that stalled past its lease
	// still records its attempt (the fence keeps the dispatch safe).
	ectx, ecancel := context.WithTimeout(base, outbound.RecordTimeout)
	defer ecancel()
	held, err := d.store.End(ectx, e)
	if d.cfg.Observer != nil {
		d.cfg.Observer.ObserveDispatchAttempt(string(out), time.Since(start))
	}
	attrs := []slog.Attr{slog.String("run_id", l.RunID.String()), slog.Bool("cancel", l.Cancel), slog.Int("attempt", l.Attempt),
		slog.String("outcome", string(out)), slog.Int("status", a.Status), slog.String("answer", a.Text)}
	switch {
	case err != nil:
		d.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "dispatch: recording the attempt failed; the dispatch is delivered again after its lease",
			append(attrs, slog.String("error", err.Error()))...)
	case !held:
		d.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "dispatch: the lease had passed; another attempt owns the dispatch", attrs...)
	case out == OutcomeFailed:
		d.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "dispatch: the runtime refused the Run; the dispatch is failed until an operator retries it", attrs...)
	default:
		d.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "dispatch: attempt", append(attrs, slog.Duration("retry_in", e.RetryIn))...)
	}
	return out
}

// outcome classifies the runtime's answer to a delivery.
func outcome(a outbound.Answer) Outcome {
	switch code := a.Status; {
	case !a.Sent:
		return OutcomeFailed
	case a.Delivered():
		return OutcomeDelivered
	case code == 0, code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500:
		return OutcomeRetry
	default:
		// Retrying the same request cannot help; an operator retries.
		return OutcomeFailed
	}
}
