package runs_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/internal/keyset"
	"github.com/searchd/searchd/runs"
)

// listed is what the filter tests know of a Run they admitted.
type listed struct {
	id, search uuid.UUID
	key        string
	status     string
	created    time.Time
}

// matches says whether r is one of the Runs p's filters keep.
func (r listed) matches(p runs.ListParams) bool {
	return (p.SavedSearchID == nil || *p.SavedSearchID == r.search) &&
		(p.Status == "" || p.Status == r.status) &&
		(p.IdempotencyKey == "" || p.IdempotencyKey == r.key) &&
		(p.CreatedAfter.IsZero() || r.created.After(p.CreatedAfter)) &&
		(p.CreatedBefore.IsZero() || r.created.Before(p.CreatedBefore))
}

// TestListFiltersAloneAndCombined: every filter of List, alone and with
// the others, pages (two Runs a page) through exactly the organization's
// Runs it matches, newest first, each once, whatever the other
// organization holds under the same keys, statuses and instants.
func TestListFiltersAloneAndCombined(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := uuid.New()
	statuses := []string{runs.StatusQueued, runs.StatusDispatched, runs.StatusRunning,
		runs.StatusSucceeded, runs.StatusFailed, runs.StatusCancelled}
	first := b.saveSearchRun(t)
	second := b.saveSearchRun(t)
	var mine []listed // newest first
	for i := range 18 {
		b.clock.Advance(time.Second)
		key := fmt.Sprintf("k%d", i%9) // each key twice: once per surface
		var p runs.AdmitParams
		switch {
		case i < 9:
			p = direct(b.org, key, "h")
		case i%2 == 0:
			p = first(key)
		default:
			p = second(key)
		}
		run := b.admit(t, p)
		status := statuses[i%len(statuses)]
		if _, err := b.db.Exec(b.ctx, `UPDATE agent.runs SET status = $2 WHERE id = $1`, run.ID, status); err != nil {
			t.Fatal(err)
		}
		var search uuid.UUID
		if p.SavedSearchID != nil {
			search = *p.SavedSearchID
		}
		mine = append([]listed{{run.ID, search, key, status, run.CreatedAt}}, mine...)
		// The other organization: a Run with the same key, status and
		// instant, which no list of b.org may show.
		o := direct(other, key+fmt.Sprint(i), "h")
		o.StartKey = runs.DirectStartKey(key)
		if i >= 9 {
			o.StartKey = runs.DirectStartKey(key + "-again")
		}
		orun := b.admit(t, o)
		if _, err := b.db.Exec(b.ctx, `UPDATE agent.runs SET status = $2 WHERE id = $1`, orun.ID, status); err != nil {
			t.Fatal(err)
		}
	}
	searchID := mine[0].search
	at := func(i int) time.Time { return mine[len(mine)-1-i].created } // the i-th admitted
	cases := []runs.ListParams{
		{},
		{SavedSearchID: &searchID},
		{Status: runs.StatusQueued},
		{Status: runs.StatusSucceeded},
		{Status: runs.StatusDispatched},
		{IdempotencyKey: "k3"},
		{IdempotencyKey: "k3-again"},
		{IdempotencyKey: "nobody"},
		{CreatedAfter: at(4)},
		{CreatedBefore: at(12)},
		{CreatedAfter: at(2), CreatedBefore: at(15)},
		{CreatedAfter: at(5), CreatedBefore: at(5)},
		{SavedSearchID: &searchID, Status: runs.StatusRunning},
		{Status: runs.StatusFailed, CreatedAfter: at(3), CreatedBefore: at(17)},
		{SavedSearchID: &searchID, IdempotencyKey: "k2"},
		{Status: runs.StatusQueued, IdempotencyKey: "k0"},
		{SavedSearchID: &searchID, Status: runs.StatusCancelled, IdempotencyKey: "k5",
			CreatedAfter: at(0), CreatedBefore: at(17)},
		{CreatedAfter: keyset.MinInstant, CreatedBefore: keyset.MaxInstant},
	}
	for _, p := range cases {
		var want []uuid.UUID
		for _, r := range mine {
			if r.matches(p) {
				want = append(want, r.id)
			}
		}
		p.Limit = 2
		var got []uuid.UUID
		for pages := 0; ; pages++ {
			if pages > len(mine) {
				t.Fatalf("List(%+v) never returned an empty next cursor", p)
			}
			page, next, err := b.store.List(b.ctx, b.org, p)
			if err != nil {
				t.Fatalf("List(%+v): %v", p, err)
			}
			for _, r := range page {
				if r.OrganizationID != b.org {
					t.Errorf("List(%+v) showed Run %s of organization %s", p, r.ID, r.OrganizationID)
				}
				got = append(got, r.ID)
			}
			if next == "" {
				break
			}
			p.Cursor = next
		}
		p.Cursor = ""
		if !slices.Equal(got, want) {
			t.Errorf("List(%+v) = %v, want %v", p, got, want)
		}
	}
}

// saveSearchRun makes a saved search and a snapshot of it, and returns a
// function giving the params of a Run on them under a key.
func (b bundle) saveSearchRun(t *testing.T) func(key string) runs.AdmitParams {
	t.Helper()
	p := b.savedSearchRun(t, "template")
	return func(key string) runs.AdmitParams {
		q := p
		q.StartKey, q.RequestHash = runs.SavedSearchStartKey(key), "h-"+key
		return q
	}
}

// TestListRefusesBadFiltersBeforeSQL: an unknown status, an over-long key
// and an instant outside the cursor's range are ErrInvalid.
func TestListRefusesBadFiltersBeforeSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, p := range []runs.ListParams{
		{Status: "done"},
		{IdempotencyKey: string(make([]byte, runs.MaxStartKeyLen))},
		{CreatedAfter: keyset.MinInstant.Add(-time.Microsecond)},
		{CreatedBefore: keyset.MaxInstant.Add(time.Microsecond)},
	} {
		if _, _, err := b.store.List(b.ctx, b.org, p); !errors.Is(err, runs.ErrInvalid) {
			t.Errorf("List(%+v) = %v, want ErrInvalid", p, err)
		}
	}
}
