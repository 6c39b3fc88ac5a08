package webhooks

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
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
	answerBytes         = 1 << 10
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
// Every serve runs one; they share the deliveries through SKIP LOCKED.
type Worker struct {
	store  *Store
	cfg    WorkerConfig
	lease  time.Duration
	client *http.Client
	log    *slog.Logger
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
		client = &http.Client{
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: cfg.Concurrency,
				IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true},
		}
	}
	return &Worker{store: store, cfg: cfg, lease: LeaseFor(cfg.Timeout), client: client, log: cfg.Logger}, nil
}

// Run delivers due deliveries until ctx ends, then waits for those in
// flight (each bounded by its lease) and returns nil. A failed pass (the
// database down) is logged and retried after a wait doubling up to 30 s.
func (w *Worker) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, w.cfg.Concurrency)
	freed := make(chan struct{}, 1)
	dctx := context.WithoutCancel(ctx)
	failWait := w.cfg.Interval
	for ctx.Err() == nil {
		bySlots := false
		if free := cap(slots) - len(slots); free == 0 {
			bySlots = true
		} else {
			n := min(free, w.cfg.Batch)
			leased, err := w.store.LeasePass(ctx, n, w.lease)
			for _, l := range leased {
				slots <- struct{}{}
				wg.Go(func() {
					defer func() {
						<-slots
						select {
						case freed <- struct{}{}:
						default:
						}
					}()
					w.Deliver(dctx, l)
				})
			}
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				w.log.LogAttrs(ctx, slog.LevelWarn, "webhooks: lease pass failed; backing off",
					slog.String("error", err.Error()), slog.Duration("next", failWait))
				sleep(ctx, failWait)
				failWait = min(2*failWait, maxFailWait)
				continue
			}
			failWait = w.cfg.Interval
			if len(leased) == n {
				if n < free {
					continue
				}
				bySlots = true
			}
		}
		var slot <-chan struct{}
		if bySlots {
			slot = freed
		}
		timer := time.NewTimer(w.cfg.Interval + rand.N(w.cfg.Interval/10+1))
		select {
		case <-ctx.Done():
		case <-timer.C:
		case <-slot:
		}
		timer.Stop()
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Deliver makes one attempt of a leased delivery and records it: what
// [Worker.Run] does for each, for a caller running its own passes. It
// reports whether the endpoint answered 2xx.
func (w *Worker) Deliver(ctx context.Context, l Leased) bool {
	base := ctx
	start := time.Now()
	a := w.post(ctx, l)
	e := End{Leased: l, Delivered: a.delivered, StatusCode: a.status, Answer: a.answer,
		Duration: time.Since(start), DisableAfter: w.cfg.DisableAfter}
	if !a.delivered {
		e.RetryIn = w.backoff(l.Attempt, a.retryAfter)
	}
	ectx, cancel := context.WithTimeout(base, recordTimeout)
	defer cancel()
	held, disabled, err := w.store.End(ectx, e)
	attrs := []slog.Attr{slog.String("organization_id", l.OrganizationID.String()),
		slog.String("endpoint_id", l.EndpointID.String()), slog.String("webhook_id", MessageID(l.RunID, l.Seq)),
		slog.Int("attempt", l.Attempt), slog.Int("status", a.status), slog.String("answer", a.answer)}
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
		w.log.LogAttrs(ctx, slog.LevelDebug, "webhooks: attempt", append(attrs, slog.Bool("delivered", a.delivered))...)
	}
	return a.delivered
}

type answer struct {
	delivered  bool
	status     int
	answer     string
	retryAfter time.Duration
}

// Body returns the message a delivery of l carries.
func Body(l Leased) ([]byte, error) {
	return json.Marshal(Message{Type: l.Event.Type, Timestamp: l.Event.OccurredAt, Data: l.Event})
}

// post sends l's message to its endpoint, signed with its secret.
func (w *Worker) post(ctx context.Context, l Leased) answer {
	body, err := Body(l)
	if err != nil {
		return answer{answer: "the message could not be encoded: " + err.Error()}
	}
	signer, err := standardwebhooks.NewWebhook(l.Secret)
	if err != nil {
		return answer{answer: "the endpoint's secret cannot sign"}
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.URL, bytes.NewReader(body))
	if err != nil {
		return answer{answer: "the request could not be built: " + err.Error()}
	}
	id, now := MessageID(l.RunID, l.Seq), time.Now()
	sig, err := signer.Sign(id, now, body)
	if err != nil {
		return answer{answer: "the message could not be signed: " + err.Error()}
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", w.cfg.UserAgent)
	h.Set(standardwebhooks.HeaderWebhookID, id)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(standardwebhooks.HeaderWebhookSignature, sig)
	res, err := w.client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return answer{answer: fmt.Sprintf("no answer within %s (timeout)", w.cfg.Timeout)}
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return answer{answer: "no answer: " + err.Error()}
	}
	defer res.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(res.Body, answerBytes))
	a := answer{status: res.StatusCode, answer: strings.TrimSpace(res.Status + " " + string(head))}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		a.delivered = true
	} else {
		a.retryAfter = retryAfter(res.Header.Get("Retry-After"), now)
	}
	return a
}

// retryAfter reads a Retry-After header: delay seconds or an HTTP date; 0
// when absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(min(n, 1<<20)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// backoff is the wait after a failed attempt: MinBackoff doubling per
// attempt up to MaxBackoff, drawn between half and all of it, at least the
// endpoint's Retry-After (up to MaxBackoff).
func (w *Worker) backoff(attempt int, after time.Duration) time.Duration {
	delay := w.cfg.MaxBackoff
	if shift := attempt - 1; shift >= 0 && shift < 32 {
		if v := w.cfg.MinBackoff << shift; v > 0 && v < delay {
			delay = v
		}
	}
	delay = delay/2 + rand.N(delay/2+1)
	if after > delay {
		delay = min(after, w.cfg.MaxBackoff)
	}
	return delay
}
