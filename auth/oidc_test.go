package auth_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/google/uuid"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/internal/testkit/oidctest"
)

const (
	audience     = "searchd"
	operatorRole = "searchd-operator"
)

// spa is a browser UI of the company: a public client that signs people
// in with PKCE and asks for tokens for searchd's audience.
var spa = oidctest.Client{ID: "product-ui", RedirectURIs: []string{"http://127.0.0.1:9/callback"}, Audience: []string{audience}}

// world is a running provider, a user of an organization, and a
// verifier of its tokens.
type world struct {
	p    *oidctest.Provider
	org  uuid.UUID
	keys oidctest.Keys
	v    *auth.Verifier
}

func newWorld(t *testing.T, cfg func(*auth.Config)) *world {
	t.Helper()
	w := &world{org: uuid.New()}
	w.p = oidctest.StartT(t, oidctest.Config{
		Clients: []oidctest.Client{spa},
		Users: []oidctest.User{
			{Username: "alice", Password: "alice-pw", Org: w.org.String()},
			{Username: "olga", Password: "olga-pw", Roles: []string{"staff", operatorRole}},
		},
	})
	var err error
	if w.keys, err = w.p.Keys(); err != nil {
		t.Fatal(err)
	}
	c := auth.Config{Secret: secret, OIDC: &auth.OIDCConfig{Issuer: w.p.Issuer, Audience: audience, OperatorRole: operatorRole,
		// No second fetch for an unknown kid within a test: what each
		// test counts is the one fetch a rotation causes.
		UnknownKeyRefresh: time.Hour}}
	if cfg != nil {
		cfg(&c)
	}
	if w.v, err = auth.NewVerifier(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	return w
}

// claims returns a claims set of alice's organization, issued now for an
// hour, with the members of extra replacing or adding to them (a nil
// value removes the member).
func (w *world) claims(extra map[string]any) string {
	now := time.Now().Unix()
	return auth.ClaimsJSON(map[string]any{"iss": w.p.Issuer, "aud": []string{audience}, "sub": "alice", "org_id": w.org.String(),
		"iat": now, "exp": now + 3600}, extra)
}

func header(alg, kid string) string {
	if kid == "" {
		return fmt.Sprintf(`{"alg":%q,"typ":"JWT"}`, alg)
	}
	return fmt.Sprintf(`{"alg":%q,"kid":%q,"typ":"JWT"}`, alg, kid)
}

// sign has the provider sign a token, failing the test when it cannot.
func (w *world) sign(t *testing.T, key, header, claims string) string {
	t.Helper()
	tok, err := w.p.Sign(key, header, claims)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestProviderTokensAcceptedAndRefused drives a real provider: a person
// signs in through its login page for a browser UI, whose access token
// searchd accepts; then tokens the provider signs with its own keys, each
// breaking one rule, are refused.
func TestProviderTokensAcceptedAndRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ctx := t.Context()

	tokens, err := w.p.Login(ctx, spa, "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	p, err := w.v.Verify(ctx, tokens.Access)
	if err != nil || p.OrganizationID != w.org || p.Actor == "" || p.IsOperator() {
		t.Fatalf("the access token of a sign-in: Verify = %+v, %v; want a caller of %s", p, err, w.org)
	}

	accepted := map[string]string{
		"RS256":           w.sign(t, "rsa", header("RS256", w.keys.RSA), w.claims(nil)),
		"ES256":           w.sign(t, "ec", header("ES256", w.keys.EC), w.claims(nil)),
		"EdDSA":           w.sign(t, "ed", header("EdDSA", w.keys.Ed), w.claims(nil)),
		"aud as a string": w.sign(t, "rsa", header("RS256", w.keys.RSA), w.claims(map[string]any{"aud": audience})),
		"aud among others": w.sign(t, "rsa", header("RS256", w.keys.RSA),
			w.claims(map[string]any{"aud": []string{"other", audience}})),
	}
	for name, tok := range accepted {
		if p, err := w.v.Verify(ctx, tok); err != nil || p.OrganizationID != w.org || p.Actor != "alice" {
			t.Errorf("%s: Verify = %+v, %v; want alice of %s", name, p, err, w.org)
		}
	}

	now := time.Now().Unix()
	rsa := header("RS256", w.keys.RSA)
	enc := base64.RawURLEncoding.EncodeToString
	good := w.sign(t, "rsa", rsa, w.claims(nil))
	_, body, _ := strings.Cut(good, ".")
	body, _, _ = strings.Cut(body, ".")
	refused := []struct{ name, token string }{
		{"wrong issuer", w.sign(t, "rsa", rsa, w.claims(map[string]any{"iss": w.p.Issuer + "/other"}))},
		{"no issuer", w.sign(t, "rsa", rsa, w.claims(map[string]any{"iss": nil}))},
		{"wrong audience", w.sign(t, "rsa", rsa, w.claims(map[string]any{"aud": []string{"another-api"}}))},
		{"no audience", w.sign(t, "rsa", rsa, w.claims(map[string]any{"aud": nil}))},
		{"expired", w.sign(t, "rsa", rsa, w.claims(map[string]any{"iat": now - 7200, "exp": now - 1}))},
		{"no exp", w.sign(t, "rsa", rsa, w.claims(map[string]any{"exp": nil}))},
		{"exp as a string", w.sign(t, "rsa", rsa, w.claims(map[string]any{"exp": fmt.Sprint(now + 3600)}))},
		{"exp 2^53", w.sign(t, "rsa", rsa, w.claims(map[string]any{"exp": int64(1) << 53}))},
		{"lifetime over the maximum", w.sign(t, "rsa", rsa, w.claims(map[string]any{"iat": now - 3600, "exp": now + 24*3600}))},
		{"not yet valid", w.sign(t, "rsa", rsa, w.claims(map[string]any{"nbf": now + 600}))},
		{"unknown key", w.sign(t, "unpublished", header("RS256", w.keys.Unpublished), w.claims(nil))},
		{"a published kid on another key", w.sign(t, "unpublished", rsa, w.claims(nil))},
		{"no kid", w.sign(t, "rsa", header("RS256", ""), w.claims(nil))},
		{"alg none", enc([]byte(`{"alg":"none","kid":"`+w.keys.RSA+`"}`)) + "." + body + "."},
		{"HS256 with the public key", hs256WithPublicKey(t, w, body)},
		{"ES256 on the RSA key's kid", w.sign(t, "ec", header("ES256", w.keys.RSA), w.claims(nil))},
		{"RS256 on the EC key's kid", w.sign(t, "rsa", header("RS256", w.keys.EC), w.claims(nil))},
		{"crit", w.sign(t, "rsa", `{"alg":"RS256","kid":"`+w.keys.RSA+`","crit":["exp"],"exp":1}`, w.claims(nil))},
		{"kid twice", w.sign(t, "rsa", `{"alg":"RS256","kid":"x","kid":"`+w.keys.RSA+`"}`, w.claims(nil))},
		{"duplicate org_id", w.sign(t, "rsa", rsa, strings.Replace(w.claims(nil), `"org_id"`, `"org_id":"`+uuid.NewString()+`","org_id"`, 1))},
		{"org_id not a UUID", w.sign(t, "rsa", rsa, w.claims(map[string]any{"org_id": "acme"}))},
		{"no org_id and not an operator", w.sign(t, "rsa", rsa, w.claims(map[string]any{"org_id": nil}))},
		{"sub not a string", w.sign(t, "rsa", rsa, w.claims(map[string]any{"sub": 7}))},
		{"roles not strings", w.sign(t, "rsa", rsa, w.claims(map[string]any{"roles": []int{1}}))},
		{"signature of another token", good[:strings.LastIndexByte(good, '.')+1] + lastSegment(w.sign(t, "rsa", rsa, w.claims(map[string]any{"sub": "x"})))},
	}
	for _, tt := range refused {
		if p, err := w.v.Verify(ctx, tt.token); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("%s: Verify = %+v, %v; want ErrInvalidToken", tt.name, p, err)
		}
	}
	// The same rules bind a verifier without an HS256 secret.
	only := newWorldVerifier(t, w, func(c *auth.Config) { c.Secret = nil })
	if _, err := only.Verify(ctx, hs256WithPublicKey(t, w, body)); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("HS256 with the public key, no secret configured: %v, want ErrInvalidToken", err)
	}
	if _, err := only.Verify(ctx, good); err != nil {
		t.Errorf("control without a secret: %v", err)
	}
}

