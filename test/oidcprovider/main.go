// Command oidcprovider is a real OpenID Connect provider for searchd's
// tests, served on loopback: github.com/zitadel/oidc's provider on its
// example storage, plus users with org_id and roles claims, JWT access
// tokens with an extra audience per client, EC and Ed25519 keys beside
// the RSA one, and key rotation.
//
// It takes its configuration as JSON in -config (an [oidctest.Config]), prints one
// JSON line {"issuer": ...} when it serves, then answers commands on
// stdin, one a line:
//
//	keys                  prints {"rsa": kid, "ec": kid, "ed": kid, "unpublished": kid}
//	sign KEY HEADER CLAIMS signs the base64url JSON HEADER and CLAIMS, exactly
//	                      as given, with KEY (rsa, ec, ed, or unpublished: an
//	                      RSA key that is in no JWKS); prints the token
//	rotate                makes a new RSA key the signing key, published beside
//	                      the old one; prints its kid
//	hits                  prints how many times the JWKS was fetched
//
// and stops when stdin closes (or on SIGTERM/SIGINT).
package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"

	"github.com/searchd/searchd/internal/testkit/oidctest"
)

func main() {
	raw := flag.String("config", "{}", "the configuration, as JSON")
	flag.Parse()
	if err := run(*raw); err != nil {
		fmt.Fprintln(os.Stderr, "oidcprovider:", err)
		os.Exit(1)
	}
}

func run(raw string) error {
	var cfg oidctest.Config
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return fmt.Errorf("-config: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	issuer := "http://" + ln.Addr().String()
	p, err := newProvider(cfg)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	router := exampleop.SetupServer(issuer, p, logger, false)
	var hits atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/keys" {
			hits.Add(1)
		}
		router.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	out, _ := json.Marshal(map[string]string{"issuer": issuer})
	fmt.Println(string(out))

	oidctest.AnswerLines(ctx, os.Stdin, func(line string) string { return p.answer(line, hits.Load()) })
	return nil
}

// provider is the example storage with searchd's additions.
type provider struct {
	*storage.Storage
	users    map[string]oidctest.User // by user id
	audience map[string][]string      // extra audience, by client id

	mu          sync.Mutex
	rsaKeys     []*key // the last is the signing key
	ec, ed      *key
	unpublished *key
}

// key is a signing key and its id.
type key struct {
	id   string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func (k *key) SignatureAlgorithm() jose.SignatureAlgorithm { return k.alg }
func (k *key) Algorithm() jose.SignatureAlgorithm          { return k.alg }
func (k *key) Key() any                                    { return k.priv }
func (k *key) ID() string                                  { return k.id }
func (k *key) Use() string                                 { return "sig" }

// publicKey is a key as the JWKS shows it.
type publicKey struct{ *key }

func (k publicKey) Key() any { return k.priv.Public() }

// newKey returns a new key for alg: RS256, ES256 (P-256) or EdDSA
// (Ed25519).
func newKey(alg jose.SignatureAlgorithm) (*key, error) {
	var priv crypto.Signer
	var err error
	switch alg {
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	return &key{id: rand.Text(), alg: alg, priv: priv}, err
}

func newProvider(cfg oidctest.Config) (*provider, error) {
	users := userStore{}
	p := &provider{users: map[string]oidctest.User{}, audience: map[string][]string{}}
	for _, u := range cfg.Users {
		id := u.Username // the sub of the user's tokens
		users[id] = &storage.User{ID: id, Username: u.Username, Password: u.Password, FirstName: u.Username,
			LastName: "Example", Email: u.Username + "@example.com", EmailVerified: true, PreferredLanguage: language.English}
		p.users[id] = u
	}
	clients := map[string]*storage.Client{}
	for _, c := range cfg.Clients {
		if c.Secret == "" {
			clients[c.ID] = storage.NativeClient(c.ID, c.RedirectURIs...)
		} else {
			clients[c.ID] = storage.WebClient(c.ID, c.Secret, c.RedirectURIs...)
		}
		p.audience[c.ID] = c.Audience
	}
	p.Storage = storage.NewStorageWithClients(users, clients)
	keys := make([]*key, 4)
	for i, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.RS256, jose.ES256, jose.EdDSA} {
		var err error
		if keys[i], err = newKey(alg); err != nil {
			return nil, err
		}
	}
	p.rsaKeys, p.unpublished, p.ec, p.ed = keys[:1:1], keys[1], keys[2], keys[3]
	return p, nil
}

// userStore holds the configured users by id, which is their username.
type userStore map[string]*storage.User

func (u userStore) GetUserByID(id string) *storage.User         { return u[id] }
func (u userStore) GetUserByUsername(name string) *storage.User { return u[name] }
func (u userStore) ExampleClientID() string                     { return storage.ServiceUserID }

// SigningKey is the newest RSA key.
func (p *provider) SigningKey(context.Context) (op.SigningKey, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rsaKeys[len(p.rsaKeys)-1], nil
}

func (p *provider) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}, nil
}

