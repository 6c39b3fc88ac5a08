package providerjobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/searchd/searchd/internal/dberr"
	"github.com/searchd/searchd/internal/loop"
	"github.com/searchd/searchd/internal/shardpass"
)

// ApplierConfig configures [Service.RunApplier].
type ApplierConfig struct {
	// Interval is the time between two polls of the inbox. Default 1 s.
	Interval time.Duration
	// Batch is the most arrivals one poll takes. Default 100.
	Batch int
	// MaxIdleBackoff bounds the wait after polls that failed (the database
	// down), which doubles from Interval. Default 30 s.
	MaxIdleBackoff time.Duration
	// Wake, when set, wakes the applier before its next poll is due; see
	// [Config.Wake].
	Wake <-chan struct{}
}

// WithDefaults returns c with zero fields set to their defaults.
func (c ApplierConfig) WithDefaults() ApplierConfig {
	c.Interval = cmp.Or(c.Interval, time.Second)
	c.Batch = cmp.Or(c.Batch, 100)
	c.MaxIdleBackoff = cmp.Or(c.MaxIdleBackoff, 30*time.Second)
	return c
}

// Validate reports a configuration that cannot work, naming the field:
// "providerjobs: ApplierConfig.F is V; it must be R".
func (c ApplierConfig) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Interval < 0 || c.Interval > time.Hour:
		return fmt.Errorf("providerjobs: ApplierConfig.Interval is %s; it must be from 0s to 1h0m0s", c.Interval)
	case c.Batch < 1 || c.Batch > 1000:
		return fmt.Errorf("providerjobs: ApplierConfig.Batch is %d; it must be from 1 to 1000", c.Batch)
	case c.MaxIdleBackoff < c.Interval:
		return fmt.Errorf("providerjobs: ApplierConfig.MaxIdleBackoff %s: must be at least Interval (%s)", c.MaxIdleBackoff, c.Interval)
	}
	return nil
}

// PassReport is what one pass of the applier did.
type PassReport struct {
	Taken int
	// Failed counts the arrivals left pending for a later attempt (a
	// failure, or a claim another worker holds live).
	Applied, Dropped, Failed int
}

var inboxPass = shardpass.New("agent.provider_inbox", inboxDue)

// ApplyPending is one pass of the applier: it leases at most batch pending
// arrivals whose lease has passed (SKIP LOCKED, so replicas take disjoint
// batches) and applies each as the webhook handler does. A failed arrival
// stays pending until its backoff is over. The idempotency claim applies
// each at most once: a handler that wakes after its lease finds its fence
// gone.
//
// It returns an error only when a lease statement fails, after applying
// what the other statements leased.
func (s *Service) ApplyPending(ctx context.Context, batch int) (_ PassReport, err error) {
	defer dberr.Annotate(&err)
	var rep PassReport
	var taken []*InboxEntry
	take := pgx.NamedArgs{"now": s.nowArg(), "lease_us": s.cfg.Lease.Microseconds()}
	passErr := inboxPass.Run(ctx, s.db, batch, pgx.NamedArgs{"now": s.nowArg()}, func(ctx context.Context, g shardpass.Group) error {
		rows, _ := s.db.Query(ctx, inboxTake, g.Args(take))
		leased, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*InboxEntry, error) { return scanEntry(r) })
		taken = append(taken, leased...)
		return err
	})
	rep.Taken = len(taken)
	for _, e := range taken {
		if ctx.Err() != nil {
			// Left leased; taken again when the lease passes.
			break
		}
		actx, cancel := context.WithTimeout(ctx, s.cfg.ApplyTimeout)
		out, err := s.applyEntry(actx, e, ByApplier)
		cancel()
		switch {
		case err != nil:
			rep.Failed++
			var inFlight *errInFlight
			if !errors.As(err, &inFlight) {
				s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "providerjobs: applier: attempt failed; retrying after a backoff",
					slog.String("provider", e.Provider), slog.String("delivery_id", e.DeliveryID),
					slog.Int("attempt", e.Attempts), slog.String("error", err.Error()))
			}
			s.retryLater(ctx, e, s.backoff(e.Attempts), err)
		case out.Accepted:
			rep.Applied++
		default:
			rep.Dropped++
		}
	}
	if passErr != nil {
		return rep, fmt.Errorf("providerjobs: take pending arrivals: %w", passErr)
	}
	return rep, nil
}

// RunApplier runs the applier until ctx ends: every Interval (plus up to a
// tenth) or when woken, it makes passes of [Service.ApplyPending] until one
// takes less than a batch. After a failed pass the wait doubles up to
// MaxIdleBackoff.
func (s *Service) RunApplier(ctx context.Context, cfg ApplierConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.WithDefaults()
	loop.Loop{Interval: cfg.Interval, Backoff: 2 * cfg.Interval, MaxBackoff: cfg.MaxIdleBackoff,
		First: loop.Jitter(cfg.Interval), Wake: cfg.Wake, Clock: s.applierClock,
		Failed: func(ctx context.Context, err error, next time.Duration) {
			s.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "providerjobs: applier: pass failed; backing off",
				slog.String("error", err.Error()), slog.Duration("next", next))
		}}.Run(ctx, func(ctx context.Context) (loop.Next, error) { return s.applierPass(ctx, cfg.Batch) })
	return nil
}

// applierPass makes passes of [Service.ApplyPending] until one takes less
// than batch, then reports the inbox to the observer.
func (s *Service) applierPass(ctx context.Context, batch int) (loop.Next, error) {
	for ctx.Err() == nil {
		rep, err := s.ApplyPending(ctx, batch)
		if err != nil {
			return loop.Next{}, err
		}
		if rep.Taken > 0 {
			s.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "providerjobs: applier: pass",
				slog.Int("taken", rep.Taken), slog.Int("applied", rep.Applied),
				slog.Int("dropped", rep.Dropped), slog.Int("failed", rep.Failed))
		}
		if rep.Taken < batch {
			break
		}
	}
	if pending, oldest, err := readInboxStats(ctx, s.db, s.nowArg()); err == nil {
		s.cfg.Observer.ObserveInbox(pending, oldest)
	}
	return loop.Next{}, nil
}
