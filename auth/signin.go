package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/oauth2"
)

// SignInConfig registers searchd's console as a client of the provider.
type SignInConfig struct {
	// ClientID is the console's client id at the provider. It must not
	// be the API's audience: the console's ID tokens would then be
	// bearer tokens of the API. Required.
	ClientID string
	// ClientSecret is the client's secret; "" for a public client, which
	// PKCE alone protects.
	ClientSecret string
	// RedirectURL is the console's callback as registered at the
	// provider: https://<host>/console/oidc/callback. Required.
	RedirectURL string
	// Scopes are asked for; "openid" is always among them. Nil is
	// ["openid"].
	Scopes []string
}

// SignIn signs people in to the console through the provider: the
// authorization code flow with PKCE (S256), state and nonce (OpenID
// Connect Core §3.1). It is safe for concurrent use.
type SignIn struct {
	v     *Verifier
	oauth oauth2.Config
}

// NewSignIn returns the sign-in of c through v's provider. It returns an
// error when v has no provider or c is incomplete.
func NewSignIn(v *Verifier, c SignInConfig) (*SignIn, error) {
	switch {
	case v == nil || v.oidc == nil:
		return nil, errors.New("auth: a sign-in needs a verifier with an OIDC provider")
	case c.ClientID == "":
		return nil, errors.New("auth: SignInConfig.ClientID is required")
	case c.ClientID == v.oidc.cfg.Audience:
		return nil, errors.New("auth: SignInConfig.ClientID is the API's audience: the console's ID tokens would be API tokens")
	case v.oidc.doc.AuthEndpoint == "" || v.oidc.doc.TokenEndpoint == "":
		return nil, fmt.Errorf("auth: the provider %s names no authorization or token endpoint", v.oidc.cfg.Issuer)
	}
	if err := CheckProviderURL(c.RedirectURL); err != nil {
		return nil, fmt.Errorf("auth: SignInConfig.RedirectURL %w", err)
	}
	scopes := slices.Clone(c.Scopes)
	if !slices.Contains(scopes, "openid") {
		scopes = append([]string{"openid"}, scopes...)
	}
	return &SignIn{v: v, oauth: oauth2.Config{
		ClientID:     c.ClientID,
		ClientSecret: c.ClientSecret,
		RedirectURL:  c.RedirectURL,
		Scopes:       scopes,
		Endpoint:     oauth2.Endpoint{AuthURL: v.oidc.doc.AuthEndpoint, TokenURL: v.oidc.doc.TokenEndpoint},
	}}, nil
}

// AuthorizationOrigin returns the origin (scheme://host) of the
// provider's authorization endpoint, where [SignIn.Start] sends browsers:
// what a Content-Security-Policy's form-action must admit.
func (s *SignIn) AuthorizationOrigin() string {
	u, err := url.Parse(s.oauth.Endpoint.AuthURL)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// Flow is one sign-in between [SignIn.Start] and [SignIn.Finish]: the
// state the provider sends back, the nonce its ID token must carry and
// the PKCE verifier of the code. The browser keeps it, in a cookie, and
// nobody else sees it.
type Flow struct {
	State, Nonce, Verifier string
}

// String encodes f for a cookie.
func (f Flow) String() string { return f.State + "." + f.Nonce + "." + f.Verifier }

// ParseFlow decodes a flow [Flow.String] encoded, or returns
// [ErrSignInState].
func ParseFlow(s string) (Flow, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return Flow{}, ErrSignInState
	}
	return Flow{State: parts[0], Nonce: parts[1], Verifier: parts[2]}, nil
}

// Start begins a sign-in: it returns its flow and the provider's URL to
// send the browser to.
func (s *SignIn) Start() (Flow, string) {
	// GenerateVerifier is 32 random bytes in base64url: a state and a
	// nonce as good as the PKCE verifier.
	f := Flow{State: oauth2.GenerateVerifier(), Nonce: oauth2.GenerateVerifier(), Verifier: oauth2.GenerateVerifier()}
	return f, s.oauth.AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier), oauth2.SetAuthURLParam("nonce", f.Nonce))
}

// ErrSignInState reports a callback that is not the answer to the
// browser's sign-in: no flow, or another state.
var ErrSignInState = errors.New("auth: the sign-in's state does not match")

// ProviderError is the provider's refusal of a sign-in (an error
// parameter on the callback, RFC 6749 §4.1.2.1).
type ProviderError struct {
	Code, Description string
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("auth: the provider refused the sign-in: %s %s", e.Code, e.Description)
}

// Finish completes the sign-in f with the query of the provider's
// callback: it checks the state, exchanges the code (with f's PKCE
// verifier) for the tokens, and verifies the ID token (issued by the
// provider for this client with f's nonce, by the package's rules). It
// returns the principal the ID token names; [ErrSignInState] for a
// callback of another sign-in, a *[ProviderError] when the provider
// refused, [ErrInvalidToken] for an ID token that does not verify, and
// another error when the exchange failed (the provider is unreachable or
// refused the code).
func (s *SignIn) Finish(ctx context.Context, f Flow, q url.Values) (Principal, error) {
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 || f.State == "" {
		return Principal{}, ErrSignInState
	}
	if code := q.Get("error"); code != "" {
		return Principal{}, &ProviderError{Code: code, Description: q.Get("error_description")}
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, s.v.oidc.cfg.HTTPClient)
	tok, err := s.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return Principal{}, fmt.Errorf("auth: the code exchange failed: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" || len(raw) > MaxTokenLen {
		return Principal{}, ErrInvalidToken
	}
	p, _, err := s.v.verify(ctx, raw, expectation{audience: s.oauth.ClientID, idToken: true, nonce: f.Nonce})
	return p, err
}
