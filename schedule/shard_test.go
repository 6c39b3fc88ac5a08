package schedule

import (
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/runs"
	"github.com/searchd/searchd/savedsearch"
)

// TestTheDrainPlansAndTakesOnEveryShard: schedules of organizations on
// every node of a cluster (and on several shards of each) come due at
// once, drained by three drains ticking at once with a batch below their
// number. Each tick plans and takes at most its batch, one transaction or
// statement per shard (issue 25, the drain per shard), and in the end
// every occurrence is planned once and started once, whichever shard holds
// it. On PostgreSQL each half of a tick is one step over the whole table.
func TestTheDrainPlansAndTakesOnEveryShard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	orgs, err := pgtest.OrganizationPerNode(b.ctx, b.db)
	if err != nil {
		t.Fatal(err)
	}
	for range 8 {
		orgs = append(orgs, uuid.New())
	}
	type search struct{ org, id uuid.UUID }
	var searches []search
	for _, org := range orgs {
		ss, err := b.searches.Create(b.ctx, org, savedsearch.CreateParams{
			Name: "rust jobs", Brief: savedsearch.Brief{Query: "rust"}, Actor: "owner"})
		if err != nil {
			t.Fatal(err)
		}
		p := hourly()
		p.Actor = "alice"
		if _, _, err := b.store.Set(b.ctx, org, ss.ID, p); err != nil {
			t.Fatal(err)
		}
		searches = append(searches, search{org, ss.ID})
	}
	b.clock.Set(t0)
	const batch = 3
	var wg sync.WaitGroup
	for range 3 {
		d := b.drain(t, drainOpts{batch: batch})
		wg.Go(func() {
			for range 4 * len(searches) {
				rep, err := d.Tick(b.ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if rep.Planned > batch || rep.Taken > batch {
					t.Errorf("a tick of a batch of %d planned %d and took %d", batch, rep.Planned, rep.Taken)
				}
				if rep.Planned == 0 && rep.Taken == 0 {
					return
				}
			}
			t.Error("the drain never ran out of due work")
		})
	}
	wg.Wait()
	for _, s := range searches {
		var occurrences, started, runsN int
		if err := b.db.QueryRow(b.ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'started')
			FROM agent.schedule_occurrences WHERE organization_id = $1 AND saved_search_id = $2`, s.org, s.id).
			Scan(&occurrences, &started); err != nil {
			t.Fatal(err)
		}
		if err := b.db.QueryRow(b.ctx, `SELECT count(*) FROM agent.runs WHERE organization_id = $1 AND start_key = $2`,
			s.org, runs.SavedSearchStartKey(IdempotencyKey(s.id, t0))).Scan(&runsN); err != nil {
			t.Fatal(err)
		}
		if occurrences != 1 || started != 1 || runsN != 1 {
			t.Errorf("organization %s: %d occurrences, %d started, %d Runs; want one of each", s.org, occurrences, started, runsN)
		}
	}
}
