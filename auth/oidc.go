package auth

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// OIDCConfig names an OpenID Connect provider whose access tokens the API
// accepts, and maps their claims to a [Principal].
type OIDCConfig struct {
	// Issuer is the issuer URL exactly as in iss: https, or http on
	// loopback. Required.
	Issuer string
	// Audience must be among an access token's aud values. Required.
	Audience string
	// OrgClaim holds the organization's UUID; "" is "org_id".
	OrgClaim string
	// ActorClaim holds the actor; "" is "sub".
	ActorClaim string
	// RoleClaim holds the roles, a string or array; "" is "roles".
	RoleClaim string
	// OperatorRole is the RoleClaim value granting [RoleOperator]; ""
	// grants it to none.
	OperatorRole string
	// AdminRole is the RoleClaim value granting [RoleAdmin]; "" grants
	// it to none. OperatorRole wins when both are present.
	AdminRole string
	// HTTPClient talks to the provider; nil has a 10 s timeout.
	HTTPClient *http.Client
	// KeyRefresh is the JWKS refresh interval; zero is DefaultKeyRefresh.
	KeyRefresh time.Duration
	// UnknownKeyRefresh is the least time between JWKS fetches caused by
	// unknown kids; zero is DefaultUnknownKeyRefresh.
	UnknownKeyRefresh time.Duration
}

// DefaultKeyRefresh is the default [OIDCConfig.KeyRefresh].
const DefaultKeyRefresh = time.Hour

// DefaultUnknownKeyRefresh is the default [OIDCConfig.UnknownKeyRefresh],
// which bounds the fetches forged kids can cause.
const DefaultUnknownKeyRefresh = 30 * time.Second

func (c *OIDCConfig) withDefaults() OIDCConfig {
	d := *c
	d.OrgClaim = cmp.Or(d.OrgClaim, "org_id")
	d.ActorClaim = cmp.Or(d.ActorClaim, "sub")
	d.RoleClaim = cmp.Or(d.RoleClaim, "roles")
	d.HTTPClient = cmp.Or(d.HTTPClient, defaultHTTPClient)
	d.KeyRefresh = cmp.Or(d.KeyRefresh, DefaultKeyRefresh)
	d.UnknownKeyRefresh = cmp.Or(d.UnknownKeyRefresh, DefaultUnknownKeyRefresh)
	return d
}

// Validate reports what is wrong with c, naming the field.
func (c *OIDCConfig) Validate() error {
	if err := CheckProviderURL(c.Issuer); err != nil {
		return fmt.Errorf("auth: OIDCConfig.Issuer %w", err)
	}
	switch {
	case c.Audience == "":
		return errors.New("auth: OIDCConfig.Audience is required")
	case c.KeyRefresh < 0 || c.UnknownKeyRefresh < 0:
		return errors.New("auth: OIDCConfig.KeyRefresh and UnknownKeyRefresh must not be negative")
	}
	return nil
}

// CheckProviderURL returns what is wrong with u as a provider URL, as a
// phrase completing "... ": it must be absolute https (or http on
// loopback) without query or fragment.
func CheckProviderURL(u string) error {
	p, err := url.Parse(u)
	switch {
	case u == "":
		return errors.New("is required")
	case err != nil || p.Host == "" || p.RawQuery != "" || p.Fragment != "":
		return fmt.Errorf("%q is not an absolute URL without query or fragment", u)
	case p.Scheme == "https":
		return nil
	case p.Scheme == "http" && (p.Hostname() == "localhost" || net.ParseIP(p.Hostname()).IsLoopback()):
		return nil
	}
	return fmt.Errorf("%q must be https (http only on a loopback host, for tests)", u)
}

// discovery is the part of the discovery document searchd reads.
type discovery struct {
	Issuer        string `json:"issuer"`
	AuthEndpoint  string `json:"authorization_endpoint"`
	TokenEndpoint string `json:"token_endpoint"`
	JWKSURI       string `json:"jwks_uri"`
	EndSession    string `json:"end_session_endpoint"`
}

