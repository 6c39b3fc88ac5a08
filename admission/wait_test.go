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
	holder := withHooks(mustStarter(b.deps, Config{Hub: hub}), func(context.Context) error {
		close(entered)
		<-fail
		return errLostConnection // retryable: the holder releases its claim
	}, nil)
	held := make(chan error, 1)
	go func() {
		_, err := holder.StartSavedSearch(b.ctx, b.start("k"))
		held <- err
	}()
	<-entered

	waiter := mustStarter(b.deps, Config{Hub: hub})
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

// TestTheStartThatFrozeAnswersCreatedWhoeverAdmits proves 201 belongs to
// the call that prepared the snapshot: a repeat that reads the completed
// claim and reaches the Run insert first is still a repeat (200), and the
// preparer, whose insert then finds the Run, answers 201.
func TestTheStartThatFrozeAnswersCreatedWhoeverAdmits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	frozen, resume := make(chan struct{}), make(chan struct{})
	preparer := withHooks(mustStarter(b.deps, Config{}), nil, func(context.Context) {
		close(frozen)
		<-resume
	})
	type answer struct {
		res Result
		err error
	}
	first := make(chan answer, 1)
	go func() {
		res, err := preparer.StartSavedSearch(b.ctx, b.start("k"))
		first <- answer{res, err}
	}()
	// A preparation that fails never reaches afterFreeze: wait for either,
	// so such a failure ends the test at once, named, rather than by the
	// test binary's timeout.
	select {
	case <-frozen:
	case got := <-first:
		t.Fatalf("the preparer answered %+v, %v before its freeze committed; want it to freeze, then wait", got.res, got.err)
	}
	repeat, err := b.starter.StartSavedSearch(b.ctx, b.start("k"))
	if err != nil {
		t.Fatalf("repeat: %v", err)
	}
	close(resume)
	got := <-first
	if got.err != nil {
		t.Fatalf("preparer: %v", got.err)
	}
	if repeat.Created || !got.res.Created {
		t.Errorf("repeat Created = %v, preparer Created = %v; want false for the repeat that admitted first, true for the preparer",
			repeat.Created, got.res.Created)
	}
	if repeat.Run.ID != got.res.Run.ID {
		t.Errorf("repeat Run %s, preparer Run %s; want one Run", repeat.Run.ID, got.res.Run.ID)
	}
}
