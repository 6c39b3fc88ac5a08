package idempotency

import (
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
	"github.com/searchd/searchd/internal/fairq"
	"github.com/searchd/searchd/internal/loop"
)

// NotifyChannel is the channel on which the plane announces that a claim a
// waiter marked (a surface.saved_search.start claim; see
// [Service.ClaimWait]) ended: completed, or released while processing. The
// plane sends it on the connection that ended the claim, in its
// transaction when there is one: a trigger did before migration 00019, but
// on Citus a trigger fires on the worker that holds the claim's shard,
// while the waiters listen on the coordinator every replica connects to.
const NotifyChannel = "searchd_claim_ended"

// notifyPayload is the payload announced for a key:
// md5(organization_id/scope/key) in hex, fixed in size whatever the key.
func notifyPayload(organizationID uuid.UUID, scope, key string) string {
	sum := md5.Sum([]byte(organizationID.String() + "/" + scope + "/" + key))
	return hex.EncodeToString(sum[:])
}

// Hub wakes callers waiting for a claim to end. It holds one LISTEN
// connection for the whole process, however many callers wait, and wakes
// the waiters of a key when the database notifies that its claim ended.
// When the connection drops it wakes every waiter, because notifications
// sent while it was down are lost, and each waiter then reads the claim
// again. A Hub is safe for concurrent use; [Hub.Run] must be running for
// waiters to be woken early.
type Hub struct {
	connect func(ctx context.Context) (*pgx.Conn, error)
	logger  *slog.Logger

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
}

// NewHub returns a hub that opens its LISTEN connection with cfg, usually
// pool.Config().ConnConfig. A nil logger discards.
func NewHub(cfg *pgx.ConnConfig, logger *slog.Logger) *Hub {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Hub{
		connect: func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cfg.Copy()) },
		logger:  logger,
		waiters: map[string]map[chan struct{}]struct{}{},
	}
}

// Run listens until ctx ends, reconnecting with backoff when the connection
// fails, and returns ctx's error.
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
	// Waiters that subscribed before LISTEN took effect may have missed
	// their notification.
	h.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		h.wake(n.Payload)
	}
}

// subscribe registers interest in the end of the key's claim. The channel
// receives (without blocking the hub) when the claim may have ended; cancel
// must be called when the caller stops waiting.
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

// ClaimWait is [Service.Claim] that, when another worker holds a live lease
// on the key, waits up to wait for that claim to end instead of answering
// processing at once. It is woken by the database (LISTEN/NOTIFY through
// hub), not by polling, and reads the claim again when woken, when the
// holder's lease passes (so it reclaims a claim whose worker died) and when
// hub reconnects. It answers the first outcome that is not processing, or
// processing with the time left on the lease when wait runs out or ctx
// ends (also when ctx ends as it reads the claim again after a wake: the
// wait ended without the outcome, so a cut-off waiter answers processing,
// not the cancellation). Only scopes whose claims notify can be woken early
// ([NotifyChannel]); others are read again when their lease passes.
//
// While it waits it holds no connection, so when ctx carries an
// admission seat (package fairq) it gives the seat up for the wait and
// takes one again before it reads the claim again (fairq.Idle).
//
// A wait of zero or less is Claim. Errors are those of Claim, and
// [ErrNoHub] when wait is positive and hub is nil.
func (s *Service) ClaimWait(ctx context.Context, hub *Hub, organizationID uuid.UUID, scope, key, requestHash string, lease, wait time.Duration) (_ Outcome, err error) {
	defer dberr.Annotate(&err)
	if wait <= 0 {
		return s.Claim(ctx, organizationID, scope, key, requestHash, lease)
	}
	if hub == nil {
		return Outcome{}, ErrNoHub
	}
	deadline := time.Now().Add(wait)
	// Subscribe before the first read, so an end between the read and the
	// wait still wakes us.
	woken, cancel := hub.subscribe(organizationID, scope, key)
	defer cancel()
	var last Outcome // the previous round's answer, processing; zero before the first
	for {
		out, err := s.Claim(ctx, organizationID, scope, key, requestHash, lease)
		if err != nil && last.Kind == KindProcessing && ctx.Err() != nil {
			// Cut off as it read again after a wake: the wait ended
			// without the outcome, which is still processing, as below.
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
		// A completion notifies only a claim marked as waited for, so that
		// starts nobody waits for commit without NOTIFY's lock. The mark is
		// ordered against the completion by the claim's row lock: when it
		// finds nothing processing any more, the claim ended meanwhile, and
		// the next round reads the answer.
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
		// Past the holder's lease the claim is ours to reclaim; the small
		// margin keeps us from reading a lease that has not quite passed.
		if !doze(ctx, woken, min(left, out.RetryAfter+10*time.Millisecond)) {
			return out, nil // cut off while waiting: the answer is still processing
		}
	}
}

// doze waits d, or until woken or ctx ends. The wait holds no connection,
// so the request gives its admission seat up for it (see package fairq)
// and takes one again before its next statement. It reports false when
// ctx ended (even as it was woken) or no seat came back.
func doze(ctx context.Context, woken <-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	resume := fairq.Idle(ctx)
	select {
	case <-woken:
	case <-timer.C:
	case <-ctx.Done():
		return false
	}
	return ctx.Err() == nil && resume() == nil
}
