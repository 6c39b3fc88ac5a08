package webhooks

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/internal/outbound"
)

// Defaults and limits of a [WorkerConfig] beside those of
// [outbound.Config].
const (
	DefaultMinBackoff   = 5 * time.Second
	DefaultMaxBackoff   = time.Hour
	DefaultDisableAfter = 72 * time.Hour
	MaxTimeout          = time.Minute
	MinDisableAfter     = time.Minute
	MaxDisableAfter     = 30 * 24 * time.Hour
)

// WorkerConfig configures a [Worker]; the zero value of every field is its
// default. Timeout is at most MaxTimeout; the back-off waits default to
// DefaultMinBackoff and DefaultMaxBackoff.
type WorkerConfig struct {
	outbound.Config
	// DisableAfter is how long an endpoint may fail every attempt before
	// it is disabled. Default 72 h, MinDisableAfter to MaxDisableAfter.
	DisableAfter time.Duration
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c WorkerConfig) WithDefaults() WorkerConfig {
	c.Config = c.Config.WithDefaults(DefaultMinBackoff, DefaultMaxBackoff)
	c.DisableAfter = cmp.Or(c.DisableAfter, DefaultDisableAfter)
	return c
}

// Validate returns an error naming the field and its range when c, with
// its defaults, cannot run: "webhooks: WorkerConfig.F is V; it must be R".
func (c WorkerConfig) Validate() error {
	c = c.WithDefaults()
	if err := c.Check("webhooks: WorkerConfig", MaxTimeout); err != nil {
		return err
	}
	if c.DisableAfter < MinDisableAfter || c.DisableAfter > MaxDisableAfter {
		return fmt.Errorf("webhooks: WorkerConfig.DisableAfter is %s; it must be from %s to %s", c.DisableAfter, MinDisableAfter, MaxDisableAfter)
	}
	return nil
}

// Worker delivers the due deliveries of every organization's endpoints.
// Replicas share the deliveries through SKIP LOCKED.
type Worker struct {
	store *Store
	cfg   WorkerConfig
	lease time.Duration
	clock func(context.Context, time.Duration) bool // tests' stub of the waits of Run
}

// NewWorker returns a worker of store's deliveries, or an error naming the
// field of cfg that cannot work.
func NewWorker(store *Store, cfg WorkerConfig) (*Worker, error) {
	if store == nil {
		return nil, errors.New("webhooks: a Worker needs a Store")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if cfg.Client == nil {
		cfg.Client = outbound.Client(cfg.Concurrency)
	}
	return &Worker{store: store, cfg: cfg, lease: outbound.LeaseFor(cfg.Timeout)}, nil
}

// Run delivers due deliveries as [outbound.Run] does until ctx ends, and
// returns nil.
func (w *Worker) Run(ctx context.Context) error {
	lease := func(ctx context.Context, n int) ([]Leased, error) { return w.store.LeasePass(ctx, n, w.lease) }
	outbound.Run(ctx, "webhooks", w.cfg.Config, nil, w.clock, lease, func(ctx context.Context, l Leased) { w.Deliver(ctx, l) })
	return nil
}

// Deliver makes one attempt of a leased delivery and records it, for a
// caller running its own passes. It reports whether the endpoint answered
// 2xx.
func (w *Worker) Deliver(ctx context.Context, l Leased) bool {
	base := ctx
	start := time.Now()
	a := w.post(ctx, l)
	e := End{Leased: l, Delivered: a.Delivered(), StatusCode: a.Status, Answer: a.Text,
		Duration: time.Since(start), DisableAfter: w.cfg.DisableAfter}
	if !a.Delivered() {
		e.RetryIn = outbound.Retry(l.Attempt, w.cfg.MinBackoff, w.cfg.MaxBackoff, a.RetryAfter)
	}
	ectx, cancel := context.WithTimeout(base, outbound.RecordTimeout)
	defer cancel()
	held, disabled, err := w.store.End(ectx, e)
	attrs := []slog.Attr{slog.String("organization_id", l.OrganizationID.String()),
		slog.String("endpoint_id", l.EndpointID.String()), slog.String("webhook_id", MessageID(l.RunID, l.Seq)),
		slog.Int("attempt", l.Attempt), slog.Int("status", a.Status), slog.String("answer", a.Text)}
	switch {
	case err != nil:
		w.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "webhooks: recording the attempt failed; it is delivered again after its lease",
			append(attrs, slog.String("error", err.Error()))...)
	case !held:
		w.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "webhooks: the lease had passed; another attempt owns the delivery", attrs...)
	case disabled:
		w.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "webhooks: endpoint disabled: every attempt failed for longer than the window",
			append(attrs, slog.Duration("window", w.cfg.DisableAfter))...)
	default:
		w.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "webhooks: attempt", append(attrs, slog.Bool("delivered", a.Delivered()))...)
	}
	return a.Delivered()
}

// Body returns the message a delivery of l carries.
func Body(l Leased) ([]byte, error) {
	return json.Marshal(Message{Type: l.Event.Type, Timestamp: l.Event.OccurredAt, Data: l.Event})
}

func (w *Worker) post(ctx context.Context, l Leased) outbound.Answer {
	body, err := Body(l)
	if err != nil {
		return outbound.Answer{Text: "the message could not be encoded: " + err.Error()}
	}
	signer, err := standardwebhooks.NewWebhook(l.Secret)
	if err != nil {
		return outbound.Answer{Text: "the endpoint's secret cannot sign"}
	}
	return outbound.Post(ctx, w.cfg.Client, signer, l.URL, w.cfg.UserAgent, MessageID(l.RunID, l.Seq), body, w.cfg.Timeout)
}
