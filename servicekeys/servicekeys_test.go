package servicekeys_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/dbclock/dbclocktest"
	"github.com/searchd/searchd/errs"
	"github.com/searchd/searchd/internal/testkit/pgtest"
	"github.com/searchd/searchd/servicekeys"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func TestAKeyVerifiesAsItsOrganizationWithItsScopes(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	clk := dbclocktest.New(t0)
	store := servicekeys.NewStore(pool, clk.Clock())
	org := uuid.New()
	tok, k, err := store.Create(t.Context(), org, servicekeys.CreateParams{Name: "runtime",
		Scopes: []servicekeys.Scope{servicekeys.ScopeRunsReport}, Actor: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "sdk_"+strings.ReplaceAll(org.String(), "-", "")+"_"+k.Prefix+"_") {
		t.Errorf("token %q does not name organization %s and prefix %s", tok, org, k.Prefix)
	}
	if k.CreatedBy != "ada" || !k.CreatedAt.Equal(t0) || k.LastUsedAt != nil || k.RevokedAt != nil {
		t.Errorf("Create = %+v, want created by ada at %s, never used", k, t0)
	}
	c, err := servicekeys.NewVerifier(store).Verify(t.Context(), tok)
	if err != nil {
		t.Fatalf("Verify(a fresh key) = %v", err)
	}
	if c.OrganizationID != org || c.KeyID != k.ID || !c.Has(servicekeys.ScopeRunsReport) || c.Has(servicekeys.ScopeRead) ||
		c.Actor() != "key:"+k.Prefix {
		t.Errorf("Verify = %+v, want key %s of %s with runs:report alone", c, k.ID, org)
	}
	// A token of the same form whose secret, organization or prefix
	// differ by one character is no key.
	for _, bad := range []string{
		tok[:len(tok)-1] + flip(tok[len(tok)-1]),
		strings.Replace(tok, k.Prefix, k.Prefix[:7]+flip(k.Prefix[7]), 1),
		"sdk_" + strings.ReplaceAll(uuid.NewString(), "-", "") + tok[strings.Index(tok, "_"+k.Prefix):],
		strings.ToUpper(tok), "", "sdk_", tok + "A",
	} {
		if _, err := servicekeys.NewVerifier(store).Verify(t.Context(), bad); !errors.Is(err, servicekeys.ErrInvalidKey) {
			t.Errorf("Verify(%q) = %v, want ErrInvalidKey", bad, err)
		}
	}
}

// flip returns a character other than b of the same alphabet.
func flip(b byte) string {
	if b == 'a' {
		return "b"
	}
	return "a"
}

func TestTheSecretIsNeverStored(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	store := servicekeys.NewStore(pool, nil)
	org := uuid.New()
	var tokens []string
	for _, name := range []string{"one", "two"} {
		tok, _, err := store.Create(t.Context(), org, servicekeys.CreateParams{Name: name,
			Scopes: servicekeys.Scopes(), Actor: "ada"})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tok)
	}
	// Every row, every column, as text (bytea as hex and as escape): no
	// token and no secret in it.
	rows, err := pool.Query(t.Context(), `SELECT t::text, encode(secret_hash, 'escape'), encode(secret_hash, 'base64'), secret_hash
		FROM agent.service_keys t`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var row, esc, b64 string
		var hash []byte
		if err := rows.Scan(&row, &esc, &b64, &hash); err != nil {
			t.Fatal(err)
		}
		n++
		for _, tok := range tokens {
			secret := tok[len("sdk_")+32+1+8+1:] // the secret may hold "_"
			raw, err := base64.RawURLEncoding.DecodeString(secret)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(hash, raw) || bytes.Contains(hash, []byte(secret)) {
				t.Errorf("a stored secret_hash is the secret %s itself", secret)
			}
			for _, text := range []string{row, esc, b64} {
				if strings.Contains(text, secret) {
					t.Errorf("a stored row holds the secret %s: %s", secret, text)
				}
			}
		}
	}
	if err := rows.Err(); err != nil || n != 2 {
		t.Fatalf("read %d rows (%v), want 2", n, err)
	}
}

