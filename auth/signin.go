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
	// ClientID is the console's client id; required, and not the API's
	// audience, or its ID tokens would be API bearer tokens.
	ClientID string
	// ClientSecret is "" for a public client.
	ClientSecret string
	// RedirectURL is the registered callback,
	// https://<host>/console/oidc/callback. Required.
	RedirectURL string
	// Scopes are requested; "openid" is always added.
	Scopes []string
}

// SignIn runs the console's authorization code flow with PKCE, state and
// nonce (OpenID Connect Core §3.1). It is safe for concurrent use.
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

// AuthorizationOrigin returns the authorization endpoint's origin, for a
// Content-Security-Policy form-action.
func (s *SignIn) AuthorizationOrigin() string {
	u, err := url.Parse(s.oauth.Endpoint.AuthURL)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// Flow is a sign-in's state, nonce and PKCE verifier between
// [SignIn.Start] and [SignIn.Finish], kept in the browser's cookie.
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
	// GenerateVerifier's 32 random bytes serve for state and nonce too.
	f := Flow{State: oauth2.GenerateVerifier(), Nonce: oauth2.GenerateVerifier(), Verifier: oauth2.GenerateVerifier()}
	return f, s.oauth.AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier), oauth2.SetAuthURLParam("nonce", f.Nonce))
}

// ErrSignInState reports a callback that does not match the browser's
// sign-in.
var ErrSignInState = errors.New("auth: the sign-in's state does not match")

// ProviderError is the provider's refusal of a sign-in (RFC 6749
// §4.1.2.1).
type ProviderError struct {
	Code, Description string
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("auth: the provider refused the sign-in: %s %s", e.Code, e.Description)
}

// Finish completes sign-in f with the callback's query: it checks the
// state, exchanges the code and verifies the ID token. It returns
// [ErrSignInState] for another sign-in's callback, a *[ProviderError] when
// the provider refused, [ErrInvalidToken] for a bad ID token, and another
// error when the exchange failed.
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
