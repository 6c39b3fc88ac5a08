// Package auth decides who a caller is, for every edge of searchd: the
// API's bearer tokens and the console's sign-in.
//
// A [Verifier] accepts two kinds of token, each only when configured, and
// both may be on at once:
//
//   - HS256 JWTs signed with searchd's own secret (SEARCHD_JWT_SECRET),
//     minted by `searchd token` ([SignToken], [SignOperatorToken],
//     [SignRuntimeToken]): for development, tests, tools and runtimes.
//     Claims: org_id, sub, role.
//   - Access tokens of the company's OpenID Connect provider, signed with
//     RS256, ES256 or EdDSA by a key of the provider's JWKS, found by
//     discovery from the issuer. Their iss must be the issuer and their aud
//     must contain searchd's audience; the organization, the actor and the
//     role come from configurable claims ([OIDCConfig]).
//
// Every kind obeys the same strict rules: exp is required and a JSON
// number; exp is at most the maximum lifetime after iat and after now
// (so no token lives longer, whatever it claims); iat, when present, is
// at most [IssuedAtLeeway] ahead of the clock; nbf is honoured; a crit
// header is refused; the algorithm is pinned to the key's type (HS256 only
// with the secret, RS256 only with an RSA key, ES256 only with a P-256 key,
// EdDSA only with an Ed25519 key; never none); every segment is canonical
// base64url; and the header and the claims are each one JSON object with
// no name twice, read by exact names.
//
// [SignIn] is the console's relying party: the authorization code flow
// with PKCE, state and nonce against the same provider, whose ID token is
// verified by the same rules.
//
// Every refusal is [ErrInvalidToken]: which check failed is not the
// caller's business (and is not logged, so a log never holds a token).
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

// MinSecretLen is the shortest HS256 secret accepted, in bytes: RFC 7518
// §3.2 asks for a key at least as long as the hash output.
const MinSecretLen = 32

// IssuedAtLeeway is how far ahead of searchd's clock a token's iat may
// be: the clock skew between its issuer and searchd. A token issued
// further in the future is refused (it would otherwise count its lifetime
// from a time that has not come).
const IssuedAtLeeway = time.Minute

// MaxTokenLen bounds the tokens a [Verifier] parses, in bytes.
const MaxTokenLen = 8 << 10

// DefaultMaxLifetime is the default [Config.MaxLifetime].
const DefaultMaxLifetime = 24 * time.Hour

// MaxActorLen bounds an actor, in bytes: it is recorded on snapshots,
// Runs and audit rows.
const MaxActorLen = 255

// Role is what a principal may do beyond its organization's records.
// The zero Role is an organization's caller. Roles are an open set: a
// token naming a role searchd does not know is refused (HS256) or has the
// zero role (a provider's role claim, which lists the person's roles in
// every application of the company).
type Role string

// RoleOperator is the role of an operator: one who runs the platform,
// not an organization. The console's operator views (claims of every
// organization, force-release, the sweeper's runs) admit this role alone.
// An HS256 token carries it as the claim "role": "operator" (`searchd
// token --operator`); a provider's token when its role claim holds the
// value configured as [OIDCConfig.OperatorRole]. On the /v1 routes the
// role changes nothing: they need an organization.
const RoleOperator Role = "operator"

// RoleRuntime is the role of a runtime: the service that executes an
// organization's Runs and reports their status back (PUT
// /v1/runs/{id}/status). Its credential is an HS256 token of searchd's
// secret with the claim "role": "runtime", an org_id and a sub naming the
// runtime (`searchd token --runtime`); the API admits it on the status
// route alone and refuses every other caller there, and the console
// refuses it. A provider's token never has this role.
const RoleRuntime Role = "runtime"

// RoleAdmin is the role of an organization's admin: an organization's
// caller who also manages its service keys (POST, GET and DELETE
// /v1/service-keys), which no other caller of the organization may. An
// HS256 token carries it as the claim "role": "admin" with an org_id and a
// sub (`searchd token --admin`); a provider's token when its role claim
// holds the value configured as [OIDCConfig.AdminRole]. An admin names
// who they are (the sub), recorded on every key they create or revoke.
const RoleAdmin Role = "admin"

// knownRoles are the roles an HS256 token may name.
var knownRoles = map[Role]bool{"": true, RoleOperator: true, RoleRuntime: true, RoleAdmin: true}

// Principal is who a verified token names.
type Principal struct {
	// OrganizationID is the caller's organization; uuid.Nil for an
	// operator's token that names none.
	OrganizationID uuid.UUID
	// Actor names the person or system acting, recorded with what it
	// does; "" when the token names none (an operator always has one).
	Actor string
	// Role is the caller's role.
	Role Role
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
	// MaxLifetime is the longest a token may live: exp − iat and
	// exp − now must not exceed it. Zero is [DefaultMaxLifetime].
	MaxLifetime time.Duration
	// Now is the clock tokens are judged by; nil is time.Now.
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
	// parser is the one parser every token goes through: the algorithms
	// pinned, exp required, nbf honoured (golang-jwt checks it when
	// present), judged by the verifier's clock, and every segment in
	// canonical base64url (strict decoding: no padding, and the unused low
	// bits of the last character zero), so one signature has exactly one
	// spelling.
	parser *jwt.Parser
	cache  *tokenCache
}

// NewVerifier returns the verifier cfg describes. With cfg.OIDC it
// discovers the issuer and fetches its keys before it returns, and keeps
// them fresh until ctx ends; it returns an error when cfg is invalid or
// the issuer cannot be discovered or its keys fetched.
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
	if cfg.OIDC != nil {
		p, err := discover(ctx, *cfg.OIDC)
		if err != nil {
			return nil, err
		}
		v.oidc = p
	}
	return v, nil
}

// Verify returns the principal of the bearer token raw: an HS256 token
// signed with the secret, or an access token of the provider for the
// audience, by the package's rules. An HS256 token needs an org_id unless
// it has the operator role, and then a sub; a provider's token is mapped
// by [OIDCConfig]'s claims. A token that verified before is remembered:
// until its exp when it is HS256, and for at most a minute when it is the
// provider's, so a key the provider withdrew stops working soon. Every
// refusal is [ErrInvalidToken].
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

// validActor reports whether s can be recorded as an actor: valid UTF-8
// without NUL (PostgreSQL text cannot hold it), at most [MaxActorLen]
// bytes.
func validActor(s string) bool {
	return len(s) <= MaxActorLen && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// providerTimeout bounds each request to the provider: discovery, a JWKS
// fetch, a code exchange.
const providerTimeout = 10 * time.Second

// defaultHTTPClient is the client of the provider's requests when
// [OIDCConfig.HTTPClient] is nil.
var defaultHTTPClient = &http.Client{Timeout: providerTimeout}
