package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/searchd/searchd/api"
)

func TestTheV1RoutesNeedAnOrganizationWhateverTheRole(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	noOrg, err := api.SignOperatorToken(testSecret, uuid.Nil, "olga", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	withOrg, err := api.SignOperatorToken(testSecret, b.org, "olga", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	unknownRole, err := jwt.NewWithClaims(jwt.SigningMethodHS256, api.Claims{OrgID: b.org.String(), Role: "admin",
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}}).SignedString(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, token string
		want        int
	}{
		{"operator without org", noOrg, http.StatusUnauthorized},
		{"unknown role", unknownRole, http.StatusUnauthorized},
		{"operator with org", withOrg, http.StatusOK},
		{"organization", b.token, http.StatusOK},
	} {
		res := b.do(req{method: "GET", path: "/v1/runs", header: map[string]string{"Authorization": "Bearer " + tt.token}})
		if res.status != tt.want {
			t.Errorf("%s token: GET /v1/runs = %d, want %d", tt.name, res.status, tt.want)
		}
	}
}

func TestTokenVerifierReadsTheRole(t *testing.T) {
	t.Parallel()
	secret := testSecret
	v, err := api.NewTokenVerifier(secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	org := uuid.New()
	orgTok, _ := api.SignToken(secret, org, "alice", time.Now(), time.Hour)
	opTok, _ := api.SignOperatorToken(secret, uuid.Nil, "olga", time.Now(), time.Hour)
	anon, _ := api.SignToken(secret, org, "", time.Now(), time.Hour)
	if p, err := v.Verify(orgTok); err != nil || p.Operator || p.OrganizationID != org || p.Actor != "alice" {
		t.Errorf("Verify(organization token) = %+v, %v; want alice of %s, no role", p, err, org)
	}
	if p, err := v.Verify(opTok); err != nil || !p.Operator || p.OrganizationID != uuid.Nil || p.Actor != "olga" {
		t.Errorf("Verify(operator token) = %+v, %v; want operator olga of no organization", p, err)
	}
	if p, err := v.Verify(anon); err != nil || p.Operator {
		t.Errorf("Verify(token without sub) = %+v, %v; want an organization token", p, err)
	}
	// An operator token must name its operator.
	noSub, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, api.Claims{Role: api.RoleOperator,
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}}).SignedString(secret)
	if _, err := v.Verify(noSub); err == nil {
		t.Errorf("Verify(operator token without sub) succeeded")
	}
	if _, err := api.SignOperatorToken(secret, uuid.Nil, "", time.Now(), time.Hour); err == nil {
		t.Errorf("SignOperatorToken without an actor succeeded")
	}
	// A runtime credential opens no console: it reports Run status alone.
	rtTok, err := api.SignRuntimeToken(secret, org, "runtime-1", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := v.Verify(rtTok); err == nil {
		t.Errorf("Verify(runtime credential) = %+v, want refused", p)
	}
}
