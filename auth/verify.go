package auth

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// The algorithms a token may be signed with. Each is pinned to one kind
// of key (see keyFits); RS256, ES256 and EdDSA only with a key of the
// provider's JWKS, HS256 only with the secret.
var algorithms = []string{
	jwt.SigningMethodHS256.Alg(),
	jwt.SigningMethodRS256.Alg(),
	jwt.SigningMethodES256.Alg(),
	jwt.SigningMethodEdDSA.Alg(),
}

// expectation is what a caller expects of a token beyond the rules of
// every token.
type expectation struct {
	// audience must be in a provider token's aud.
	audience string
	// idToken: the token is an ID token of the console's sign-in, for
	// the client audience, with the nonce; only the provider signs one.
	idToken bool
	nonce   string
}

// errCrit refuses a token with a crit header: it names extensions the
// recipient must understand, and searchd understands none.
var errCrit = errors.New("auth: the token has a crit header")

// providerCacheTTL is how long a verified provider token is remembered
// before its key is looked up again.
const providerCacheTTL = time.Minute

// verify verifies raw by the package's rules and want, and returns its
// principal and until when it may be remembered.
func (v *Verifier) verify(ctx context.Context, raw string, want expectation) (Principal, time.Time, error) {
	if err := checkHeader(raw); err != nil {
		return Principal{}, time.Time{}, ErrInvalidToken
	}
	var c claims
	var hs256 bool // else the provider's
	_, err := v.parser.ParseWithClaims(raw, &c, func(t *jwt.Token) (any, error) {
		if _, ok := t.Header["crit"]; ok {
			return nil, errCrit
		}
		if t.Method.Alg() == jwt.SigningMethodHS256.Alg() {
			if v.secret == nil || want.idToken {
				return nil, ErrInvalidToken
			}
			hs256 = true
			return v.secret, nil
		}
		if v.oidc == nil {
			return nil, ErrInvalidToken
		}
		return v.oidc.key(ctx, t)
	})
	if err != nil {
		return Principal{}, time.Time{}, ErrInvalidToken
	}
	now := v.now()
	exp := c.ExpiresAt.Time
	if exp.Sub(now) > v.maxLifetime || c.IssuedAt != nil && (exp.Sub(c.IssuedAt.Time) > v.maxLifetime ||
		c.IssuedAt.After(now.Add(IssuedAtLeeway))) {
		return Principal{}, time.Time{}, ErrInvalidToken
	}
	var p Principal
	until := exp
	if hs256 {
		p, err = hs256Principal(&c)
	} else {
		if err = v.oidc.check(&c, want); err == nil {
			p, err = v.oidc.principal(&c)
		}
		if until.After(now.Add(providerCacheTTL)) {
			until = now.Add(providerCacheTTL)
		}
	}
	if err != nil {
		return Principal{}, time.Time{}, ErrInvalidToken
	}
	p.ExpiresAt = exp
	return p, until, nil
}

// checkHeader refuses a header that is not one exact JSON object: a name
// twice would let the parser and a reader of the token disagree on alg or
// kid. The parser decodes it again and checks the rest.
func checkHeader(raw string) error {
	head, _, ok := strings.Cut(raw, ".")
	if !ok {
		return ErrInvalidToken
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(head)
	if err != nil {
		return ErrInvalidToken
	}
	return refuseDuplicateNames(b)
}

// hs256Principal maps the claims of an HS256 token: org_id, sub (the
// actor), role (none or a known role), as [withOrganization] says.
func hs256Principal(c *claims) (Principal, error) {
	org, hasOrg, err := c.str("org_id")
	if err != nil {
		return Principal{}, err
	}
	role, _, err := c.str("role")
	if err != nil || !knownRoles[Role(role)] || !validActor(c.Subject) {
		return Principal{}, ErrInvalidToken
	}
	return withOrganization(Principal{Actor: c.Subject, Role: Role(role)}, org, hasOrg)
}

// withOrganization completes p with its organization claim org (hasOrg:
// present), a UUID other than the nil one. An organization's or a
// runtime's token needs one; an operator's may name one, and an
// operator's, a runtime's or an admin's needs an actor.
func withOrganization(p Principal, org string, hasOrg bool) (Principal, error) {
	if hasOrg || !p.IsOperator() {
		id, err := uuid.Parse(org)
		if err != nil || id == uuid.Nil {
			return Principal{}, ErrInvalidToken
		}
		p.OrganizationID = id
	}
	if (p.IsOperator() || p.IsRuntime() || p.IsAdmin()) && p.Actor == "" {
		return Principal{}, ErrInvalidToken
	}
	return p, nil
}

// check applies the provider's rules to c: iss is the issuer, aud holds
// the audience (for an ID token, the client, which azp names too when
// present), and an ID token's nonce is the sign-in's.
func (p *provider) check(c *claims, want expectation) error {
	if c.Issuer != p.doc.Issuer || !slices.Contains(c.Audience, want.audience) || want.audience == "" {
		return ErrInvalidToken
	}
	if !want.idToken {
		return nil
	}
	nonce, _, err := c.str("nonce")
	if err != nil || want.nonce == "" || subtle.ConstantTimeCompare([]byte(nonce), []byte(want.nonce)) != 1 {
		return ErrInvalidToken
	}
	if azp, ok, err := c.str("azp"); err != nil || ok && azp != want.audience {
		return ErrInvalidToken
	}
	return nil
}

// principal maps the claims of a provider's token by the configuration:
// the organization claim (a UUID; absent for an operator who names none),
// the actor claim, and the role claim (a string or an array of strings,
// holding the operator role or not).
func (p *provider) principal(c *claims) (Principal, error) {
	cfg := p.cfg
	actor, _, err := c.str(cfg.ActorClaim)
	if err != nil || !validActor(actor) {
		return Principal{}, ErrInvalidToken
	}
	roles, err := c.strs(cfg.RoleClaim)
	if err != nil {
		return Principal{}, err
	}
	out := Principal{Actor: actor}
	if cfg.OperatorRole != "" && slices.Contains(roles, cfg.OperatorRole) {
		out.Role = RoleOperator
	} else if cfg.AdminRole != "" && slices.Contains(roles, cfg.AdminRole) {
		out.Role = RoleAdmin
	}
	org, hasOrg, err := c.str(cfg.OrgClaim)
	if err != nil {
		return Principal{}, err
	}
	return withOrganization(out, org, hasOrg)
}
