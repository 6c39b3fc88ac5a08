package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/searchd/searchd/idempotency"
)

// runningHub starts a hub on the bundle's database for the test's life.
func (b bundle) runningHub(t *testing.T) *idempotency.Hub {
	t.Helper()
	hub := idempotency.NewHub(b.db.Config().ConnConfig, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return hub
}

func TestStarterWithoutAHubDoesNotWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.start("k")
	p.Wait = 10 * time.Second
	out, err := b.plane.Claim(b.ctx, b.org, idempotency.ScopeSavedSearchStart, "k",
		SavedSearchRequestHash(b.search.ID, p.Options), idempotency.SavedSearchStartLease)
	if err != nil || out.Kind != idempotency.KindClaimed {
		t.Fatalf("holder Claim = %v, %v", out.Kind, err)
	}
	began := time.Now()
	_, err = b.starter.StartSavedSearch(b.ctx, p)
	wantInFlight(t, err)
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("a starter without a hub answered after %s; want at once, whatever Wait says", d)
	}
}

func TestWaitingStartRunsItselfWhenTheHolderFailsAndReleases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hub := b.runningHub(t)
	entered, fail := make(chan struct{}), make(chan struct{})
	holder := NewStarter(b.db, b.plane, Config{Now: b.clock.Now, Hub: hub, beforeFreeze: func(context.Context) error {
		close(entered)
		<-fail
		return errLostConnection // retryable: the holder releases its claim
	}})
	held := make(chan error, 1)
	go func() {
		_, err := holder.StartSavedSearch(b.ctx, b.start("k"))
		held <- err
	}()
	<-entered

	waiter := NewStarter(b.db, b.plane, Config{Now: b.clock.Now, Hub: hub})
	p := b.start("k")
	p.Wait = 20 * time.Second
	type result struct {
		res Result
		err error
		at  time.Time
	}
	waited := make(chan result, 1)
	go func() {
		res, err := waiter.StartSavedSearch(b.ctx, p)
		waited <- result{res, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-waited:
		t.Fatalf("the waiter answered %+v, %v while the holder still froze", r.res, r.err)
	default:
	}

	released := time.Now()
	close(fail)
	if err := <-held; !errors.Is(err, errLostConnection) {
		t.Fatalf("holder = %v, want its failure", err)
	}
	r := <-waited
	if r.err != nil || !r.res.Created {
		t.Fatalf("waiter = %+v, %v; want it to claim the released key and admit the Run", r.res, r.err)
	}
	// The release notified; the 30 s lease and the 20 s wait did not run out.
	if d := r.at.Sub(released); d > 5*time.Second {
		t.Errorf("the waiter ran %s after the release, want it woken at once", d)
	}
	b.wantCounts(t, 1, 1)
}
