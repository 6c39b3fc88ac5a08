package auth

import (
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// Claims are the claims of the HS256 tokens searchd mints: org_id names
// the caller's organization, sub the actor, role its [Role] ("" for an
// organization's token).
type Claims struct {
	OrgID string `json:"org_id,omitempty"`
	Role  Role   `json:"role,omitempty"`
	jwt.RegisteredClaims
}

// SignToken returns an HS256 JWT for org and actor (sub; "" for none),
// issued at now and expiring ttl later, signed with secret. It is what
// `searchd token` prints and what tests authenticate with. It returns an
// error for a nil organization, an actor that cannot be recorded, a
// non-positive ttl or a secret shorter than [MinSecretLen].
func SignToken(secret []byte, org uuid.UUID, actor string, now time.Time, ttl time.Duration) (string, error) {
	if org == uuid.Nil {
		return "", errors.New("auth: token organization is the nil UUID")
	}
	return sign(secret, Claims{OrgID: org.String()}, actor, now, ttl)
}

// SignOperatorToken returns an HS256 JWT with [RoleOperator] for actor
// (sub; required, so every operator action names who did it), issued at
// now and expiring ttl later. org may be uuid.Nil for a token that names
// no organization. It returns an error for an empty or unrecordable
// actor, a non-positive ttl or a secret shorter than [MinSecretLen].
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

// SignAdminToken returns an HS256 JWT with [RoleAdmin] for actor (sub;
// required, recorded on the keys they create and revoke) of organization
// org, issued at now and expiring ttl later. It returns an error for a
// nil organization, an empty or unrecordable actor, a non-positive ttl or
// a secret shorter than [MinSecretLen].
func SignAdminToken(secret []byte, org uuid.UUID, actor string, now time.Time, ttl time.Duration) (string, error) {
	switch {
	case org == uuid.Nil:
		return "", errors.New("auth: an admin token needs an organization")
	case actor == "":
		return "", errors.New("auth: an admin token needs a sub of 1 to 255 bytes of UTF-8 without NUL")
	}
	return sign(secret, Claims{OrgID: org.String(), Role: RoleAdmin}, actor, now, ttl)
}

// SignRuntimeToken returns an HS256 JWT with [RoleRuntime] for the
// runtime named actor (sub; required, recorded with every status change
// it reports) of organization org, issued at now and expiring ttl later.
// It returns an error for a nil organization, an empty or unrecordable
// actor, a non-positive ttl or a secret shorter than [MinSecretLen].
func SignRuntimeToken(secret []byte, org uuid.UUID, actor string, now time.Time, ttl time.Duration) (string, error) {
	switch {
	case org == uuid.Nil:
		return "", errors.New("auth: a runtime token needs an organization")
	case actor == "":
		return "", errors.New("auth: a runtime token needs a sub of 1 to 255 bytes of UTF-8 without NUL")
	}
	return sign(secret, Claims{OrgID: org.String(), Role: RoleRuntime}, actor, now, ttl)
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
