package webhooks

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/searchd/searchd/internal/loop"
	"github.com/searchd/searchd/internal/outbound"
)

// Defaults and limits of a [WorkerConfig].
const (
	DefaultTimeout      = 10 * time.Second
	DefaultInterval     = time.Second
	DefaultBatch        = 100
	DefaultConcurrency  = 16
	DefaultMinBackoff   = 5 * time.Second
	DefaultMaxBackoff   = time.Hour
	DefaultDisableAfter = 72 * time.Hour
	MaxTimeout          = time.Minute
	MaxInterval         = time.Hour
	MaxBatch            = 1000
	MaxConcurrency      = 1000
	MaxMaxBackoff       = 24 * time.Hour
	MinDisableAfter     = time.Minute
	MaxDisableAfter     = 30 * 24 * time.Hour
	maxFailWait         = 30 * time.Second
	recordTimeout       = 10 * time.Second
)

// LeaseFor returns the lease of a delivery whose request may take
// timeout: the timeout plus a quarter of it, at least 5 s more.
func LeaseFor(timeout time.Duration) time.Duration { return timeout + max(5*time.Second, timeout/4) }

// WorkerConfig configures a [Worker]; the zero value of every field is its
// default.
type WorkerConfig struct {
	// Timeout bounds one delivery's request, up to the answer's first
	// bytes; no answer in time is a failed attempt. Default 10 s, at
	// most MaxTimeout.
	Timeout time.Duration
	// Interval is the time between two lease passes while nothing is due
	// (plus up to a tenth). Default 1 s, at most MaxInterval.
	Interval time.Duration
	// Batch is the most deliveries one pass leases. Default 100.
	Batch int
	// Concurrency is the most deliveries in flight. Default 16.
	Concurrency int
	// MinBackoff and MaxBackoff bound the wait before a retry: MinBackoff
	// after the first failed attempt, doubling, at most MaxBackoff, each
	// drawn between half and all of it; a Retry-After is honoured up to
	// MaxBackoff. Defaults 5 s and 1 h.
	MinBackoff, MaxBackoff time.Duration
	// DisableAfter is how long an endpoint may fail every attempt before
	// it is disabled. Default 72 h, MinDisableAfter to MaxDisableAfter.
	DisableAfter time.Duration
	// Logger receives a line per disabled endpoint and failed pass; nil
	// discards them. It never receives a secret.
	Logger *slog.Logger
	// Client sends the deliveries; nil follows no redirects.
	Client *http.Client
	// UserAgent is sent with every delivery; default "searchd".
	UserAgent string
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c WorkerConfig) WithDefaults() WorkerConfig {
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	c.Batch = cmp.Or(c.Batch, DefaultBatch)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.MinBackoff = cmp.Or(c.MinBackoff, DefaultMinBackoff)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, DefaultMaxBackoff)
	c.DisableAfter = cmp.Or(c.DisableAfter, DefaultDisableAfter)
	c.UserAgent = cmp.Or(c.UserAgent, "searchd")
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate returns an error naming the field and its range when c, with
// its defaults, cannot run: "webhooks: WorkerConfig.F is V; it must be R".
func (c WorkerConfig) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Timeout < 0 || c.Timeout > MaxTimeout:
		return fmt.Errorf("webhooks: WorkerConfig.Timeout is %s; it must be more than 0s and at most %s", c.Timeout, MaxTimeout)
	case c.Interval < 0 || c.Interval > MaxInterval:
		return fmt.Errorf("webhooks: WorkerConfig.Interval is %s; it must be more than 0s and at most %s", c.Interval, MaxInterval)
	case c.Batch < 1 || c.Batch > MaxBatch:
		return fmt.Errorf("webhooks: WorkerConfig.Batch is %d; it must be from 1 to %d", c.Batch, MaxBatch)
	case c.Concurrency < 1 || c.Concurrency > MaxConcurrency:
		return fmt.Errorf("webhooks: WorkerConfig.Concurrency is %d; it must be from 1 to %d", c.Concurrency, MaxConcurrency)
	case c.MinBackoff < 0 || c.MinBackoff > MaxMaxBackoff:
		return fmt.Errorf("webhooks: WorkerConfig.MinBackoff is %s; it must be more than 0s and at most %s", c.MinBackoff, MaxMaxBackoff)
	case c.MaxBackoff < c.MinBackoff || c.MaxBackoff > MaxMaxBackoff:
		return fmt.Errorf("webhooks: WorkerConfig.MaxBackoff is %s; it must be from %s (the first wait) to %s",
			c.MaxBackoff, c.MinBackoff, MaxMaxBackoff)
	case c.DisableAfter < MinDisableAfter || c.DisableAfter > MaxDisableAfter:
		return fmt.Errorf("webhooks: WorkerConfig.DisableAfter is %s; it must be from %s to %s", c.DisableAfter, MinDisableAfter, MaxDisableAfter)
	}
	return nil
}

