package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/searchd/searchd/auth"
)

// Environment variables of authentication: the tokens the API accepts and
// how people sign in to the console (docs/auth.md).
const (
	// EnvTokenMaxLifetime is the longest a token may live (exp − iat).
	EnvTokenMaxLifetime = "SEARCHD_TOKEN_MAX_LIFETIME"
	// EnvOIDCIssuer is the issuer of the OpenID Connect provider whose
	// access tokens the API accepts.
	EnvOIDCIssuer = "SEARCHD_OIDC_ISSUER"
	// EnvOIDCAudience must be in an access token's aud.
	EnvOIDCAudience = "SEARCHD_OIDC_AUDIENCE"
	// EnvOIDCOrgClaim, EnvOIDCActorClaim and EnvOIDCRoleClaim name the
	// claims the organization, the actor and the roles come from.
	EnvOIDCOrgClaim   = "SEARCHD_OIDC_ORG_CLAIM"
	EnvOIDCActorClaim = "SEARCHD_OIDC_ACTOR_CLAIM"
	EnvOIDCRoleClaim  = "SEARCHD_OIDC_ROLE_CLAIM"
	// EnvOIDCOperatorRole is the role claim's value of an operator.
	EnvOIDCOperatorRole = "SEARCHD_OIDC_OPERATOR_ROLE"
	// EnvOIDCClientID, EnvOIDCClientSecret, EnvOIDCRedirectURL and
	// EnvOIDCScopes register the console as a client of the provider.
	EnvOIDCClientID     = "SEARCHD_OIDC_CLIENT_ID"
	EnvOIDCClientSecret = "SEARCHD_OIDC_CLIENT_SECRET"
	EnvOIDCRedirectURL  = "SEARCHD_OIDC_REDIRECT_URL"
	EnvOIDCScopes       = "SEARCHD_OIDC_SCOPES"
	// EnvConsoleSessionLifetime is the longest a console session lives.
	EnvConsoleSessionLifetime = "SEARCHD_CONSOLE_SESSION_LIFETIME"
	// EnvConsoleTokenSignIn lets a person sign in to the console by
	// pasting a token (development).
	EnvConsoleTokenSignIn = "SEARCHD_CONSOLE_TOKEN_SIGN_IN"
)

// Defaults and limits of those settings.
const (
	DefaultTokenMaxLifetime       = auth.DefaultMaxLifetime
	DefaultConsoleSessionLifetime = 8 * time.Hour
	minTokenMaxLifetime           = time.Minute
	maxTokenMaxLifetime           = 30 * 24 * time.Hour
	minConsoleSessionLifetime     = time.Minute
	maxConsoleSessionLifetime     = 7 * 24 * time.Hour
	maxClaimNameLen               = 100
)

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

// authOptions are the settings above, for --help; dev signs in with
// tokens by default.
func authOptions(dev bool) []option {
	tokenSignIn := "false"
	if dev {
		tokenSignIn = "true"
	}
	return []option{
		optTokenMaxLifetime,
		{"oidc-issuer", EnvOIDCIssuer, "none",
			"issuer URL of the company's OpenID Connect provider, exactly as its tokens' iss: searchd discovers it at start-up " +
				"and accepts its RS256, ES256 and EdDSA access tokens (https; http only on loopback)"},
		{"oidc-audience", EnvOIDCAudience, "none (required with the issuer)",
			"the identifier the provider gives searchd's API: an access token's aud must contain it"},
		{"oidc-org-claim", EnvOIDCOrgClaim, "org_id", "claim holding the organization's UUID"},
		{"oidc-actor-claim", EnvOIDCActorClaim, "sub", "claim naming the actor recorded with what a caller does"},
		{"oidc-role-claim", EnvOIDCRoleClaim, "roles", "claim holding the person's roles: a string or an array of strings"},
		{"oidc-operator-role", EnvOIDCOperatorRole, "none: no provider token is an operator's",
			"value of the role claim that makes a person an operator of the platform (every organization's claims in the console)"},
		{"oidc-client-id", EnvOIDCClientID, "none: the console does not sign in through the provider",
			"the console's client id at the provider; must not be the audience"},
		{"", EnvOIDCClientSecret, "none: a public client (PKCE alone)", "the console's client secret at the provider"},
		{"oidc-redirect-url", EnvOIDCRedirectURL, "none (required with the client id)",
			"the console's callback as registered at the provider: https://HOST/console/oidc/callback"},
		{"oidc-scopes", EnvOIDCScopes, "openid", "scopes the console asks for, separated by spaces; openid is always asked for"},
		{"console-session-lifetime", EnvConsoleSessionLifetime, DefaultConsoleSessionLifetime.String(),
			fmt.Sprintf("longest a console session lives (a pasted token's own exp may end it sooner); %s to %s",
				minConsoleSessionLifetime, maxConsoleSessionLifetime)},
		{"console-token-sign-in", EnvConsoleTokenSignIn, tokenSignIn,
			"whether a person may sign in to the console by pasting a bearer token: for development (searchd dev turns it on); " +
				"true or false"},
	}
}

// problemf records a problem with the setting s.
type problemf func(s setting, format string, args ...any)

