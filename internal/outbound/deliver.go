package outbound

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/searchd/searchd/internal/loop"
)

// Run runs lease passes until ctx ends, then waits for the deliveries in
// flight. Each pass leases at most min(free slots, c.Batch) items and
// delivers each on a goroutine holding one of c.Concurrency slots, on a
// context that outlives ctx: a request cancelled midway would leave its
// answer unknown, so each is bounded by its lease instead. What a failed
// pass leased is delivered too. A full pass is followed at once by the
// next; a short one waits for c.Interval, a wake or a freed slot. A failed
// pass is logged as "NAME: lease pass failed; backing off" and retried
// after a wait doubling up to 30 s. clock stubs the waits in tests.
func Run[T any](ctx context.Context, name string, c Config, wake <-chan struct{}, clock func(context.Context, time.Duration) bool,
	lease func(ctx context.Context, n int) ([]T, error), deliver func(ctx context.Context, item T)) {
	l := loop.Loop{Interval: c.Interval, MaxBackoff: maxFailWait, Wake: wake, Clock: clock,
		Failed: func(ctx context.Context, err error, next time.Duration) {
			c.Logger.LogAttrs(ctx, slog.LevelWarn, name+": lease pass failed; backing off",
				slog.String("error", err.Error()), slog.Duration("next", next))
		}}
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, c.Concurrency)
	freed := make(chan struct{}, 1)
	dctx := context.WithoutCancel(ctx)
	l.Run(ctx, func(ctx context.Context) (loop.Next, error) {
		free := cap(slots) - len(slots)
		if free == 0 {
			return loop.Next{Wake: freed}, nil
		}
		n := min(free, c.Batch)
		leased, err := lease(ctx, n)
		for _, item := range leased {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() {
					<-slots
					select {
					case freed <- struct{}{}:
					default:
					}
				}()
				deliver(dctx, item)
			})
		}
		switch {
		case err != nil:
			return loop.Next{}, err
		case len(leased) < n:
			return loop.Next{}, nil
		case n < free:
			return loop.Next{Now: true}, nil // the batch was the bound: more may be due
		default:
			return loop.Next{Wake: freed}, nil
		}
	})
}
