package outbound

import (
	"context"
	"sync"

	"github.com/searchd/searchd/internal/loop"
)

// Deliver runs l's passes until ctx ends, then waits for the deliveries in
// flight. Each pass leases at most min(free slots, batch) items and
// delivers each on a goroutine holding a slot, on a context that outlives
// ctx: a request cancelled midway would leave its answer unknown, so each
// is bounded by its lease instead. What a failed pass leased is delivered
// too. A full pass is followed at once by the next; a pass bound by the
// slots also wakes on a freed slot.
func Deliver[T any](ctx context.Context, l loop.Loop, concurrency, batch int,
	lease func(ctx context.Context, n int) ([]T, error), deliver func(ctx context.Context, item T)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, concurrency)
	freed := make(chan struct{}, 1)
	dctx := context.WithoutCancel(ctx)
	l.Run(ctx, func(ctx context.Context) (loop.Next, error) {
		free := cap(slots) - len(slots)
		if free == 0 {
			return loop.Next{Wake: freed}, nil
		}
		n := min(free, batch)
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
