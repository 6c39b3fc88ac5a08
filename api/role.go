package api

import (
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// RoleOperator is the role claim of an operator's token. An operator runs
// the platform, not an organization: the console's operator views (claims
// of every organization, force-release, the sweeper's runs) admit a token
// with this claim alone. The role is granted by whoever holds
// SEARCHD_JWT_SECRET, with `searchd token --operator --sub NAME`; an
// organization's token never carries it, so no organization can reach
// those views. On the /v1 routes the role changes nothing: they still
// need an org_id, and an operator token without one is refused there.
const RoleOperator = "operator"

// validRole reports whether role is a role searchd knows: none,
// RoleOperator or RoleRuntime.
func validRole(role string) bool { return role == "" || role == RoleOperator || role == RoleRuntime }

// Principal is who a verified token names.
type Principal struct {
	// OrganizationID is the token's org_id; uuid.Nil for an operator
	// token that names no organization.
	OrganizationID uuid.UUID
	// Actor is the token's sub claim, "" when it has none (an operator
	// token always has one).
	Actor string
	// Operator reports whether the token carries the role claim
	// [RoleOperator].
	Operator bool
	// ExpiresAt is the token's exp.
	ExpiresAt time.Time
}

// ErrInvalidToken reports a token [TokenVerifier.Verify] refuses; which
// check failed is deliberately not said.
var ErrInvalidToken = errors.New("api: invalid token")

// TokenVerifier verifies bearer tokens by the rules of the API's
// authentication, for another edge of the same server (the console). It
// is safe for concurrent use.
type TokenVerifier struct {
	secret []byte
	parser *jwt.Parser
}

// NewTokenVerifier returns a verifier of tokens signed with secret, judged
// by the clock now (nil is time.Now). It returns an error for a secret
// shorter than [MinJWTSecretLen].
func NewTokenVerifier(secret []byte, now func() time.Time) (*TokenVerifier, error) {
	if len(secret) < MinJWTSecretLen {
		return nil, errors.New("api: JWT secret shorter than 32 bytes")
	}
	if now == nil {
		now = time.Now
	}
	return &TokenVerifier{secret: secret, parser: newTokenParser(now)}, nil
}

// Verify returns the principal of raw: an HS256 JWT signed with the
// verifier's secret, unexpired, whose sub can be recorded as an actor and
// whose role is none or [RoleOperator] (never [RoleRuntime]: a runtime
// credential opens nothing but status reports). An organization token needs an
// org_id; an operator token needs a sub (its actions are recorded under
// it) and may name an organization too. Every refusal is
// [ErrInvalidToken].
func (v *TokenVerifier) Verify(raw string) (Principal, error) {
	if raw == "" || len(raw) > maxTokenLen {
		return Principal{}, ErrInvalidToken
	}
	var claims Claims
	if _, err := v.parser.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return v.secret, nil }); err != nil {
		return Principal{}, ErrInvalidToken
	}
	if !validActor(claims.Subject) || !validRole(claims.Role) || claims.Role == RoleRuntime {
		// A runtime credential reports Run status and nothing else.
		return Principal{}, ErrInvalidToken
	}
	p := Principal{Actor: claims.Subject, Operator: claims.Role == RoleOperator, ExpiresAt: claims.ExpiresAt.Time}
	if claims.OrgID != "" || !p.Operator {
		org, err := uuid.Parse(claims.OrgID)
		if err != nil || org == uuid.Nil {
			return Principal{}, ErrInvalidToken
		}
		p.OrganizationID = org
	}
	if p.Operator && p.Actor == "" {
		return Principal{}, ErrInvalidToken
	}
	return p, nil
}

// SignOperatorToken returns an HS256 JWT with the role claim
// [RoleOperator] for actor (sub; required, so every operator action names
// who did it), issued at now and expiring ttl later. org may be uuid.Nil
// for a token that names no organization. It returns an error for an
// empty or unrecordable actor, a non-positive ttl or a secret shorter
// than [MinJWTSecretLen].
func SignOperatorToken(secret []byte, org uuid.UUID, actor string, now time.Time, ttl time.Duration) (string, error) {
	switch {
	case actor == "" || !validActor(actor):
		return "", errors.New("api: an operator token needs a sub of 1 to 255 bytes of UTF-8 without NUL")
	case ttl <= 0:
		return "", errors.New("api: token ttl must be positive")
	case len(secret) < MinJWTSecretLen:
		return "", errors.New("api: JWT secret shorter than 32 bytes")
	}
	claims := Claims{
		Role: RoleOperator,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   actor,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	if org != uuid.Nil {
		claims.OrgID = org.String()
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}
