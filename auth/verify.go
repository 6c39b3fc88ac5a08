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

// algorithms are the accepted algorithms, each pinned to one kind of key
// (keyFits); HS256 only with the secret.
var algorithms = []string{
	jwt.SigningMethodHS256.Alg(),
	jwt.SigningMethodRS256.Alg(),
	jwt.SigningMethodES256.Alg(),
	jwt.SigningMethodEdDSA.Alg(),
}

// expectation is what a caller requires beyond the common rules.
type expectation struct {
	// audience must be in a provider token's aud.
	audience string
	// idToken requires a provider-signed ID token carrying nonce.
	idToken bool
	nonce   string
}

// errCrit refuses a crit header: searchd understands no extension.
var errCrit = errors.New("auth: the token has a crit header")

// providerCacheTTL is how long a verified provider token is remembered
// before its key is looked up again.
const providerCacheTTL = time.Minute

// verify checks raw against the rules and want, returning its principal
// and how long it may be cached.
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

// checkHeader refuses duplicate header names, on which the parser and
// another reader could disagree about alg or kid.
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

// hs256Principal maps an HS256 token's org_id, sub and role.
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

// withOrganization sets p's organization from claim org (hasOrg: present),
// a non-nil UUID required except for operators. Operators, runtimes and
// admins also need an actor.
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

// check requires iss to be the issuer and aud to hold the audience; for
// an ID token, the nonce must match and azp, when present, be the client.
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

// principal maps a provider token's claims as the configuration names
// them.
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