// readAuthSettings reads the settings above and SEARCHD_JWT_SECRET, and
// returns what is wrong with them, one message per setting. The secret
// is required unless a provider is configured (or dev generates it).
func readAuthSettings(fs *flag.FlagSet, getenv func(string) string, dev bool) (string, authConfig, []string) {
	var problems []string
	bad := func(s setting, format string, args ...any) {
		problems = append(problems, s.name+": "+fmt.Sprintf(format, args...))
	}
	duration := func(fl, env string, def, lo, hi time.Duration) time.Duration {
		s := lookup(fs, fl, env, getenv)
		if s.value == "" {
			return def
		}
		d, err := time.ParseDuration(s.value)
		switch {
		case err != nil:
			bad(s, "%q is not a duration (write it like 8h or 30m)", s.value)
		case d < lo || d > hi:
			bad(s, "%s is out of range: from %s to %s", d, lo, hi)
		default:
			return d
		}
		return def
	}
	var c authConfig
	c.MaxLifetime = duration("token-max-lifetime", EnvTokenMaxLifetime, DefaultTokenMaxLifetime, minTokenMaxLifetime, maxTokenMaxLifetime)
	c.SessionLifetime = duration("console-session-lifetime", EnvConsoleSessionLifetime, DefaultConsoleSessionLifetime,
		minConsoleSessionLifetime, maxConsoleSessionLifetime)
	c.TokenSignIn = dev
	if s := lookup(fs, "console-token-sign-in", EnvConsoleTokenSignIn, getenv); s.value != "" {
		b, err := strconv.ParseBool(s.value)
		if err != nil {
			bad(s, "%q is not true or false", s.value)
		}
		c.TokenSignIn = b
	}
	c.OIDC = readOIDCSettings(fs, getenv, bad)
	c.SignIn = readSignInSettings(fs, getenv, c.OIDC, bad)

	secret := setting{name: EnvJWTSecret, value: getenv(EnvJWTSecret)}
	switch {
	case secret.value == "" && !dev && c.OIDC == nil:
		bad(secret, "is required (unless %s is set): at least %d bytes of secret for HS256 tokens (generate one with `openssl rand -base64 48`)",
			EnvOIDCIssuer, auth.MinSecretLen)
	case secret.value != "" && len(secret.value) < auth.MinSecretLen:
		bad(secret, "is %d bytes long; it must be at least %d (generate one with `openssl rand -base64 48`)", len(secret.value), auth.MinSecretLen)
	}
	return secret.value, c, problems
}

// readOIDCSettings reads the provider of the API's tokens: nil when no
// issuer is set.
func readOIDCSettings(fs *flag.FlagSet, getenv func(string) string, bad problemf) *auth.OIDCConfig {
	claim := func(fl, env string) string {
		s := lookup(fs, fl, env, getenv)
		if s.value != "" && (len(s.value) > maxClaimNameLen || strings.ContainsFunc(s.value, isSpaceOrControl)) {
			bad(s, "%q is not a claim name: at most %d bytes, no spaces", s.value, maxClaimNameLen)
		}
		return s.value
	}
	issuer := lookup(fs, "oidc-issuer", EnvOIDCIssuer, getenv)
	audience := lookup(fs, "oidc-audience", EnvOIDCAudience, getenv)
	o := &auth.OIDCConfig{Issuer: issuer.value, Audience: audience.value,
		OrgClaim: claim("oidc-org-claim", EnvOIDCOrgClaim), ActorClaim: claim("oidc-actor-claim", EnvOIDCActorClaim),
		RoleClaim: claim("oidc-role-claim", EnvOIDCRoleClaim), OperatorRole: lookup(fs, "oidc-operator-role", EnvOIDCOperatorRole, getenv).value}
	switch {
	case issuer.value == "" && audience.value != "":
		bad(audience, "is set without %s: name the provider whose tokens carry it", EnvOIDCIssuer)
		return nil
	case issuer.value == "":
		return nil
	}
	if err := auth.CheckProviderURL(issuer.value); err != nil {
		bad(issuer, "%v", err)
	}
	if audience.value == "" {
		bad(audience, "is required with %s: the identifier the provider gives searchd's API (an access token's aud)", EnvOIDCIssuer)
	}
	return o
}

// readSignInSettings reads the console's registration at the provider o:
// nil when neither the client id nor the redirect URL is set.
func readSignInSettings(fs *flag.FlagSet, getenv func(string) string, o *auth.OIDCConfig, bad problemf) *auth.SignInConfig {
	client := lookup(fs, "oidc-client-id", EnvOIDCClientID, getenv)
	redirect := lookup(fs, "oidc-redirect-url", EnvOIDCRedirectURL, getenv)
	if client.value == "" && redirect.value == "" {
		return nil
	}
	switch {
	case o == nil:
		bad(client, "needs %s: the console signs in through the provider it names", EnvOIDCIssuer)
	case client.value == "":
		bad(client, "is required with %s", EnvOIDCRedirectURL)
	case client.value == o.Audience:
		bad(client, "is the API's audience (%s): the console's ID tokens would be bearer tokens of the API; "+
			"register the console as a client of its own", EnvOIDCAudience)
	}
	if err := auth.CheckProviderURL(redirect.value); err != nil {
		bad(redirect, "%v (the console's callback, https://HOST/console/oidc/callback)", err)
	}
	return &auth.SignInConfig{ClientID: client.value, ClientSecret: getenv(EnvOIDCClientSecret), RedirectURL: redirect.value,
		Scopes: strings.Fields(lookup(fs, "oidc-scopes", EnvOIDCScopes, getenv).value)}
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }
