package auth

import (
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// Claims are the claims of the HS256 tokens searchd mints.
type Claims struct {
	OrgID string `json:"org_id,omitempty"`
	Role  Role   `json:"role,omitempty"`
	jwt.RegisteredClaims
}

// SignToken returns an HS256 JWT for org and actor (sub, may be ""),
// valid from now for ttl. It returns an error for a nil organization, an
// invalid actor, a non-positive ttl or a secret shorter than
// [MinSecretLen].
func SignToken(secret []byte, org uuid.UUID, actor string, now time.Time, ttl time.Duration) (string, error) {
	if org == uuid.Nil {
		return "", errors.New("auth: token organization is the nil UUID")
	}
	return sign(secret, Claims{OrgID: org.String()}, actor, now, ttl)
}

// SignOperatorToken is [SignToken] with [RoleOperator]; actor is required
// and org may be uuid.Nil.
func SignOperatorToken(secret []byte, org uuid.UUID, actor string, now time.Time, ttl time.Duration) (string, error) {
	if actor == "" {
		return "", errors.New("auth: an operator token needs a sub of 1 to 255 bytes of UTF-8 without NUL")
	}
	c := Claims{Role: RoleOperator}
	if org != uuid.Nil {
		c.OrgID = org.String()
	}
	return sign(secret, c, actor, now, ttl)
}

// SignAdminToken is [SignToken] with [RoleAdmin]; actor is required.
func SignAdminToken(secret []byte, org uuid.UUID, actor string, now time.Time, ttl time.Duration) (string, error) {
	return signOrgRole(secret, org, actor, now, ttl, RoleAdmin, "an admin")
}

// SignRuntimeToken is [SignToken] with [RoleRuntime]; actor is required.
func SignRuntimeToken(secret []byte, org uuid.UUID, actor string, now time.Time, ttl time.Duration) (string, error) {
	return signOrgRole(secret, org, actor, now, ttl, RoleRuntime, "a runtime")
}

// signOrgRole signs role's token for org and actor, both required.
func signOrgRole(secret []byte, org uuid.UUID, actor string, now time.Time, ttl time.Duration, role Role, who string) (string, error) {
	switch {
	case org == uuid.Nil:
		return "", errors.New("auth: " + who + " token needs an organization")
	case actor == "":
		return "", errors.New("auth: " + who + " token needs a sub of 1 to 255 bytes of UTF-8 without NUL")
	}
	return sign(secret, Claims{OrgID: org.String(), Role: role}, actor, now, ttl)
}

func sign(secret []byte, c Claims, actor string, now time.Time, ttl time.Duration) (string, error) {
	switch {
	case !validActor(actor):
		return "", errors.New("auth: the sub must be at most 255 bytes of UTF-8 without NUL")
	case ttl <= 0:
		return "", errors.New("auth: token ttl must be positive")
	case len(secret) < MinSecretLen:
		return "", errors.New("auth: JWT secret shorter than 32 bytes")
	}
	c.Subject = actor
	c.IssuedAt = jwt.NewNumericDate(now)
	c.ExpiresAt = jwt.NewNumericDate(now.Add(ttl))
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
}
