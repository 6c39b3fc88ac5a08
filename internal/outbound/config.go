package outbound

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Defaults and limits of a [Config] that every sender shares; each sets
// its own back-off defaults and longest Timeout.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultInterval    = time.Second
	DefaultBatch       = 100
	DefaultConcurrency = 16
	MaxInterval        = time.Hour
	MaxBatch           = 1000
	MaxConcurrency     = 1000
	MaxMaxBackoff      = 24 * time.Hour
	// maxFailWait bounds the wait after lease passes that failed (the
	// database down), which doubles from the Interval.
	maxFailWait = 30 * time.Second
	// RecordTimeout bounds recording how an attempt ended.
	RecordTimeout = 10 * time.Second
)

// LeaseFor returns the lease of a delivery whose HTTP request may take
// timeout: long enough for a live sender to read the message and record
// the answer, so another takes a delivery over only from one that died or
// stalled.
func LeaseFor(timeout time.Duration) time.Duration { return timeout + max(5*time.Second, timeout/4) }

// Config is what a sender of signed POSTs is configured with;
// dispatch.Config and webhooks.WorkerConfig embed it. The zero value of
// every field is its default.
type Config struct {
	// Timeout bounds one delivery's HTTP request, from connecting to the
	// answer's first bytes; no answer within it is a failed attempt,
	// retried. Default 10 s. The lease is LeaseFor(Timeout).
	Timeout time.Duration
	// Interval is the time between two lease passes while nothing is due
	// (plus up to a tenth, so replicas do not poll in lock-step). Default
	// 1 s, at most MaxInterval.
	Interval time.Duration
	// Batch is the most deliveries one lease pass takes. Default 100,
	// 1 to MaxBatch.
	Batch int
	// Concurrency is the most deliveries in flight at once; a pass leases
	// no more than the free slots, so nothing leased waits for a slot.
	// Default 16, 1 to MaxConcurrency.
	Concurrency int
	// MinBackoff and MaxBackoff bound the wait before a retry: MinBackoff
	// after the first attempt, doubling with each, at most MaxBackoff,
	// each drawn between half and all of it; a Retry-After the receiver
	// sends is honoured up to MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Logger receives a line per failed delivery and per failed pass; nil
	// discards them. It never receives a secret.
	Logger *slog.Logger
	// Client sends the deliveries; nil is a client that follows no
	// redirects. Its own timeout, if any, adds to Timeout.
	Client *http.Client
	// UserAgent is sent with every delivery; default "searchd".
	UserAgent string
}

// WithDefaults returns c with its zero fields set to their defaults, the
// back-off's the sender's own.
func (c Config) WithDefaults(minBackoff, maxBackoff time.Duration) Config {
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	c.Batch = cmp.Or(c.Batch, DefaultBatch)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.MinBackoff = cmp.Or(c.MinBackoff, minBackoff)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, maxBackoff)
	c.UserAgent = cmp.Or(c.UserAgent, "searchd")
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	return c
}

// Check returns an error naming the field and its allowed range when c,
// with its defaults, is out of range: "NAME.F is V; it must be R", where
// name is the embedding config's ("dispatch: Config").
func (c Config) Check(name string, maxTimeout time.Duration) error {
	switch {
	case c.Timeout < 0 || c.Timeout > maxTimeout:
		return fmt.Errorf("%s.Timeout is %s; it must be more than 0s and at most %s", name, c.Timeout, maxTimeout)
	case c.Interval < 0 || c.Interval > MaxInterval:
		return fmt.Errorf("%s.Interval is %s; it must be more than 0s and at most %s", name, c.Interval, MaxInterval)
	case c.Batch < 1 || c.Batch > MaxBatch:
		return fmt.Errorf("%s.Batch is %d; it must be from 1 to %d", name, c.Batch, MaxBatch)
	case c.Concurrency < 1 || c.Concurrency > MaxConcurrency:
		return fmt.Errorf("%s.Concurrency is %d; it must be from 1 to %d", name, c.Concurrency, MaxConcurrency)
	case c.MinBackoff < 0 || c.MinBackoff > MaxMaxBackoff:
		return fmt.Errorf("%s.MinBackoff is %s; it must be more than 0s and at most %s", name, c.MinBackoff, MaxMaxBackoff)
	case c.MaxBackoff < c.MinBackoff || c.MaxBackoff > MaxMaxBackoff:
		return fmt.Errorf("%s.MaxBackoff is %s; it must be from %s (the first wait) to %s",
			name, c.MaxBackoff, c.MinBackoff, MaxMaxBackoff)
	}
	return nil
}
