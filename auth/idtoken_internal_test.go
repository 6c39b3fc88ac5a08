package auth

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/internal/testkit/oidctest"
)

// TestIDTokenRules: an ID token of the console's sign-in must be the
// provider's (never HS256), for the console's client, with the sign-in's
// nonce, and with azp, when present, naming the client.
func TestIDTokenRules(t *testing.T) {
	t.Parallel()
	p := oidctest.StartT(t, oidctest.Config{})
	keys, err := p.Keys()
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("id-token-test-secret-id-token-test-secret")
	v, err := NewVerifier(t.Context(), Config{Secret: secret, OIDC: &OIDCConfig{Issuer: p.Issuer, Audience: "searchd"}})
	if err != nil {
		t.Fatal(err)
	}
	org := uuid.New()
	claims := func(extra map[string]any) string {
		now := time.Now().Unix()
		return ClaimsJSON(map[string]any{"iss": p.Issuer, "aud": []string{"console"}, "sub": "alice", "org_id": org.String(),
			"nonce": "n-1", "iat": now, "exp": now + 3600}, extra)
	}
	sign := func(c string) string {
		tok, err := p.Sign("rsa", fmt.Sprintf(`{"alg":"RS256","kid":%q}`, keys.RSA), c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	want := expectation{audience: "console", idToken: true, nonce: "n-1"}
	if got, _, err := v.verify(t.Context(), sign(claims(nil)), want); err != nil || got.OrganizationID != org {
		t.Fatalf("control: verify = %+v, %v", got, err)
	}
	if _, _, err := v.verify(t.Context(), sign(claims(map[string]any{"azp": "console", "aud": []string{"console", "x"}})), want); err != nil {
		t.Errorf("azp naming the client: %v", err)
	}
	hs, _ := SignToken(secret, org, "alice", time.Now(), time.Hour)
	for name, tok := range map[string]string{
		"another nonce":             sign(claims(map[string]any{"nonce": "n-2"})),
		"no nonce":                  sign(claims(map[string]any{"nonce": nil})),
		"nonce not a string":        sign(claims(map[string]any{"nonce": 1})),
		"for another client":        sign(claims(map[string]any{"aud": []string{"searchd"}})),
		"azp naming another":        sign(claims(map[string]any{"azp": "another", "aud": []string{"console", "another"}})),
		"an HS256 token of ours":    hs,
		"another issuer":            sign(claims(map[string]any{"iss": "https://idp.example.com"})),
		"lifetime over the maximum": sign(claims(map[string]any{"exp": time.Now().Unix() + 25*3600})),
	} {
		if _, _, err := v.verify(t.Context(), tok, want); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: verify = %v, want ErrInvalidToken", name, err)
		}
	}
	if _, _, err := v.verify(t.Context(), sign(claims(nil)), expectation{audience: "console", idToken: true}); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("a sign-in without a nonce of its own: %v, want ErrInvalidToken", err)
	}
}
