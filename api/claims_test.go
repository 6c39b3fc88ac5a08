package api_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/searchd/searchd/api"
)

// signRaw returns an HS256 token over exactly the claims JSON given, signed
// with the test secret: the JSON is not re-encoded, so duplicate and
// oddly-cased names reach the server as written.
func signRaw(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	signing := enc([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc([]byte(claims))
	mac := hmac.New(sha256.New, testSecret)
	mac.Write([]byte(signing))
	return signing + "." + enc(mac.Sum(nil))
}

// TestTokenClaimsAreReadExactly sends tokens that encoding/json would read
// loosely: a tenant claim spelled in other cases, and a duplicate org_id.
// Each is correctly signed, so only the claims decide; each must be a 401.
// The controls prove the raw signer makes tokens the server accepts.
func TestTokenClaimsAreReadExactly(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	other := uuid.New()
	mine := b.seedSavedSearch(seedOpts{})
	theirs := b.seedSavedSearch(seedOpts{org: other})
	exp := time.Now().Add(time.Hour).Unix()
	list := func(tok string) *response {
		return b.do(req{method: http.MethodGet, path: "/v1/saved-searches", header: bearer(tok)})
	}
	for _, tt := range []struct {
		name, claims string
	}{
		{"ORG_ID alone", fmt.Sprintf(`{"ORG_ID":%q,"exp":%d}`, b.org, exp)},
		{"Org_Id alone", fmt.Sprintf(`{"Org_Id":%q,"exp":%d}`, b.org, exp)},
		{"duplicate org_id", fmt.Sprintf(`{"org_id":%q,"org_id":%q,"exp":%d}`, b.org, other, exp)},
		{"duplicate exp", fmt.Sprintf(`{"org_id":%q,"exp":%d,"exp":%d}`, b.org, exp, exp)},
		{"duplicate nested name", fmt.Sprintf(`{"org_id":%q,"exp":%d,"x":{"a":1,"a":2}}`, b.org, exp)},
		{"EXP instead of exp", fmt.Sprintf(`{"org_id":%q,"EXP":%d}`, b.org, exp)},
		{"org_id not a string", fmt.Sprintf(`{"org_id":7,"exp":%d}`, exp)},
	} {
		wantUnauthorized(t, tt.name, list(signRaw(tt.claims)))
	}

	// org_id A beside Org_Id B: the exact name wins, so the caller is A,
	// never B (encoding/json would take the last, case-insensitively).
	tok := signRaw(fmt.Sprintf(`{"org_id":%q,"Org_Id":%q,"exp":%d}`, b.org, other, exp))
	res := list(tok)
	if res.status != http.StatusOK {
		t.Fatalf("org_id beside Org_Id = %d %s, want 200 as org_id", res.status, res.body)
	}
	if body := string(res.body); !strings.Contains(body, mine.ID.String()) || strings.Contains(body, theirs.ID.String()) {
		t.Errorf("org_id %s beside Org_Id %s listed %s; want the org_id organization's saved search alone", b.org, other, body)
	}
	if res := list(signRaw(fmt.Sprintf(`{"org_id":%q,"exp":%d}`, b.org, exp))); res.status != http.StatusOK {
		t.Errorf("control: exact claims = %d %s, want 200", res.status, res.body)
	}
}

// TestTokenSignatureMustBeCanonicalBase64url changes the last character of
// a valid token's signature in its unused low bits only: a lenient decoder
// reads the same 32 bytes, so the HMAC still matches, and the server must
// refuse it anyway, or one signature would have several spellings. Padded
// and standard-alphabet spellings are refused too.
func TestTokenSignatureMustBeCanonicalBase64url(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	tok := b.tokenFor(b.org, "canonical")
	dot := strings.LastIndexByte(tok, '.')
	sig := tok[dot+1:]
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, sig[len(sig)-1])
	// 32 bytes are 43 characters; the last carries 4 bits and 2 unused.
	alt := sig[:len(sig)-1] + string(alphabet[last^1])
	want, _ := base64.RawURLEncoding.DecodeString(sig)
	got, err := base64.RawURLEncoding.DecodeString(alt)
	if err != nil || string(got) != string(want) {
		t.Fatalf("the altered signature must decode leniently to the same bytes: %v", err)
	}
	list := func(tok string) *response {
		return b.do(req{method: http.MethodGet, path: "/v1/saved-searches", header: bearer(tok)})
	}
	if res := list(tok); res.status != http.StatusOK {
		t.Fatalf("control: the token as signed = %d %s, want 200", res.status, res.body)
	}
	wantUnauthorized(t, "unused bits set in the signature", list(tok[:dot+1]+alt))
	wantUnauthorized(t, "padded signature", list(tok+"="))
	if std := strings.NewReplacer("-", "+", "_", "/").Replace(sig); std != sig {
		wantUnauthorized(t, "standard alphabet", list(tok[:dot+1]+std))
	}
	_ = api.CodeUnauthorized
}
