package operator_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/idempotency"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/operator"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// setup returns, on a fresh database, the plane and the store of a test
// and an organization of its own.
func setup(t *testing.T) (context.Context, *idempotency.Service, *operator.Store, uuid.UUID) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	return context.Background(), idempotency.NewService(pool, idempotency.Config{}), operator.NewStore(pool, nil), uuid.New()
}

func TestForceReleaseDeletesAndRecordsInOneTransaction(t *testing.T) {
	ctx, plane, store, org := setup(t)
	out, err := plane.Claim(ctx, org, "tool.email.send", "k", "h", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	rec, err := store.Claim(ctx, out.Claim.ID)
	if err != nil || rec.LeaseLive() {
		t.Fatalf("Claim = %+v, %v; want the claim with its lease passed", rec, err)
	}
	rel, err := store.ForceRelease(ctx, rec, operator.ReleaseParams{Actor: "olga", Reason: " node drained ", Via: operator.ViaConsole, RequirePassedLease: true})
	if err != nil {
		t.Fatalf("ForceRelease = %v", err)
	}
	if rel.Reason != "node drained" || rel.Actor != "olga" || rel.LeaseLive {
		t.Errorf("release = %+v, want olga's trimmed reason and a passed lease", rel)
	}
	if _, err := store.Claim(ctx, rec.ID); !errors.Is(err, operator.ErrNotFound) {
		t.Errorf("after the release Claim = %v, want ErrNotFound", err)
	}
	list, _, err := store.Releases(ctx, operator.ReleaseFilter{OrganizationID: org}, operator.PageParams{})
	if err != nil || len(list) != 1 || list[0].ClaimID != rec.ID || list[0].Key != "k" {
		t.Errorf("Releases = %+v, %v; want the one release of claim %s", list, err, rec.ID)
	}
	// The same read again: the fence refuses, and nothing more is recorded.
	if _, err := store.ForceRelease(ctx, rec, operator.ReleaseParams{Actor: "olga", Reason: "again", Via: operator.ViaConsole}); !errors.Is(err, operator.ErrClaimChanged) {
		t.Errorf("second ForceRelease = %v, want ErrClaimChanged", err)
	}
	if list, _, _ := store.Releases(ctx, operator.ReleaseFilter{}, operator.PageParams{}); len(list) != 1 {
		t.Errorf("a refused release was recorded: %d records", len(list))
	}
}

func TestForceReleaseRefusals(t *testing.T) {
	ctx, plane, store, org := setup(t)
	live, _ := plane.Claim(ctx, org, "tool.email.send", "live", "h", time.Minute)
	liveRec, _ := store.Claim(ctx, live.Claim.ID)
	ok := operator.ReleaseParams{Actor: "olga", Reason: "r", Via: operator.ViaCLI}
	for _, tt := range []struct {
		name string
		p    operator.ReleaseParams
		want error
	}{
		{"live lease, console", operator.ReleaseParams{Actor: "olga", Reason: "r", Via: operator.ViaConsole, RequirePassedLease: true}, operator.ErrLeaseLive},
		{"no reason", operator.ReleaseParams{Actor: "olga", Reason: " ", Via: operator.ViaCLI}, operator.ErrInvalid},
		{"two lines", operator.ReleaseParams{Actor: "olga", Reason: "a\nb", Via: operator.ViaCLI}, operator.ErrInvalid},
		{"long reason", operator.ReleaseParams{Actor: "olga", Reason: strings.Repeat("x", 501), Via: operator.ViaCLI}, operator.ErrInvalid},
		{"no actor", operator.ReleaseParams{Reason: "r", Via: operator.ViaCLI}, operator.ErrInvalid},
		{"unknown via", operator.ReleaseParams{Actor: "olga", Reason: "r", Via: "api"}, operator.ErrInvalid},
	} {
		if _, err := store.ForceRelease(ctx, liveRec, tt.p); !errors.Is(err, tt.want) {
			t.Errorf("%s: ForceRelease = %v, want %v", tt.name, err, tt.want)
		}
	}
	done, _ := plane.Claim(ctx, org, "tool.email.send", "done", "h", time.Minute)
	if ok, err := plane.Complete(ctx, done.Claim, idempotency.Completion{ResourceType: "x", ResourceID: "1"}); !ok || err != nil {
		t.Fatal(err)
	}
	doneRec, _ := store.Claim(ctx, done.Claim.ID)
	if _, err := store.ForceRelease(ctx, doneRec, ok); !errors.Is(err, operator.ErrCompletedClaim) {
		t.Errorf("ForceRelease(completed) = %v, want ErrCompletedClaim", err)
	}
	// The CLI may release a live lease, for a holder known to be gone.
	if _, err := store.ForceRelease(ctx, liveRec, ok); err != nil {
		t.Errorf("CLI ForceRelease(live) = %v, want it released", err)
	}
}

func TestClaimListsSplitInFlightFromStuckAndPage(t *testing.T) {
	ctx, plane, store, org := setup(t)
	for i := range 7 {
		if _, err := plane.Claim(ctx, org, "tool.email.send", "stuck-"+string(rune('a'+i)), "h", time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := plane.Claim(ctx, org, "webhook.acme", "live-"+string(rune('a'+i)), "h", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Millisecond)
	var stuck []idempotency.Record
	cursor := ""
	for {
		page, next, err := store.Stuck(ctx, operator.ClaimFilter{}, operator.PageParams{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		stuck = append(stuck, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(stuck) != 7 {
		t.Errorf("paging the stuck claims found %d, want 7", len(stuck))
	}
	live, _, err := store.InFlight(ctx, operator.ClaimFilter{OrganizationID: org, Scope: "webhook.acme"}, operator.PageParams{})
	if err != nil || len(live) != 3 {
		t.Errorf("InFlight = %d claims, %v; want 3", len(live), err)
	}
	ov, err := store.Overview(ctx, 24)
	if err != nil {
		t.Fatal(err)
	}
	counts := ov.Counts
	if len(counts) != 2 || counts[0].Scope != "tool.email.send" || counts[0].Stuck != 7 || counts[1].InFlight != 3 {
		t.Errorf("Counts = %+v; want 7 stuck tool claims and 3 live webhook claims", counts)
	}
	if _, _, err := store.Stuck(ctx, operator.ClaimFilter{}, operator.PageParams{Cursor: "garbage"}); !errors.Is(err, operator.ErrInvalidCursor) {
		t.Errorf("Stuck with a bad cursor = %v, want ErrInvalidCursor", err)
	}
	var claims int64
	for _, b := range ov.Buckets {
		if b.Kind == "claim" {
			claims += b.Count
		}
	}
	if claims != 10 {
		t.Errorf("Overview's hours count %d claims, want 10", claims)
	}
	// A key is looked up within its organization and scope.
	if _, _, err := store.Stuck(ctx, operator.ClaimFilter{Key: "stuck-a"}, operator.PageParams{}); !errors.Is(err, operator.ErrInvalid) {
		t.Errorf("Stuck by a key alone = %v, want ErrInvalid", err)
	}
	one, _, err := store.Stuck(ctx, operator.ClaimFilter{OrganizationID: org, Scope: "tool.email.send", Key: "stuck-a"}, operator.PageParams{})
	if err != nil || len(one) != 1 || one[0].Key != "stuck-a" {
		t.Errorf("Stuck by key = %+v, %v; want the one claim", one, err)
	}
	if none, _, _ := store.InFlight(ctx, operator.ClaimFilter{OrganizationID: org, Scope: "tool.email.send", Key: "stuck-a"}, operator.PageParams{}); len(none) != 0 {
		t.Errorf("InFlight by a stuck claim's key = %+v, want none", none)
	}
}
