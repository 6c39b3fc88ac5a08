package api

import (
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// MinJWTSecretLen is the shortest HS256 secret the API accepts, in bytes:
// RFC 7518 §3.2 asks for a key at least as long as the hash output.
const MinJWTSecretLen = 32

// maxTokenLen bounds the Authorization header the API will parse.
const maxTokenLen = 8 << 10

// Claims are the JWT claims the API reads. org_id names the caller's
// organization, the only source of the tenant on every route; sub, when
// present, is recorded as the actor of snapshots and Runs.
type Claims struct {
	OrgID string `json:"org_id"`
	jwt.RegisteredClaims
}

// caller is the authenticated caller of a request.
type caller struct {
	OrganizationID uuid.UUID
	// Actor is the token's sub claim, "" when it has none.
	Actor string
}

const principalKey = "searchd.principal"

// principal returns the caller authenticate stored on c.
func principal(c echo.Context) caller {
	p, _ := c.Get(principalKey).(caller)
	return p
}

var errUnauthorized = &apiError{status: http.StatusUnauthorized, code: CodeUnauthorized,
	detail: "a valid bearer token is required: an HS256 JWT with exp and org_id claims"}

// authenticate is the middleware that admits a request only with an
// Authorization: Bearer token that is an HS256 JWT signed with the server's
// secret, unexpired, with an exp claim and an org_id claim holding a
// non-nil UUID, and a sub claim, when present, that can be recorded as the
// actor. The algorithm is pinned, so a token that names "none" or any
// other algorithm is refused whatever its signature. Every refusal answers
// the same 401: which check failed is not the client's business.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	parser := jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(s.now),
	)
	keyFunc := func(*jwt.Token) (any, error) { return s.jwtSecret, nil }
	return func(c echo.Context) error {
		raw, ok := bearerToken(c.Request().Header)
		if !ok {
			return errUnauthorized
		}
		var claims Claims
		if _, err := parser.ParseWithClaims(raw, &claims, keyFunc); err != nil {
			return errUnauthorized
		}
		org, err := uuid.Parse(claims.OrgID)
		if err != nil || org == uuid.Nil || !validActor(claims.Subject) {
			return errUnauthorized
		}
		c.Set(principalKey, caller{OrganizationID: org, Actor: claims.Subject})
		return next(c)
	}
}

// maxActorLen bounds the sub claim, which is stored on snapshots and Runs.
const maxActorLen = 255

// validActor reports whether sub can be recorded as an actor: valid UTF-8
// without NUL (PostgreSQL text cannot hold it), at most maxActorLen bytes.
func validActor(sub string) bool {
	return len(sub) <= maxActorLen && utf8.ValidString(sub) && !strings.ContainsRune(sub, 0)
}

// bearerToken returns the token of an Authorization: Bearer header. The
// scheme is case-insensitive (RFC 9110 §11.1); exactly one header is allowed.
func bearerToken(h http.Header) (string, bool) {
	values := h.Values(echo.HeaderAuthorization)
	if len(values) != 1 || len(values[0]) > maxTokenLen {
		return "", false
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}

// SignToken returns an HS256 JWT for org and actor (sub; "" for none),
// issued at now and expiring ttl later, signed with secret. It is what
// `searchd token` prints and what tests authenticate with. It returns an
// error for a nil organization, a non-positive ttl or a secret shorter than
// [MinJWTSecretLen].
func SignToken(secret []byte, org uuid.UUID, actor string, now time.Time, ttl time.Duration) (string, error) {
	switch {
	case org == uuid.Nil:
		return "", errors.New("api: token organization is the nil UUID")
	case ttl <= 0:
		return "", errors.New("api: token ttl must be positive")
	case len(secret) < MinJWTSecretLen:
		return "", errors.New("api: JWT secret shorter than 32 bytes")
	}
	claims := Claims{
		OrgID: org.String(),
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   actor,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}