func lastSegment(tok string) string { return tok[strings.LastIndexByte(tok, '.')+1:] }

// newWorldVerifier returns another verifier of w's provider, edited by
// edit.
func newWorldVerifier(t *testing.T, w *world, edit func(*auth.Config)) *auth.Verifier {
	t.Helper()
	c := auth.Config{Secret: secret, OIDC: &auth.OIDCConfig{Issuer: w.p.Issuer, Audience: audience, OperatorRole: operatorRole}}
	edit(&c)
	v, err := auth.NewVerifier(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// hs256WithPublicKey is the classic confusion: an HS256 token whose HMAC
// key is the provider's public RSA key, as its JWKS publishes it (PEM), so
// a verifier that let the token choose the algorithm would take the key
// for a secret.
func hs256WithPublicKey(t *testing.T, w *world, body string) string {
	t.Helper()
	resp, err := http.Get(w.p.Issuer + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jwkset.JWKSMarshal
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	store, err := set.ToStorage()
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := store.KeyRead(context.Background(), w.keys.RSA)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(jwk.Key())
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	enc := base64.RawURLEncoding.EncodeToString
	signing := enc([]byte(header("HS256", w.keys.RSA))) + "." + body
	mac := hmac.New(sha256.New, pemKey)
	mac.Write([]byte(signing))
	return signing + "." + enc(mac.Sum(nil))
}

// TestOperatorRoleComesFromTheRoleClaim: a person whose roles hold the
// configured operator role is an operator, with or without an
// organization; without the setting, nobody from the provider is.
func TestOperatorRoleComesFromTheRoleClaim(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ctx := t.Context()
	tok := w.sign(t, "rsa", header("RS256", w.keys.RSA), w.claims(map[string]any{"org_id": nil, "sub": "olga",
		"roles": []string{"staff", operatorRole}}))
	if p, err := w.v.Verify(ctx, tok); err != nil || !p.IsOperator() || p.Actor != "olga" {
		t.Errorf("operator: Verify = %+v, %v; want operator olga", p, err)
	}
	single := w.sign(t, "rsa", header("RS256", w.keys.RSA), w.claims(map[string]any{"roles": operatorRole}))
	if p, err := w.v.Verify(ctx, single); err != nil || !p.IsOperator() || p.OrganizationID != w.org {
		t.Errorf("operator role as a string, with an organization: Verify = %+v, %v", p, err)
	}
	off := newWorldVerifier(t, w, func(c *auth.Config) { c.OIDC.OperatorRole = "" })
	if p, err := off.Verify(ctx, tok); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("no operator role configured: Verify = %+v, %v; want ErrInvalidToken (no organization)", p, err)
	}
	// The admin role, when configured, makes an organization's admin; the
	// operator role wins over it.
	admins := newWorldVerifier(t, w, func(c *auth.Config) { c.OIDC.AdminRole = "searchd-admin" })
	admin := w.sign(t, "rsa", header("RS256", w.keys.RSA), w.claims(map[string]any{"roles": []string{"staff", "searchd-admin"}}))
	if p, err := admins.Verify(ctx, admin); err != nil || !p.IsAdmin() || p.OrganizationID != w.org {
		t.Errorf("admin: Verify = %+v, %v; want an admin of %s", p, err, w.org)
	}
	if p, err := w.v.Verify(ctx, admin); err != nil || p.Role != "" {
		t.Errorf("no admin role configured: Verify = %+v, %v; want an organization's caller", p, err)
	}
	both := w.sign(t, "rsa", header("RS256", w.keys.RSA), w.claims(map[string]any{"roles": []string{"searchd-admin", operatorRole}}))
	if p, err := admins.Verify(ctx, both); err != nil || !p.IsOperator() {
		t.Errorf("admin and operator: Verify = %+v, %v; want an operator", p, err)
	}
	claimed := newWorldVerifier(t, w, func(c *auth.Config) { c.OIDC.OrgClaim, c.OIDC.ActorClaim = "tenant", "email" })
	other := uuid.New()
	mapped := w.sign(t, "rsa", header("RS256", w.keys.RSA), w.claims(map[string]any{"tenant": other.String(), "email": "a@example.com"}))
	if p, err := claimed.Verify(ctx, mapped); err != nil || p.OrganizationID != other || p.Actor != "a@example.com" {
		t.Errorf("configured claims: Verify = %+v, %v; want a@example.com of %s", p, err, other)
	}
}

// TestKeyRotationNeedsNoRestart: the provider rotates its signing key;
// the first token signed with the new key makes the verifier fetch the
// JWKS once and is accepted, with the old key's tokens still good; tokens
// with made-up kids that follow cause no fetch (rate-limited).
func TestKeyRotationNeedsNoRestart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ctx := t.Context()
	old := w.sign(t, "rsa", header("RS256", w.keys.RSA), w.claims(nil))
	oldLater := w.sign(t, "rsa", header("RS256", w.keys.RSA), w.claims(map[string]any{"sub": "b"}))
	if _, err := w.v.Verify(ctx, old); err != nil {
		t.Fatal(err)
	}
	before, err := w.p.Hits()
	if err != nil {
		t.Fatal(err)
	}
	kid, err := w.p.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	if kid == w.keys.RSA {
		t.Fatal("the rotation kept the kid")
	}
	// A real sign-in after the rotation: its tokens carry the new kid.
	tokens, err := w.p.Login(ctx, spa, "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(headerOf(tokens.Access), kid) {
		t.Fatalf("the access token after the rotation has the header %s, want kid %s", headerOf(tokens.Access), kid)
	}
	if p, err := w.v.Verify(ctx, tokens.Access); err != nil || p.OrganizationID != w.org {
		t.Fatalf("a token of the new key: Verify = %+v, %v; want accepted without a restart", p, err)
	}
	after, _ := w.p.Hits()
	if after != before+1 {
		t.Errorf("the JWKS was fetched %d times for the rotation, want once", after-before)
	}
	if _, err := w.v.Verify(ctx, oldLater); err != nil {
		t.Errorf("a token of the old key, still published: %v", err)
	}
	for i := range 20 {
		tok := w.sign(t, "unpublished", header("RS256", fmt.Sprintf("made-up-%d", i)), w.claims(nil))
		if _, err := w.v.Verify(ctx, tok); !errors.Is(err, auth.ErrInvalidToken) {
			t.Fatalf("a made-up kid: %v, want ErrInvalidToken", err)
		}
	}
	if n, _ := w.p.Hits(); n != after {
		t.Errorf("20 tokens with made-up kids fetched the JWKS %d times, want none (rate-limited)", n-after)
	}
}

func headerOf(tok string) string {
	h, _, _ := strings.Cut(tok, ".")
	b, _ := base64.RawURLEncoding.DecodeString(h)
	return string(b)
}

// TestProviderDownWithKeysCached: once the keys are fetched, the provider
// going away stops nothing: tokens of the cached keys are accepted, and a
// token of an unknown key is refused at once rather than waited on.
func TestProviderDownWithKeysCached(t *testing.T) {
	t.Parallel()
	w := newWorld(t, func(c *auth.Config) { c.OIDC.UnknownKeyRefresh = time.Nanosecond })
	ctx := t.Context()
	first := w.sign(t, "rsa", header("RS256", w.keys.RSA), w.claims(nil))
	later := w.sign(t, "ec", header("ES256", w.keys.EC), w.claims(map[string]any{"sub": "later"}))
	unknown := w.sign(t, "unpublished", header("RS256", w.keys.Unpublished), w.claims(nil))
	if _, err := w.v.Verify(ctx, first); err != nil {
		t.Fatal(err)
	}
	w.p.Stop()
	if _, err := http.Get(w.p.Issuer + "/keys"); err == nil {
		t.Fatal("the provider still answers after Stop")
	}
	if p, err := w.v.Verify(ctx, later); err != nil || p.Actor != "later" {
		t.Errorf("a token of a cached key, the provider down: Verify = %+v, %v; want accepted", p, err)
	}
	start := time.Now()
	if _, err := w.v.Verify(ctx, unknown); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("an unknown key, the provider down: %v, want ErrInvalidToken", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusing an unknown key with the provider down took %s", d)
	}
}

// TestDiscoveryMustNameTheIssuer: a discovery document that names another
// issuer is not the configured issuer's, and a provider that cannot be
// reached is a start-up error, not a silent 401 for ever.
func TestDiscoveryMustNameTheIssuer(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	other := strings.Replace(w.p.Issuer, "127.0.0.1", "localhost", 1)
	_, err := auth.NewVerifier(t.Context(), auth.Config{OIDC: &auth.OIDCConfig{Issuer: other, Audience: audience}})
	if err == nil || !strings.Contains(err.Error(), "names the issuer") {
		t.Errorf("discovery of %s served by %s: %v, want a refusal", other, w.p.Issuer, err)
	}
	_, err = auth.NewVerifier(t.Context(), auth.Config{OIDC: &auth.OIDCConfig{Issuer: "http://127.0.0.1:1", Audience: audience}})
	if err == nil {
		t.Error("an unreachable issuer: NewVerifier succeeded")
	}
}
