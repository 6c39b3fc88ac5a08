package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/searchd/searchd/auth"
)

// Environment variables of authentication: the tokens the API accepts and
// how people sign in to the console (docs/auth.md).
const (
	envTokenMaxLifetime       = "SEARCHD_TOKEN_MAX_LIFETIME"
	envOIDCIssuer             = "SEARCHD_OIDC_ISSUER"
	envOIDCAudience           = "SEARCHD_OIDC_AUDIENCE"
	envOIDCOrgClaim           = "SEARCHD_OIDC_ORG_CLAIM"
	envOIDCActorClaim         = "SEARCHD_OIDC_ACTOR_CLAIM"
	envOIDCRoleClaim          = "SEARCHD_OIDC_ROLE_CLAIM"
	envOIDCOperatorRole       = "SEARCHD_OIDC_OPERATOR_ROLE"
	envOIDCAdminRole          = "SEARCHD_OIDC_ADMIN_ROLE"
	envOIDCClientID           = "SEARCHD_OIDC_CLIENT_ID"
	envOIDCClientSecret       = "SEARCHD_OIDC_CLIENT_SECRET"
	envOIDCRedirectURL        = "SEARCHD_OIDC_REDIRECT_URL"
	envOIDCScopes             = "SEARCHD_OIDC_SCOPES"
	envConsoleSessionLifetime = "SEARCHD_CONSOLE_SESSION_LIFETIME"
	envConsoleTokenSignIn     = "SEARCHD_CONSOLE_TOKEN_SIGN_IN"
)

const maxClaimNameLen = 100

// authConfig is how serve and dev authenticate.
type authConfig struct {
	// MaxLifetime is auth.Config.MaxLifetime.
	MaxLifetime time.Duration
	// OIDC is the provider of the API's tokens; nil for none.
	OIDC *auth.OIDCConfig
	// SignIn registers the console at the provider; nil when people do
	// not sign in through it.
	SignIn *auth.SignInConfig
	// SessionLifetime is the longest a console session lives.
	SessionLifetime time.Duration
	// TokenSignIn lets a person paste a token into the console's sign-in
	// form.
	TokenSignIn bool
}

// claimName is the kind of the settings that name a claim of the
// provider's tokens.
func claimName(at func(*loading) *string) text {
	return text{at: at, desc: fmt.Sprintf("a claim name: at most %d bytes, no spaces", maxClaimNameLen),
		check: func(s setting) string {
			if len(s.value) > maxClaimNameLen || strings.ContainsFunc(s.value, isSpaceOrControl) {
				return fmt.Sprintf("%q is not a claim name: at most %d bytes, no spaces", s.value, maxClaimNameLen)
			}
			return ""
		}}
}

// jwtSecretProblem checks the length of the HS256 secret.
func jwtSecretProblem(s setting) string {
	if err := (auth.Config{Secret: []byte(s.value)}).Validate(); err != nil {
		return err.Error()
	}
	return ""
}

// checkAuthSettings assembles the provider of the API's tokens and the
// console's registration at it from their settings, when they are set,
// and checks what the settings say of one another: the secret is
// required unless a provider is configured (or dev generates it).
func checkAuthSettings(r *reader) {
	c := r.cfg
	c.Auth.OIDC = checkOIDCSettings(r)
	c.Auth.SignIn = checkSignInSettings(r, c.Auth.OIDC)
	if c.JWTSecret == "" && !r.dev && c.Auth.OIDC == nil {
		r.bad(r.given[envJWTSecret], "is required (unless %s is set): at least %d bytes of secret for HS256 tokens "+
			"(generate one with `openssl rand -base64 48`)", envOIDCIssuer, auth.MinSecretLen)
	}
}

// checkOIDCSettings returns the provider of the API's tokens: nil when no
// issuer is set.
func checkOIDCSettings(r *reader) *auth.OIDCConfig {
	issuer, audience := r.given[envOIDCIssuer], r.given[envOIDCAudience]
	switch {
	case issuer.value == "" && audience.value != "":
		r.bad(audience, "is set without %s: name the provider whose tokens carry it", envOIDCIssuer)
		return nil
	case issuer.value == "":
		return nil
	}
	if err := auth.CheckProviderURL(issuer.value); err != nil {
		r.bad(issuer, "%v", err)
	}
	if audience.value == "" {
		r.bad(audience, "is required with %s: the identifier the provider gives searchd's API (an access token's aud)", envOIDCIssuer)
	}
	o := r.cfg.oidc
	return &o
}

// checkSignInSettings returns the console's registration at the provider
// o: nil when neither the client id nor the redirect URL is set.
func checkSignInSettings(r *reader, o *auth.OIDCConfig) *auth.SignInConfig {
	client, redirect := r.given[envOIDCClientID], r.given[envOIDCRedirectURL]
	if client.value == "" && redirect.value == "" {
		return nil
	}
	switch {
	case o == nil:
		r.bad(client, "needs %s: the console signs in through the provider it names", envOIDCIssuer)
	case client.value == "":
		r.bad(client, "is required with %s", envOIDCRedirectURL)
	case client.value == o.Audience:
		r.bad(client, "is the API's audience (%s): the console's ID tokens would be bearer tokens of the API; "+
			"register the console as a client of its own", envOIDCAudience)
	}
	if err := auth.CheckProviderURL(redirect.value); err != nil {
		r.bad(redirect, "%v (the console's callback, https://HOST/console/oidc/callback)", err)
	}
	si := r.cfg.signIn
	si.Scopes = strings.Fields(r.cfg.scopes)
	return &si
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }
