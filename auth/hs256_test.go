package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/searchd/searchd/auth"
	"github.com/searchd/searchd/internal/testkit/oidctest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { oidctest.Cleanup() }))
}

var secret = []byte("auth-test-secret-auth-test-secret-0123")

// hsVerifier returns a verifier of HS256 tokens signed with secret, at
// the clock now (nil: time.Now).
func hsVerifier(t *testing.T, now func() time.Time) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(t.Context(), auth.Config{Secret: secret, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// rawToken returns a token over exactly the header and claims JSON given,
// signed with HS256 under key: the JSON is not re-encoded, so strings,
// duplicates and odd members reach the verifier as written.
func rawToken(key []byte, header, claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	signing := enc([]byte(header)) + "." + enc([]byte(claims))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(signing))
	return signing + "." + enc(mac.Sum(nil))
}

const hsHeader = `{"alg":"HS256","typ":"JWT"}`

func TestVerifyReadsTheRole(t *testing.T) {
	t.Parallel()
	v := hsVerifier(t, nil)
	ctx := t.Context()
	org := uuid.New()
	orgTok, _ := auth.SignToken(secret, org, "alice", time.Now(), time.Hour)
	opTok, _ := auth.SignOperatorToken(secret, uuid.Nil, "olga", time.Now(), time.Hour)
	anon, _ := auth.SignToken(secret, org, "", time.Now(), time.Hour)
	if p, err := v.Verify(ctx, orgTok); err != nil || p.IsOperator() || p.OrganizationID != org || p.Actor != "alice" {
		t.Errorf("Verify(organization token) = %+v, %v; want alice of %s, no role", p, err, org)
	}
	if p, err := v.Verify(ctx, opTok); err != nil || !p.IsOperator() || p.OrganizationID != uuid.Nil || p.Actor != "olga" {
		t.Errorf("Verify(operator token) = %+v, %v; want operator olga of no organization", p, err)
	}
	if p, err := v.Verify(ctx, anon); err != nil || p.IsOperator() {
		t.Errorf("Verify(token without sub) = %+v, %v; want an organization token", p, err)
	}
	// An operator token must name its operator.
	noSub, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{Role: auth.RoleOperator,
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}}).SignedString(secret)
	if _, err := v.Verify(ctx, noSub); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("Verify(operator token without sub) = %v, want ErrInvalidToken", err)
	}
	if _, err := auth.SignOperatorToken(secret, uuid.Nil, "", time.Now(), time.Hour); err == nil {
		t.Errorf("SignOperatorToken without an actor succeeded")
	}
	// A runtime credential names its organization and its runtime.
	rtTok, err := auth.SignRuntimeToken(secret, org, "runtime-1", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := v.Verify(ctx, rtTok); err != nil || !p.IsRuntime() || p.IsOperator() || p.OrganizationID != org || p.Actor != "runtime-1" {
		t.Errorf("Verify(runtime token) = %+v, %v; want runtime runtime-1 of %s", p, err, org)
	}
	for name, c := range map[string]auth.Claims{
		"without sub": {OrgID: org.String(), Role: auth.RoleRuntime},
		"without org": {Role: auth.RoleRuntime, RegisteredClaims: jwt.RegisteredClaims{Subject: "runtime-1"}},
	} {
		c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(time.Hour))
		tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
		if _, err := v.Verify(ctx, tok); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("Verify(runtime token %s) = %v, want ErrInvalidToken", name, err)
		}
	}
	if _, err := auth.SignRuntimeToken(secret, org, "", time.Now(), time.Hour); err == nil {
		t.Errorf("SignRuntimeToken without an actor succeeded")
	}
	if _, err := auth.SignRuntimeToken(secret, uuid.Nil, "runtime-1", time.Now(), time.Hour); err == nil {
		t.Errorf("SignRuntimeToken without an organization succeeded")
	}
	// An admin's token names its organization and its admin.
	adTok, err := auth.SignAdminToken(secret, org, "ada", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := v.Verify(ctx, adTok); err != nil || !p.IsAdmin() || p.IsOperator() || p.IsRuntime() || p.OrganizationID != org || p.Actor != "ada" {
		t.Errorf("Verify(admin token) = %+v, %v; want admin ada of %s", p, err, org)
	}
	for name, c := range map[string]auth.Claims{
		"without sub": {OrgID: org.String(), Role: auth.RoleAdmin},
		"without org": {Role: auth.RoleAdmin, RegisteredClaims: jwt.RegisteredClaims{Subject: "ada"}},
	} {
		c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(time.Hour))
		tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
		if _, err := v.Verify(ctx, tok); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("Verify(admin token %s) = %v, want ErrInvalidToken", name, err)
		}
	}
	if _, err := auth.SignAdminToken(secret, uuid.Nil, "ada", time.Now(), time.Hour); err == nil {
		t.Errorf("SignAdminToken without an organization succeeded")
	}
}

