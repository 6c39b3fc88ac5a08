package idempotency

import (
	"cmp"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/loop"
	"github.com/searchd/searchd/internal/seatq"
)

// NotifyChannel carries the end of a waited-for claim. It is sent from the
// connection that ended the claim, not a trigger: on Citus a trigger fires on
// the worker, while waiters listen on the coordinator.
const NotifyChannel = "searchd_claim_ended"

// notifyPayload is md5(organization_id/scope/key) in hex.
func notifyPayload(organizationID uuid.UUID, scope, key string) string {
	sum := md5.Sum([]byte(organizationID.String() + "/" + scope + "/" + key))
	return hex.EncodeToString(sum[:])
}

// Hub wakes callers waiting for a claim to end, over one shared LISTEN
// connection; a dropped connection wakes every waiter. It is safe for
// concurrent use; [Hub.Run] must run for waiters to wake early.
type Hub struct {
	connect func(ctx context.Context) (*pgx.Conn, error)
	logger  *slog.Logger

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
}

// NewHub returns a hub that connects with cfg. A nil logger discards.
func NewHub(cfg *pgx.ConnConfig, logger *slog.Logger) *Hub {
	return &Hub{
		connect: func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cfg.Copy()) },
		logger:  cmp.Or(logger, slog.New(slog.DiscardHandler)),
		waiters: map[string]map[chan struct{}]struct{}{},
	}
}

// Run listens until ctx ends, reconnecting with backoff, and returns ctx's error.
func (h *Hub) Run(ctx context.Context) error {
	loop.Loop{Interval: 100 * time.Millisecond, MaxBackoff: 5 * time.Second,
		Failed: func(ctx context.Context, err error, next time.Duration) {
			h.logger.Warn("idempotency: claim notification listener failed; reconnecting",
				slog.String("error", err.Error()), slog.Duration("backoff", next))
		}}.Run(ctx, func(ctx context.Context) (loop.Next, error) {
		err := h.listen(ctx)
		h.wakeAll() // whatever was notified while we were not listening
		return loop.Next{}, err
	})
	return ctx.Err()
}

func (h *Hub) listen(ctx context.Context) error {
	conn, err := h.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return err
	}
	// Waiters subscribed before LISTEN took effect may have missed theirs.
	h.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		h.wake(n.Payload)
	}
}

// subscribe returns a channel signalled when the key's claim may have ended;
// call cancel when done.
func (h *Hub) subscribe(organizationID uuid.UUID, scope, key string) (<-chan struct{}, func()) {
	topic := notifyPayload(organizationID, scope, key)
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	set := h.waiters[topic]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		h.waiters[topic] = set
	}
	set[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(set, ch)
		if len(set) == 0 && h.waiters[topic] != nil && len(h.waiters[topic]) == 0 {
			delete(h.waiters, topic)
		}
	}
}

func (h *Hub) wake(topic string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.waiters[topic] {
		signal(ch)
	}
}

func (h *Hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.waiters {
		for ch := range set {
			signal(ch)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // already signalled; one wake-up is enough
	}
}

// ErrNoHub is returned by [Service.ClaimWait] asked to wait without a hub.
var ErrNoHub = errors.New("idempotency: waiting needs a Hub")

// ClaimWait is [Service.Claim] that waits up to wait for another worker's
// live claim to end, rereading when hub wakes it, reconnects, or the lease
// passes; it returns the first outcome that is not processing, or processing
// when wait or ctx runs out. Only [ScopeSavedSearchStart] claims notify.
// While waiting it holds no connection and gives up its seatq seat. A wait
// <= 0 is Claim. Errors are Claim's, and [ErrNoHub] for a nil hub.
func (s *Service) ClaimWait(ctx context.Context, hub *Hub, organizationID uuid.UUID, scope, key, requestHash string, lease, wait time.Duration) (_ Outcome, err error) {
	defer dberr.Annotate(&err)
	if wait <= 0 {
		return s.Claim(ctx, organizationID, scope, key, requestHash, lease)
	}
	if hub == nil {
		return Outcome{}, ErrNoHub
	}
	deadline := time.Now().Add(wait)
	// Subscribe first so an end between read and wait still wakes us.
	woken, cancel := hub.subscribe(organizationID, scope, key)
	defer cancel()
	var last Outcome // the previous round's answer, processing; zero before the first
	for {
		out, err := s.Claim(ctx, organizationID, scope, key, requestHash, lease)
		if err != nil && last.Kind == KindProcessing && ctx.Err() != nil {
			// Cut off rereading after a wake: still processing.
			return last, nil
		}
		if err != nil || out.Kind != KindProcessing {
			return out, err
		}
		last = out
		left := time.Until(deadline)
		if left <= 0 {
			return out, nil
		}
		// Only marked claims notify, so unwaited starts avoid NOTIFY's
		// lock; the row lock orders mark and completion.
		if scope == ScopeSavedSearchStart {
			marked, err := s.repo.MarkWaited(ctx, organizationID, scope, key)
			switch {
			case ctx.Err() != nil && (err != nil || !marked):
				return out, nil // cut off while marking, or as the claim ended: processing, as below
			case err != nil:
				return Outcome{}, err
			case !marked:
				continue
			}
		}
		// Past the lease the claim is ours; the margin avoids reading a
		// lease that has not quite passed.
		if !doze(ctx, woken, min(left, out.RetryAfter+10*time.Millisecond)) {
			return out, nil // cut off while waiting: the answer is still processing
		}
	}
}

// doze waits d, or until woken or ctx ends, without a seatq seat; false if
// ctx ended or no seat came back.
func doze(ctx context.Context, woken <-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	resume := seatq.Idle(ctx)
	select {
	case <-woken:
	case <-timer.C:
	case <-ctx.Done():
		return false
	}
	return ctx.Err() == nil && resume() == nil
}
