package sessions_test

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/sessions"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func TestASessionLivesItsLifetimeByTheDatabaseClock(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	clk := dbclocktest.New(t0)
	store := sessions.NewStore(pool, clk.Clock())
	ctx := t.Context()
	org := uuid.New()
	secret, s, err := store.Create(ctx, sessions.CreateParams{OrganizationID: org, Actor: "alice", Via: sessions.ViaOIDC, Lifetime: 8 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !s.CreatedAt.Equal(t0) || !s.ExpiresAt.Equal(t0.Add(8*time.Hour)) || s.OrganizationID != org || s.Actor != "alice" {
		t.Errorf("Create = %+v, want alice of %s from %s for 8 h", s, org, t0)
	}
	clk.Advance(8*time.Hour - time.Microsecond)
	got, err := store.Lookup(ctx, secret)
	if err != nil || got.ID != s.ID || got.Role != "" || got.Via != sessions.ViaOIDC {
		t.Fatalf("Lookup just before the expiry = %+v, %v; want the session", got, err)
	}
	clk.Advance(time.Microsecond)
	if _, err := store.Lookup(ctx, secret); !errors.Is(err, sessions.ErrNotFound) || !errs.Is(err, errs.NotFound) {
		t.Errorf("Lookup at the expiry = %v, want ErrNotFound", err)
	}
}

func TestATokensExpiryEndsItsSessionSooner(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	clk := dbclocktest.New(t0)
	store := sessions.NewStore(pool, clk.Clock())
	_, s, err := store.Create(t.Context(), sessions.CreateParams{Role: sessions.RoleOperator, Actor: "olga",
		Via: sessions.ViaToken, Lifetime: 8 * time.Hour, NotAfter: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if !s.ExpiresAt.Equal(t0.Add(time.Hour)) || s.OrganizationID != uuid.Nil || s.Role != sessions.RoleOperator {
		t.Errorf("Create = %+v, want operator olga of no organization until %s", s, t0.Add(time.Hour))
	}
	if n := pgtest.Count(t, pool, `SELECT count(*) FROM agent.console_sessions WHERE id = $1 AND organization_id IS NULL`, s.ID); n != 1 {
		t.Errorf("the operator's session holds an organization, want NULL")
	}
	// A bound far away (a token's exp of 2^53 s) leaves the lifetime.
	_, s, err = store.Create(t.Context(), sessions.CreateParams{OrganizationID: uuid.New(), Via: sessions.ViaToken,
		Lifetime: 8 * time.Hour, NotAfter: time.Unix(1<<40, 0)})
	if err != nil || !s.ExpiresAt.Equal(t0.Add(8*time.Hour)) {
		t.Errorf("Create with a far bound = %+v, %v; want the 8 h lifetime", s, err)
	}
}

func TestSignOutEndsTheSessionAndTheTableHoldsNoSecret(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	store := sessions.NewStore(pool, nil)
	ctx := t.Context()
	secret, s, err := store.Create(ctx, sessions.CreateParams{OrganizationID: uuid.New(), Via: sessions.ViaOIDC, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := store.Create(ctx, sessions.CreateParams{OrganizationID: uuid.New(), Via: sessions.ViaOIDC, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(secret)
	want := sha256.Sum256(raw)
	var hash []byte
	var leaked bool
	if err := pool.QueryRow(ctx, `SELECT secret_hash, position($2::bytea in c::text::bytea) > 0
		FROM agent.console_sessions c WHERE id = $1`, s.ID, []byte(secret)).Scan(&hash, &leaked); err != nil {
		t.Fatal(err)
	}
	if string(hash) != string(want[:]) || leaked {
		t.Errorf("the row holds %x (secret in it: %t), want the SHA-256 of the secret alone", hash, leaked)
	}
	if err := store.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Lookup(ctx, secret); !errors.Is(err, sessions.ErrNotFound) {
		t.Errorf("Lookup after sign-out = %v, want ErrNotFound", err)
	}
	if err := store.Delete(ctx, secret); err != nil {
		t.Errorf("signing out twice: %v", err)
	}
	if _, err := store.Lookup(ctx, other); err != nil {
		t.Errorf("another session after one signed out: %v", err)
	}
}

func TestWhatIsNoSecretFindsNothing(t *testing.T) {
	t.Parallel()
	store := sessions.NewStore(pgtest.NewDB(t), nil)
	secret, _, err := store.Create(t.Context(), sessions.CreateParams{OrganizationID: uuid.New(), Via: sessions.ViaOIDC, Lifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "x", secret + "A", secret[:42], secret + "=", strings.ToUpper(secret),
		"eyJhbGciOiJIUzI1NiJ9.eyJvcmdfaWQiOiJ4In0.c2ln", base64.RawURLEncoding.EncodeToString(make([]byte, 32))} {
		if s == secret {
			continue
		}
		if _, err := store.Lookup(t.Context(), s); !errors.Is(err, sessions.ErrNotFound) {
			t.Errorf("Lookup(%q) = %v, want ErrNotFound", s, err)
		}
	}
}

func TestCreateRefusesBadParamsBeforeSQL(t *testing.T) {
	t.Parallel()
	store := sessions.NewStore(nil, nil) // no database: a refusal must not reach one
	ok := sessions.CreateParams{OrganizationID: uuid.New(), Via: sessions.ViaOIDC, Lifetime: time.Hour}
	for _, tt := range []struct {
		name string
		edit func(*sessions.CreateParams)
	}{
		{"no organization, no operator", func(p *sessions.CreateParams) { p.OrganizationID = uuid.Nil }},
		{"actor too long", func(p *sessions.CreateParams) { p.Actor = strings.Repeat("a", 256) }},
		{"actor with NUL", func(p *sessions.CreateParams) { p.Actor = "a\x00b" }},
		{"actor not UTF-8", func(p *sessions.CreateParams) { p.Actor = "\xff" }},
		{"role not a name", func(p *sessions.CreateParams) { p.Role = "Admin!" }},
		{"unknown via", func(p *sessions.CreateParams) { p.Via = "password" }},
		{"no lifetime", func(p *sessions.CreateParams) { p.Lifetime = 0 }},
	} {
		p := ok
		tt.edit(&p)
		if _, _, err := store.Create(t.Context(), p); !errors.Is(err, sessions.ErrInvalid) {
			t.Errorf("%s: Create = %v, want ErrInvalid", tt.name, err)
		}
	}
}

// TestConcurrentSignInsGetDistinctSessions: sessions created at once never
// share a secret or an id, and each reads back as its own.
func TestConcurrentSignInsGetDistinctSessions(t *testing.T) {
	t.Parallel()
	store := sessions.NewStore(pgtest.NewDB(t), nil)
	const n = 16
	secrets := make([]string, n)
	orgs := make([]uuid.UUID, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			orgs[i] = uuid.New()
			var err error
			if secrets[i], _, err = store.Create(t.Context(), sessions.CreateParams{OrganizationID: orgs[i], Via: sessions.ViaOIDC, Lifetime: time.Hour}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, s := range secrets {
		got, err := store.Lookup(t.Context(), s)
		if err != nil || got.OrganizationID != orgs[i] {
			t.Errorf("session %d = %+v, %v; want organization %s", i, got, err, orgs[i])
		}
	}
}