// TestStrictRulesForHS256 holds searchd's own tokens to the rules of every
// token: each case is correctly signed with the server's secret, so only
// the rule decides; each must be refused. The control proves the raw
// signer makes tokens the verifier accepts.
func TestStrictRulesForHS256(t *testing.T) {
	t.Parallel()
	// A fixed clock: the margins below (the leeway's 2 s) hold however long
	// generating the keys takes.
	now := time.Now()
	v := hsVerifier(t, func() time.Time { return now })
	org := uuid.New()
	iat, exp := now.Unix(), now.Add(time.Hour).Unix()
	claims := func(extra string) string {
		return fmt.Sprintf(`{"org_id":%q,"sub":"alice","iat":%d,"exp":%d%s}`, org, iat, exp, extra)
	}
	if p, err := v.Verify(t.Context(), rawToken(secret, hsHeader, claims(""))); err != nil || p.OrganizationID != org {
		t.Fatalf("control: Verify = %+v, %v; want alice of %s", p, err, org)
	}
	day := int64(24 * 3600)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	signed := func(m jwt.SigningMethod, key any, c jwt.MapClaims) string {
		tok, err := jwt.NewWithClaims(m, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	valid := jwt.MapClaims{"org_id": org.String(), "exp": exp, "iat": iat}
	for _, tt := range []struct{ name, token string }{
		{"exp as a string", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"iat":%d,"exp":"%d"}`, org, iat, exp))},
		{"iat as a string", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"iat":"%d","exp":%d}`, org, iat, exp))},
		{"nbf as a string", rawToken(secret, hsHeader, claims(fmt.Sprintf(`,"nbf":"%d"`, iat)))},
		{"exp named EXP", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"iat":%d,"EXP":%d}`, org, iat, exp))},
		{"exp null", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"exp":null}`, org))},
		{"no exp", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"iat":%d}`, org, iat))},
		{"exp 2^53", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"exp":%d}`, org, int64(1)<<53))},
		{"exp 2^53 with iat", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"iat":%d,"exp":%d}`, org, iat, int64(1)<<53))},
		{"exp 1e300", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"exp":1e300}`, org))},
		{"lifetime a day and a second", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"iat":%d,"exp":%d}`, org, iat-7200, iat-7200+day+1))},
		{"no iat, 25 h left", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"exp":%d}`, org, iat+day+3600))},
		{"iat in the future hiding a long exp", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"iat":%d,"exp":%d}`, org, iat+10*day, iat+10*day+60))},
		// Issue 36: an iat ahead of the clock within the lifetime.
		{"iat an hour ahead", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"iat":%d,"exp":%d}`, org, iat+3600, iat+7200))},
		{"iat past the leeway", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"iat":%d,"exp":%d}`, org, iat+62, exp))},
		{"nbf in the future", rawToken(secret, hsHeader, claims(fmt.Sprintf(`,"nbf":%d`, iat+600)))},
		{"expired", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"iat":%d,"exp":%d}`, org, iat-7200, iat-1))},
		{"crit header", rawToken(secret, `{"alg":"HS256","typ":"JWT","crit":["exp"]}`, claims(""))},
		{"crit header, empty", rawToken(secret, `{"alg":"HS256","crit":[]}`, claims(""))},
		{"alg twice in the header", rawToken(secret, `{"alg":"none","alg":"HS256"}`, claims(""))},
		{"alg none", base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." +
			base64.RawURLEncoding.EncodeToString([]byte(claims(""))) + "."},
		{"HS384 with the secret", signed(jwt.SigningMethodHS384, secret, valid)},
		{"RS256 without a provider", signed(jwt.SigningMethodRS256, rsaKey, valid)},
		{"ES256 without a provider", signed(jwt.SigningMethodES256, ecKey, valid)},
		{"org_id not a string", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":7,"iat":%d,"exp":%d}`, iat, exp))},
		{"duplicate org_id", rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"org_id":%q,"exp":%d}`, org, uuid.New(), exp))},
		{"a name twice in a nested object", rawToken(secret, hsHeader, claims(`,"x":[{"a":1,"a":2}]`))},
		{"unknown role", rawToken(secret, hsHeader, claims(`,"role":"superuser"`))},
		{"role not a string", rawToken(secret, hsHeader, claims(`,"role":["operator"]`))},
		{"another secret", rawToken([]byte("another-secret-another-secret-0123456"), hsHeader, claims(""))},
	} {
		if p, err := v.Verify(t.Context(), tt.token); !errors.Is(err, auth.ErrInvalidToken) {
			t.Errorf("%s: Verify = %+v, %v; want ErrInvalidToken", tt.name, p, err)
		}
	}
	// An iat within the leeway ahead (a clock a little fast) is accepted.
	skewed := rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"iat":%d,"exp":%d}`, org, iat+int64(auth.IssuedAtLeeway/time.Second)-5, exp))
	if _, err := v.Verify(t.Context(), skewed); err != nil {
		t.Errorf("an iat within the leeway ahead: %v, want accepted", err)
	}
	// At the maximum exactly, both ways, a token is accepted.
	edge := rawToken(secret, hsHeader, fmt.Sprintf(`{"org_id":%q,"iat":%d,"exp":%d}`, org, iat, iat+day))
	if _, err := v.Verify(t.Context(), edge); err != nil {
		t.Errorf("a lifetime of exactly 24 h: %v, want accepted", err)
	}
}

