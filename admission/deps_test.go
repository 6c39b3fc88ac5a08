package admission

import (
	"strings"
	"testing"
	"time"

	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/runs"
)

// TestNewStarterRefusesMissingOrDisagreeingDeps: every dependency is
// required, the Runs and the plane must share one database clock (a test
// cannot stub one and forget the other), and the config is validated once,
// here; each refusal names the field.
func TestNewStarterRefusesMissingOrDisagreeingDeps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := dbclocktest.New(b.clock.Now())
	for _, tt := range []struct {
		name string
		edit func(d *Deps, c *Config)
		want string
	}{
		{"no pool", func(d *Deps, _ *Config) { d.Pool = nil }, "Deps.Pool"},
		{"no plane", func(d *Deps, _ *Config) { d.Plane = nil }, "Deps.Plane"},
		{"no saved searches", func(d *Deps, _ *Config) { d.SavedSearches = nil }, "Deps.SavedSearches"},
		{"no snapshots", func(d *Deps, _ *Config) { d.Snapshots = nil }, "Deps.Snapshots"},
		{"no runs", func(d *Deps, _ *Config) { d.Runs = nil }, "Deps.Runs"},
		{"runs on the database's clock, the plane on a stub", func(d *Deps, _ *Config) {
			d.Runs = runs.NewStore(b.db, runs.Config{})
		}, "different database clocks"},
		{"runs on another stub at the same time", func(d *Deps, _ *Config) {
			d.Runs = runs.NewStore(b.db, runs.Config{Clock: other.Clock()})
		}, "different database clocks"},
		{"a lease over the ceiling", func(_ *Deps, c *Config) { c.Lease = idempotency.MaxLease + time.Second }, "Lease"},
	} {
		d, cfg := b.deps, Config{}
		tt.edit(&d, &cfg)
		if s, err := NewStarter(d, cfg); s != nil || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: NewStarter = %v, %v; want no starter and an error naming %q", tt.name, s, err, tt.want)
		}
	}
	if s, err := NewStarter(b.deps, Config{}); s == nil || err != nil {
		t.Errorf("NewStarter(the bundle's deps) = %v, %v; want a starter", s, err)
	}
}

// TestClaimAndRunAreStampedByTheOneClock: with the stub moved two days
// away from the database's clock, the preparation's claim and the Run it
// admits both carry the stub's time, because the plane and the Run store
// were handed the same clock. A store that ignored it would stamp the
// database's now().
func TestClaimAndRunAreStampedByTheOneClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.clock.Advance(48 * time.Hour)
	at := b.clock.Now()
	res, err := b.starter.StartSavedSearch(b.ctx, b.start("one-clock"))
	if err != nil || !res.Created {
		t.Fatalf("StartSavedSearch = %+v, %v", res, err)
	}
	rec := b.claimRow(t, "one-clock")
	if rec == nil {
		t.Fatal("no claim stored for the start")
	}
	if !rec.ClaimedAt.Equal(at) || !rec.ClaimedAt.Equal(res.Run.CreatedAt) {
		t.Fatalf("claim claimed_at %v, Run created_at %v; want both the stub's %v", rec.ClaimedAt, res.Run.CreatedAt, at)
	}
	if want := at.Add(runs.Retention); !res.Run.RetainUntil.Equal(want) {
		t.Errorf("Run retain_until %v, want %v: the stub's time plus the retention", res.Run.RetainUntil, want)
	}
}
