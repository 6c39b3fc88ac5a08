package api

import (
	"errors"
	"net/http"
	"strings"
	"sync"
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
	// Role is empty for an organization's token and [RoleOperator] for an
	// operator's (see role.go); any other value is refused.
	Role string `json:"role,omitempty"`
	jwt.RegisteredClaims
}

// caller is the authenticated caller of a request.
type caller struct {
	OrganizationID uuid.UUID
	// Actor is the token's sub claim, "" when it has none.
	Actor string
	// Runtime reports a runtime credential (runtime_auth.go).
	Runtime bool
}

const principalKey = "searchd.principal"

// principal returns the caller authenticate stored on c.
func principal(c echo.Context) caller {
	p, _ := c.Get(principalKey).(caller)
	return p
}

var errUnauthorized = &apiError{status: http.StatusUnauthorized, code: CodeUnauthorized,
	detail: "a valid bearer token is required: an HS256 JWT with exp and org_id claims"}

// errInvalidToken is the 401 of a request that sent a bearer token the
// server refused: its challenge says so (error="invalid_token", RFC 6750
// §3.1), so a client knows to get a new token rather than add one.
var errInvalidToken = &apiError{status: http.StatusUnauthorized, code: CodeUnauthorized,
	detail:    "the bearer token is invalid or expired: send an HS256 JWT with exp and org_id claims",
	challenge: invalidTokenChallenge}

// authenticate is the middleware that admits a request only with an
// Authorization: Bearer token that is an HS256 JWT signed with the server's
// secret, unexpired, with an exp claim and an org_id claim holding a
// non-nil UUID, and a sub claim, when present, that can be recorded as the
// actor. The algorithm is pinned, so a token that names "none" or any
// other algorithm is refused whatever its signature. Every refusal answers
// the same 401: which check failed is not the client's business.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	// echo builds a route's middleware chain on every request, so what
	// must outlive a request (the parser, the cache) lives on the Server.
	parser, verified := s.tokenParser, s.verifiedTokens
	keyFunc := func(*jwt.Token) (any, error) { return s.jwtSecret, nil }
	return func(c echo.Context) error {
		raw, ok := bearerToken(c.Request().Header)
		if !ok {
			return errUnauthorized
		}
		now := s.now()
		if p, ok := verified.get(raw, now); ok {
			c.Set(principalKey, p)
			return next(c)
		}
		var claims Claims
		if _, err := parser.ParseWithClaims(raw, &claims, keyFunc); err != nil {
			return errInvalidToken
		}
		org, err := uuid.Parse(claims.OrgID)
		if err != nil || org == uuid.Nil || !validActor(claims.Subject) || !validRole(claims.Role) ||
			(claims.Role == RoleRuntime && claims.Subject == "") {
			return errInvalidToken
		}
		p := caller{OrganizationID: org, Actor: claims.Subject, Runtime: claims.Role == RoleRuntime}
		verified.put(raw, p, claims.ExpiresAt.Time, now)
		c.Set(principalKey, p)
		return next(c)
	}
}

// tokenCacheSize bounds the verified tokens remembered; a client sends the
// same token on every request until it expires, so a small cache serves
// nearly every request.
const tokenCacheSize = 4096

// maxCachedTokenLen keeps one entry small; longer tokens are verified on
// every request.
const maxCachedTokenLen = 2048

// tokenCache remembers tokens that verified, so a repeat skips the base64,
// JSON and HMAC work (about a tenth of a replay's CPU). Only a token that
// passed verification with this server's secret is ever stored, its expiry
// is checked on every use, and the secret cannot change while the server
// runs, so a hit decides exactly what a fresh verification would (nbf and
// iat are not used by searchd's tokens). When full it is emptied: simpler
// than an LRU and as good for a working set that fits.
type tokenCache struct {
	mu      sync.RWMutex
	max     int
	entries map[string]cachedToken
}

type cachedToken struct {
	p   caller
	exp time.Time
}

// newTokenParser returns the parser every token goes through: HS256 pinned,
// exp required, judged by now, and every segment in canonical base64url
// (strict decoding: no padding, and the unused low bits of the last
// character zero), so one signature has exactly one spelling. The claims
// are read exactly, by [Claims.UnmarshalJSON].
func newTokenParser(now func() time.Time) *jwt.Parser {
	return jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithStrictDecoding(),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(now),
	)
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, entries: make(map[string]cachedToken, max)}
}

// get returns the caller of raw when raw verified before and has not
// expired at now.
func (c *tokenCache) get(raw string, now time.Time) (caller, bool) {
	c.mu.RLock()
	e, ok := c.entries[raw]
	c.mu.RUnlock()
	if !ok || !now.Before(e.exp) {
		return caller{}, false
	}
	return e.p, true
}

func (c *tokenCache) put(raw string, p caller, exp, now time.Time) {
	if len(raw) > maxCachedTokenLen || !now.Before(exp) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		clear(c.entries)
	}
	c.entries[raw] = cachedToken{p: p, exp: exp}
}

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