func TestRevocationIsSeenByAnotherReplicaWithinTheBound(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	clk := dbclocktest.New(t0)
	store := servicekeys.NewStore(pool, clk.Clock())
	org := uuid.New()
	tok, k, err := store.Create(t.Context(), org, servicekeys.CreateParams{Name: "r", Scopes: servicekeys.Scopes(), Actor: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	// Two replicas: each its own verifier (its own cache) on the one
	// database; both have the key cached.
	a, b := servicekeys.NewVerifier(store), servicekeys.NewVerifier(servicekeys.NewStore(pool, clk.Clock()))
	for _, v := range []*servicekeys.Verifier{a, b} {
		if _, err := v.Verify(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Second)
	revoked, err := store.Revoke(t.Context(), org, k.ID, "ada")
	if err != nil || revoked.RevokedAt == nil || !revoked.RevokedAt.Equal(t0.Add(time.Second)) || *revoked.RevokedBy != "ada" {
		t.Fatalf("Revoke = %+v, %v", revoked, err)
	}
	// Revoking again changes nothing.
	clk.Advance(time.Second)
	again, err := store.Revoke(t.Context(), org, k.ID, "bob")
	if err != nil || !again.RevokedAt.Equal(*revoked.RevokedAt) || *again.RevokedBy != "ada" {
		t.Errorf("Revoke again = %+v, %v, want the first revocation kept", again, err)
	}
	// Replica b, which verified the key before the revocation, stops
	// accepting it within RevocationBound of its verification: step the
	// clock until it refuses, and require that it did by the bound.
	verifiedAt := t0
	for {
		_, err := b.Verify(t.Context(), tok)
		if errors.Is(err, servicekeys.ErrInvalidKey) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if clk.Now().Sub(verifiedAt) >= servicekeys.RevocationBound {
			t.Fatalf("replica b still accepts the key revoked at %s at %s, %s after it verified it; the bound is %s",
				revoked.RevokedAt, clk.Now(), clk.Now().Sub(verifiedAt), servicekeys.RevocationBound)
		}
		clk.Advance(100 * time.Millisecond)
	}
	if _, err := a.Verify(t.Context(), tok); !errors.Is(err, servicekeys.ErrInvalidKey) {
		t.Errorf("replica a after the bound: %v, want ErrInvalidKey", err)
	}
	if _, err := store.Revoke(t.Context(), uuid.New(), k.ID, "ada"); !errors.Is(err, servicekeys.ErrNotFound) {
		t.Errorf("Revoke by another organization = %v, want ErrNotFound", err)
	}
}

func TestAnExpiredKeyIsRefused(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	clk := dbclocktest.New(t0)
	store := servicekeys.NewStore(pool, clk.Clock())
	exp := t0.Add(time.Hour)
	tok, _, err := store.Create(t.Context(), uuid.New(), servicekeys.CreateParams{Name: "short", ExpiresAt: &exp,
		Scopes: []servicekeys.Scope{servicekeys.ScopeRead}})
	if err != nil {
		t.Fatal(err)
	}
	v := servicekeys.NewVerifier(store)
	clk.Advance(time.Hour - time.Millisecond)
	if _, err := v.Verify(t.Context(), tok); err != nil {
		t.Fatalf("a millisecond before its expiry: %v", err)
	}
	// The cached key expires with the key, not RevocationBound later.
	clk.Advance(time.Millisecond)
	if _, err := v.Verify(t.Context(), tok); !errors.Is(err, servicekeys.ErrInvalidKey) {
		t.Errorf("at its expiry: %v, want ErrInvalidKey", err)
	}
}

func TestLastUsedIsWrittenAtMostOncePerInterval(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t)
	clk := dbclocktest.New(t0)
	store := servicekeys.NewStore(pool, clk.Clock())
	org := uuid.New()
	tok, _, err := store.Create(t.Context(), org, servicekeys.CreateParams{Name: "busy", Scopes: servicekeys.Scopes()})
	if err != nil {
		t.Fatal(err)
	}
	lastUsed := func() time.Time {
		keys, err := store.List(t.Context(), org)
		if err != nil || len(keys) != 1 || keys[0].LastUsedAt == nil {
			t.Fatalf("List = %+v, %v", keys, err)
		}
		return *keys[0].LastUsedAt
	}
	// Verified every 4 s (past the cache) by a fresh replica each time,
	// over 70 s: last_used_at moves once, at the minute.
	for i := 0; i <= 70; i += 4 {
		if _, err := servicekeys.NewVerifier(store).Verify(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
		want := t0
		if i >= 60 {
			want = t0.Add(60 * time.Second)
		}
		if got := lastUsed(); !got.Equal(want) {
			t.Fatalf("after a use at +%ds: last_used_at = %s, want %s", i, got, want)
		}
		clk.Advance(4 * time.Second)
	}
}

func TestCreateRefusesBadInput(t *testing.T) {
	t.Parallel()
	store := servicekeys.NewStore(pgtest.NewDB(t), dbclocktest.New(t0).Clock())
	past := t0.Add(-time.Second)
	for _, tt := range []struct {
		name  string
		p     servicekeys.CreateParams
		field string
	}{
		{"no name", servicekeys.CreateParams{Scopes: servicekeys.Scopes()}, "name"},
		{"long name", servicekeys.CreateParams{Name: strings.Repeat("é", 201), Scopes: servicekeys.Scopes()}, "name"},
		{"no scope", servicekeys.CreateParams{Name: "n"}, "scopes"},
		{"unknown scope", servicekeys.CreateParams{Name: "n", Scopes: []servicekeys.Scope{"admin"}}, "scopes"},
		{"scope twice", servicekeys.CreateParams{Name: "n", Scopes: []servicekeys.Scope{"read", "read"}}, "scopes"},
		{"expired", servicekeys.CreateParams{Name: "n", Scopes: servicekeys.Scopes(), ExpiresAt: &past}, "expires_at"},
	} {
		_, _, err := store.Create(t.Context(), uuid.New(), tt.p)
		fields := errs.FieldsOf(err)
		if !errors.Is(err, servicekeys.ErrInvalid) || len(fields) == 0 || fields[0].Name != tt.field {
			t.Errorf("%s: Create = %v (fields %v), want ErrInvalid naming %s", tt.name, err, fields, tt.field)
		}
	}
}