// maxDiscoveryBytes bounds the discovery document read.
const maxDiscoveryBytes = 1 << 20

// provider is a discovered provider and its keys.
type provider struct {
	cfg  OIDCConfig
	doc  discovery
	keys keyfunc.Keyfunc
}

// discover reads the discovery document, checks its issuer, and fetches
// the JWKS, refreshed until ctx ends.
func discover(ctx context.Context, c OIDCConfig) (*provider, error) {
	cfg := c.withDefaults()
	where := strings.TrimSuffix(cfg.Issuer, "/") + "/.well-known/openid-configuration"
	rctx, cancel := context.WithTimeout(ctx, providerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, where, nil)
	if err != nil {
		return nil, fmt.Errorf("auth: discovery of %s: %w", cfg.Issuer, err)
	}
	resp, err := cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("auth: discovery of %s: %w", cfg.Issuer, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("auth: discovery of %s: GET %s answered %s", cfg.Issuer, where, resp.Status)
	}
	var doc discovery
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxDiscoveryBytes)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("auth: discovery of %s: the document is not JSON: %w", cfg.Issuer, err)
	}
	if doc.Issuer != cfg.Issuer {
		// OpenID Connect Discovery §4.3: do not trust another issuer's keys.
		return nil, fmt.Errorf("auth: discovery of %s: the document names the issuer %q", cfg.Issuer, doc.Issuer)
	}
	if err := CheckProviderURL(doc.JWKSURI); err != nil {
		return nil, fmt.Errorf("auth: discovery of %s: jwks_uri %w", cfg.Issuer, err)
	}
	noError := false
	keys, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{doc.JWKSURI}, keyfunc.Override{
		Client:                    cfg.HTTPClient,
		HTTPTimeout:               providerTimeout,
		NoErrorReturnFirstHTTPReq: &noError, // no keys at start is an error, not a silent 401 for ever
		RefreshInterval:           cfg.KeyRefresh,
		RefreshUnknownKID:         rate.NewLimiter(rate.Every(cfg.UnknownKeyRefresh), 1),
		// The wait for the limiter also bounds the fetch it allows.
		RateLimitWaitMax:        providerTimeout,
		RefreshErrorHandlerFunc: func(string) func(context.Context, error) { return func(context.Context, error) {} },
	})
	if err != nil {
		return nil, fmt.Errorf("auth: fetching the keys of %s from %s: %w", cfg.Issuer, doc.JWKSURI, err)
	}
	return &provider{cfg: cfg, doc: doc, keys: keys}, nil
}

// errKeyKind refuses a token whose key is not of its algorithm's kind.
var errKeyKind = errors.New("auth: the key does not fit the token's algorithm")

// key returns the JWKS key t's kid names, if it fits t's algorithm. A
// token without a kid is refused rather than tried against every key.
func (p *provider) key(ctx context.Context, t *jwt.Token) (any, error) {
	if _, ok := t.Header["kid"].(string); !ok {
		return nil, ErrInvalidToken
	}
	k, err := p.keys.KeyfuncCtx(ctx)(t)
	if err != nil {
		return nil, err
	}
	if !keyFits(t.Method.Alg(), k) {
		return nil, errKeyKind
	}
	return k, nil
}

// keyFits reports whether key is alg's kind: RS256 RSA of at least 2048
// bits, ES256 P-256, EdDSA Ed25519. Symmetric JWKS keys fit none.
func keyFits(alg string, key any) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return alg == jwt.SigningMethodRS256.Alg() && k.N.BitLen() >= 2048
	case *ecdsa.PublicKey:
		return alg == jwt.SigningMethodES256.Alg() && k.Curve == elliptic.P256()
	case ed25519.PublicKey:
		return alg == jwt.SigningMethodEdDSA.Alg()
	}
	return false
}