// Worker delivers the due deliveries of every organization's endpoints.
// Replicas share the deliveries through SKIP LOCKED.
type Worker struct {
	store  *Store
	cfg    WorkerConfig
	lease  time.Duration
	client *http.Client
	log    *slog.Logger
	clock  func(context.Context, time.Duration) bool // tests' stub of the waits of Run
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
	client := cfg.Client
	if client == nil {
		client = outbound.Client(cfg.Concurrency)
	}
	return &Worker{store: store, cfg: cfg, lease: LeaseFor(cfg.Timeout), client: client, log: cfg.Logger}, nil
}

// Run delivers due deliveries until ctx ends, then waits for those in
// flight (each bounded by its lease) and returns nil. A failed pass (the
// database down) is logged and retried after a wait doubling up to 30 s.
func (w *Worker) Run(ctx context.Context) error {
	l := loop.Loop{Interval: w.cfg.Interval, MaxBackoff: maxFailWait, Clock: w.clock,
		Failed: func(ctx context.Context, err error, next time.Duration) {
			w.log.LogAttrs(ctx, slog.LevelWarn, "webhooks: lease pass failed; backing off",
				slog.String("error", err.Error()), slog.Duration("next", next))
		}}
	lease := func(ctx context.Context, n int) ([]Leased, error) { return w.store.LeasePass(ctx, n, w.lease) }
	outbound.Deliver(ctx, l, w.cfg.Concurrency, w.cfg.Batch, lease, func(ctx context.Context, l Leased) { w.Deliver(ctx, l) })
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
	ectx, cancel := context.WithTimeout(base, recordTimeout)
	defer cancel()
	held, disabled, err := w.store.End(ectx, e)
	attrs := []slog.Attr{slog.String("organization_id", l.OrganizationID.String()),
		slog.String("endpoint_id", l.EndpointID.String()), slog.String("webhook_id", MessageID(l.RunID, l.Seq)),
		slog.Int("attempt", l.Attempt), slog.Int("status", a.Status), slog.String("answer", a.Text)}
	switch {
	case err != nil:
		w.log.LogAttrs(ctx, slog.LevelWarn, "webhooks: recording the attempt failed; it is delivered again after its lease",
			append(attrs, slog.String("error", err.Error()))...)
	case !held:
		w.log.LogAttrs(ctx, slog.LevelInfo, "webhooks: the lease had passed; another attempt owns the delivery", attrs...)
	case disabled:
		w.log.LogAttrs(ctx, slog.LevelWarn, "webhooks: endpoint disabled: every attempt failed for longer than the window",
			append(attrs, slog.Duration("window", w.cfg.DisableAfter))...)
	default:
		w.log.LogAttrs(ctx, slog.LevelDebug, "webhooks: attempt", append(attrs, slog.Bool("delivered", a.Delivered()))...)
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
	return outbound.Post(ctx, w.client, signer, l.URL, w.cfg.UserAgent, MessageID(l.RunID, l.Seq), body, w.cfg.Timeout)
}
