package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/searchd/searchd/auth"
)

func TestTheV1RoutesNeedAnOrganizationWhateverTheRole(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	noOrg, err := auth.SignOperatorToken(testSecret, uuid.Nil, "olga", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	withOrg, err := auth.SignOperatorToken(testSecret, b.org, "olga", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	unknownRole, err := jwt.NewWithClaims(jwt.SigningMethodHS256, auth.Claims{OrgID: b.org.String(), Role: "superuser",
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
		res := b.do(req{method: "GET", path: "/v1/runs", header: bearer(tt.token)})
		if res.status != tt.want {
			t.Errorf("%s token: GET /v1/runs = %d, want %d", tt.name, res.status, tt.want)
		}
	}
}
