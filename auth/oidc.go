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
// accepts, and how their claims map to a [Principal].
type OIDCConfig struct {
	// Issuer is the provider's issuer URL, exactly as its tokens' iss
	// and its discovery document say it: https, or http on a loopback
	// host (for tests and local development). Required.
	Issuer string
	// Audience must be one of an access token's aud values: the
	// identifier the provider gives searchd's API. Required.
	Audience string
	// OrgClaim holds the organization's UUID; "" is "org_id".
	OrgClaim string
	// ActorClaim holds the actor; "" is "sub".
	ActorClaim string
	// RoleClaim holds the person's roles, a string or an array of
	// strings; "" is "roles".
	RoleClaim string
	// OperatorRole is the value of RoleClaim that makes a principal an
	// operator; "" makes no provider token an operator's.
	OperatorRole string
	// AdminRole is the value of RoleClaim that makes a principal its
	// organization's admin ([RoleAdmin]), who manages its service keys;
	// "" makes no provider token an admin's. OperatorRole wins when the
	// claim holds both.
	AdminRole string
	// HTTPClient makes the requests to the provider; nil is a client
	// with a 10 s timeout.
	HTTPClient *http.Client
	// KeyRefresh is how often the JWKS is fetched again in the
	// background; zero is DefaultKeyRefresh.
	KeyRefresh time.Duration
	// UnknownKeyRefresh is the least time between two fetches of the
	// JWKS caused by tokens whose kid is unknown (a rotation at the
	// provider); zero is DefaultUnknownKeyRefresh.
	UnknownKeyRefresh time.Duration
}

// DefaultKeyRefresh is the default [OIDCConfig.KeyRefresh].
const DefaultKeyRefresh = time.Hour

// DefaultUnknownKeyRefresh is the default [OIDCConfig.UnknownKeyRefresh]:
// a rotation is seen by the first token signed with the new key, and a
// stream of tokens with made-up kids costs the provider one fetch every
// 30 s.
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

// CheckProviderURL returns what is wrong with u as the URL of a provider
// or one of its endpoints, completing "... ": it must be absolute, https,
// or http on a loopback host, with no query or fragment.
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

// discovery is the part of the provider's discovery document searchd
// reads (OpenID Connect Discovery 1.0 §3).
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

// discover reads the provider's discovery document, checks that it names
// the configured issuer, and fetches its JWKS, refreshed in the
// background until ctx ends.
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
		// OpenID Connect Discovery §4.3: a mismatch means the document is
		// not this issuer's, and its keys must not be trusted for it.
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

// key returns the JWKS key of t: the one its kid names (fetching the JWKS
// again, rate-limited, when the kid is unknown), and only when it fits t's
// algorithm. A token without a kid is refused: every provider names its
// key, and trying each would let one token probe them all.
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

// keyFits reports whether key is the one kind of key alg may be verified
// with: RS256 an RSA key of at least 2048 bits, ES256 a P-256 key, EdDSA
// an Ed25519 key. A symmetric key from the JWKS fits none of them.
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
