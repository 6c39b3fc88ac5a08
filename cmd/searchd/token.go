package main

import (
	"context"
	"fmt"
	"time"

	"github.com/searchd/searchd/auth"
)

// token prints a bearer token for an organization, signed with
// SEARCHD_JWT_SECRET.
func (a *app) token(_ context.Context, args []string) error {
	fs := a.flagSet("token", tokenCommand)
	org := fs.String("org", "", "organization id (UUID; required, but optional with --operator)")
	sub := fs.String("sub", "", "subject, recorded as the actor of starts (optional)")
	ttl := fs.Duration("ttl", time.Hour, "how long the token is valid")
	asOperator := fs.Bool("operator", false, "mint an operator's token (role claim \"operator\"): --sub is required, --org optional")
	asRuntime := fs.Bool("runtime", false, "mint a runtime credential (role claim \"runtime\") of --org: it reports the status of the "+
		"organization's Runs (PUT /v1/runs/{id}/status) and opens no other route; --sub, required, names the runtime")
	if err := parse(fs, args); err != nil {
		return err
	}
	var problems []string
	orgID := readOrg(&problems, *org, !*asOperator) // an operator's token may name no organization
	cfg, settingProblems := loadSettings(fs, a.getenv, cmdToken)
	problems = append(problems, settingProblems...)
	// A token the server would refuse is no token: --ttl is bounded by
	// the lifetime the server accepts.
	if maxTTL := cfg.Auth.MaxLifetime; *ttl <= 0 || *ttl > maxTTL {
		problems = append(problems, fmt.Sprintf("--ttl: %s is out of range: more than 0s, at most %s, the longest lifetime the server accepts (%s)",
			*ttl, maxTTL, EnvTokenMaxLifetime))
	}
	secret := cfg.JWTSecret
	if secret == "" {
		problems = append(problems, EnvJWTSecret+": is required: the secret the server verifies tokens with")
	}
	if *asOperator && *sub == "" {
		problems = append(problems, "--sub: is required with --operator: it names the operator in every release recorded")
	}
	if *asRuntime && *sub == "" {
		problems = append(problems, "--sub: is required with --runtime: it names the runtime in every status change recorded")
	}
	if *asRuntime && *asOperator {
		problems = append(problems, "--runtime and --operator: choose one role")
	}
	if len(problems) > 0 {
		return invalid(problems)
	}
	sign := auth.SignToken
	switch {
	case *asOperator:
		sign = auth.SignOperatorToken
	case *asRuntime:
		sign = auth.SignRuntimeToken
	}
	tok, err := sign([]byte(secret), orgID, *sub, a.now(), *ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, tok)
	return nil
}
