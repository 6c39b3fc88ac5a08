// Package auth identifies callers: the API's bearer tokens and the
// console's sign-in. See docs/auth.md.
//
// A [Verifier] accepts HS256 JWTs signed with searchd's secret (minted by
// `searchd token`) and access tokens of an OpenID Connect provider (RS256,
// ES256 or EdDSA, keys from its JWKS), each only when configured. All
// tokens follow the same strict rules: exp is required and bounded by the
// maximum lifetime from iat and from now; iat may be at most
// [IssuedAtLeeway] ahead; nbf is honoured; crit is refused; the algorithm
// is pinned to the key's type; segments are canonical base64url; header
// and claims are single JSON objects without duplicate names, read by
// exact names.
//
// [SignIn] is the console's relying party (authorization code with PKCE,
// state and nonce). Every refusal is [ErrInvalidToken], and the failed
// check is neither returned nor logged.
package auth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// MinSecretLen is the shortest HS256 secret accepted, in bytes (RFC 7518
// §3.2).
const MinSecretLen = 32

// IssuedAtLeeway is the clock skew allowed for a token's iat; a token
// issued further in the future is refused.
const IssuedAtLeeway = time.Minute

// MaxTokenLen bounds the tokens a [Verifier] parses, in bytes.
const MaxTokenLen = 8 << 10

// DefaultMaxLifetime is the default [Config.MaxLifetime].
const DefaultMaxLifetime = 24 * time.Hour

// MaxActorLen bounds an actor, in bytes.
const MaxActorLen = 255

// Role is what a principal may do beyond its organization's records; the
// zero Role is a plain organization caller. An HS256 token naming an
// unknown role is refused; unknown provider roles are ignored.
type Role string

// RoleOperator is the platform operator's role, required by the
// console's cross-organization views. It changes nothing on /v1 routes.
const RoleOperator Role = "operator"

// RoleRuntime is the role of the service that executes Runs; it opens
// PUT /v1/runs/{id}/status alone. Only HS256 tokens carry it.
const RoleRuntime Role = "runtime"

// RoleAdmin is an organization caller who may also manage its service
// keys (/v1/service-keys). An admin token must name its actor.
const RoleAdmin Role = "admin"

// knownRoles are the roles an HS256 token may name.
var knownRoles = map[Role]bool{"": true, RoleOperator: true, RoleRuntime: true, RoleAdmin: true}

// Principal is who a verified token names.
type Principal struct {
	// OrganizationID is uuid.Nil only for an operator naming none.
	OrganizationID uuid.UUID
	// Actor is recorded with what the caller does; "" when unnamed
	// (operators, runtimes and admins always have one).
	Actor string
	Role  Role
	// ExpiresAt is the token's exp.
	ExpiresAt time.Time
}

// IsOperator reports whether p has [RoleOperator].
func (p Principal) IsOperator() bool { return p.Role == RoleOperator }

// IsAdmin reports whether p has [RoleAdmin].
func (p Principal) IsAdmin() bool { return p.Role == RoleAdmin }

// IsRuntime reports whether p has [RoleRuntime].
func (p Principal) IsRuntime() bool { return p.Role == RoleRuntime }

// ErrInvalidToken reports a token the verifier refuses.
var ErrInvalidToken = errors.New("auth: invalid token")

// Config configures a [Verifier]. At least one of Secret and OIDC is
// required.
type Config struct {
	// Secret verifies HS256 tokens; at least [MinSecretLen] bytes. Nil
	// accepts no HS256 token.
	Secret []byte
	// OIDC accepts the access tokens of an OpenID Connect provider; nil
	// accepts none.
	OIDC *OIDCConfig
	// MaxLifetime bounds exp − iat and exp − now; zero is
	// [DefaultMaxLifetime].
	MaxLifetime time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Validate reports what is wrong with c, naming the field.
func (c Config) Validate() error {
	switch {
	case c.Secret == nil && c.OIDC == nil:
		return errors.New("auth: Config needs Secret, OIDC or both")
	case c.Secret != nil && len(c.Secret) < MinSecretLen:
		return fmt.Errorf("auth: Config.Secret is %d bytes long; it must be at least %d (generate one with `openssl rand -base64 48`)",
			len(c.Secret), MinSecretLen)
	case c.MaxLifetime < 0:
		return errors.New("auth: Config.MaxLifetime is negative")
	}
	if c.OIDC != nil {
		return c.OIDC.Validate()
	}
	return nil
}

// Verifier verifies tokens. It is safe for concurrent use.
type Verifier struct {
	secret      []byte
	oidc        *provider // nil without OIDC
	maxLifetime time.Duration
	now         func() time.Time
	// parser pins the algorithms, requires exp and decodes strictly, so
	// one signature has exactly one spelling.
	parser *jwt.Parser
	cache  *tokenCache
}

// NewVerifier returns the verifier cfg describes. With cfg.OIDC it
// discovers the issuer and fetches its keys, refreshing them until ctx
// ends; it returns an error when cfg is invalid or either step fails.
func NewVerifier(ctx context.Context, cfg Config) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	v := &Verifier{secret: cfg.Secret, maxLifetime: cmp.Or(cfg.MaxLifetime, DefaultMaxLifetime), now: cfg.Now,
		cache: &tokenCache{entries: make(map[string]cachedToken, tokenCacheSize)}}
	if v.now == nil {
		v.now = time.Now
	}
	v.parser = jwt.NewParser(jwt.WithValidMethods(algorithms), jwt.WithStrictDecoding(), jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(v.now))
	var err error
	if cfg.OIDC != nil {
		if v.oidc, err = discover(ctx, *cfg.OIDC); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// Verify returns the principal of bearer token raw. Verified tokens are
// cached until exp (HS256) or for at most a minute (provider tokens, so a
// withdrawn key stops working soon). Every refusal is [ErrInvalidToken].
func (v *Verifier) Verify(ctx context.Context, raw string) (Principal, error) {
	if raw == "" || len(raw) > MaxTokenLen {
		return Principal{}, ErrInvalidToken
	}
	now := v.now()
	if p, ok := v.cache.get(raw, now); ok {
		return p, nil
	}
	want := expectation{}
	if v.oidc != nil {
		want.audience = v.oidc.cfg.Audience
	}
	p, until, err := v.verify(ctx, raw, want)
	if err != nil {
		return Principal{}, err
	}
	v.cache.put(raw, p, until, now)
	return p, nil
}

// validActor reports whether s is at most [MaxActorLen] bytes of UTF-8
// without NUL, which PostgreSQL text cannot hold.
func validActor(s string) bool {
	return len(s) <= MaxActorLen && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// providerTimeout bounds each request to the provider.
const providerTimeout = 10 * time.Second

var defaultHTTPClient = &http.Client{Timeout: providerTimeout}
