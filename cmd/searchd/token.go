package main

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

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
	asAdmin := fs.Bool("admin", false, "mint an organization admin's token (role claim \"admin\") of --org: an organization's "+
		"token that also creates, lists and revokes its service keys; --sub, required, names the admin")
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
			*ttl, maxTTL, envTokenMaxLifetime))
	}
	if cfg.JWTSecret == "" {
		problems = append(problems, envJWTSecret+": is required: the secret the server verifies tokens with")
	}
	// One role at most; each needs --sub, which names who acts.
	sign, roles := auth.SignToken, 0
	for _, r := range []struct {
		on         bool
		flag, what string
		sign       func([]byte, uuid.UUID, string, time.Time, time.Duration) (string, error)
	}{
		{*asOperator, "--operator", "the operator in every release recorded", auth.SignOperatorToken},
		{*asRuntime, "--runtime", "the runtime in every status change recorded", auth.SignRuntimeToken},
		{*asAdmin, "--admin", "the admin on every key they create or revoke", auth.SignAdminToken},
	} {
		if !r.on {
			continue
		}
		roles, sign = roles+1, r.sign
		if *sub == "" {
			problems = append(problems, "--sub: is required with "+r.flag+": it names "+r.what)
		}
	}
	if roles > 1 {
		problems = append(problems, "--runtime, --operator and --admin: choose one role")
	}
	if len(problems) > 0 {
		return invalid(problems)
	}
	tok, err := sign([]byte(cfg.JWTSecret), orgID, *sub, a.now(), *ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, tok)
	return nil
}