// TestMaxLifetimeIsASetting: a verifier with a shorter maximum refuses
// what the default accepts.
func TestMaxLifetimeIsASetting(t *testing.T) {
	t.Parallel()
	short, err := auth.NewVerifier(t.Context(), auth.Config{Secret: secret, MaxLifetime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, _ := auth.SignToken(secret, uuid.New(), "a", now, 2*time.Hour)
	if _, err := short.Verify(t.Context(), tok); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("a 2 h token under a 1 h maximum: %v, want ErrInvalidToken", err)
	}
	if _, err := hsVerifier(t, nil).Verify(t.Context(), tok); err != nil {
		t.Errorf("a 2 h token under the default 24 h: %v, want accepted", err)
	}
}

// TestARememberedTokenStillExpires: the cache never outlives the token's
// exp, and a token the clock has not reached (nbf) is not remembered
// early.
func TestARememberedTokenStillExpires(t *testing.T) {
	t.Parallel()
	var offset time.Duration
	v := hsVerifier(t, func() time.Time { return time.Now().Add(offset) })
	tok, _ := auth.SignToken(secret, uuid.New(), "a", time.Now(), time.Minute)
	for range 2 {
		if _, err := v.Verify(t.Context(), tok); err != nil {
			t.Fatalf("fresh token: %v", err)
		}
	}
	offset = time.Minute
	if _, err := v.Verify(t.Context(), tok); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("a remembered token at its exp: %v, want ErrInvalidToken", err)
	}
}

func TestConfigIsValidated(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  auth.Config
	}{
		{"nothing", auth.Config{}},
		{"a short secret", auth.Config{Secret: []byte("short")}},
		{"a negative lifetime", auth.Config{Secret: secret, MaxLifetime: -time.Second}},
		{"an http issuer", auth.Config{OIDC: &auth.OIDCConfig{Issuer: "http://idp.example.com", Audience: "searchd"}}},
		{"no audience", auth.Config{OIDC: &auth.OIDCConfig{Issuer: "https://idp.example.com"}}},
		{"an issuer with a query", auth.Config{OIDC: &auth.OIDCConfig{Issuer: "https://idp.example.com/?x=1", Audience: "a"}}},
	} {
		if _, err := auth.NewVerifier(context.Background(), tt.cfg); err == nil {
			t.Errorf("%s: NewVerifier succeeded, want an error", tt.name)
		}
	}
}