// KeySet is the JWKS: every RSA key made (rotation keeps the old ones),
// the EC key and the Ed25519 key; never the unpublished one.
func (p *provider) KeySet(context.Context) ([]op.Key, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := []op.Key{publicKey{p.ec}, publicKey{p.ed}}
	for _, k := range p.rsaKeys {
		keys = append(keys, publicKey{k})
	}
	return keys, nil
}

// jwtClient makes a client's access tokens JWTs.
type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

func (p *provider) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := p.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

// authRequest adds the client's extra audience to a request's tokens.
type authRequest struct {
	*storage.AuthRequest
	extra []string
}

func (r authRequest) GetAudience() []string {
	return append(r.AuthRequest.GetAudience(), r.extra...)
}

func (p *provider) wrap(r op.AuthRequest, err error) (op.AuthRequest, error) {
	if err != nil {
		return nil, err
	}
	inner := r.(*storage.AuthRequest)
	return authRequest{inner, p.audience[inner.GetClientID()]}, nil
}

func (p *provider) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	return p.wrap(p.Storage.CreateAuthRequest(ctx, req, userID))
}

func (p *provider) AuthRequestByID(ctx context.Context, id string) (op.AuthRequest, error) {
	return p.wrap(p.Storage.AuthRequestByID(ctx, id))
}

func (p *provider) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	return p.wrap(p.Storage.AuthRequestByCode(ctx, code))
}

// unwrap returns the example storage's own request type, which it
// switches on.
func unwrap(r op.TokenRequest) op.TokenRequest {
	if w, ok := r.(authRequest); ok {
		return w.AuthRequest
	}
	return r
}

func (p *provider) CreateAccessToken(ctx context.Context, r op.TokenRequest) (string, time.Time, error) {
	return p.Storage.CreateAccessToken(ctx, unwrap(r))
}

func (p *provider) CreateAccessAndRefreshTokens(ctx context.Context, r op.TokenRequest, current string) (string, string, time.Time, error) {
	return p.Storage.CreateAccessAndRefreshTokens(ctx, unwrap(r), current)
}

// searchdClaims are the org_id and roles claims of user's tokens; an
// unknown user's are none.
func (p *provider) searchdClaims(userID string) map[string]any {
	u := p.users[userID]
	c := map[string]any{}
	if u.Org != "" {
		c["org_id"] = u.Org
	}
	if len(u.Roles) > 0 {
		c["roles"] = u.Roles
	}
	return c
}

// GetPrivateClaimsFromScopes adds searchd's claims to access tokens.
func (p *provider) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := p.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if err != nil {
		return nil, err
	}
	if claims == nil {
		claims = map[string]any{}
	}
	maps.Copy(claims, p.searchdClaims(userID))
	return claims, nil
}

// SetUserinfoFromRequest adds searchd's claims to ID tokens (and the
// userinfo they are built from).
func (p *provider) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, r op.IDTokenRequest, scopes []string) error {
	if err := p.Storage.SetUserinfoFromRequest(ctx, info, r, scopes); err != nil {
		return err
	}
	for k, v := range p.searchdClaims(r.GetSubject()) {
		info.AppendClaims(k, v)
	}
	return nil
}

// answer answers one command of the tests.
func (p *provider) answer(line string, hits int64) string {
	f := strings.Fields(line)
	if len(f) == 0 {
		return "error: empty command"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := map[string]*key{"rsa": p.rsaKeys[len(p.rsaKeys)-1], "ec": p.ec, "ed": p.ed, "unpublished": p.unpublished}
	switch {
	case f[0] == "keys" && len(f) == 1:
		ids := map[string]string{}
		for name, k := range keys {
			ids[name] = k.id
		}
		out, _ := json.Marshal(ids)
		return string(out)
	case f[0] == "rotate" && len(f) == 1:
		k, err := newKey(jose.RS256)
		if err != nil {
			return "error: " + err.Error()
		}
		p.rsaKeys = append(p.rsaKeys, k)
		return k.id
	case f[0] == "hits" && len(f) == 1:
		return fmt.Sprint(hits)
	case f[0] == "sign" && len(f) == 4:
		k, ok := keys[f[1]]
		if !ok {
			return "error: no key " + f[1]
		}
		tok, err := signRaw(k, f[2], f[3])
		if err != nil {
			return "error: " + err.Error()
		}
		return tok
	}
	return "error: unknown command"
}

// signRaw signs header.claims, two base64url segments used as given, with
// k by k's algorithm, and returns the JWS compact serialization.
func signRaw(k *key, header, claims string) (string, error) {
	input := header + "." + claims
	sig, err := jwt.GetSigningMethod(string(k.alg)).Sign(input, k.priv)
	if err != nil {
		return "", err
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}
