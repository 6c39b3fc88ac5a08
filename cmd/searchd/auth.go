package main

import (
	"context"
	"fmt"

	"github.com/searchd/searchd/auth"
)

// newVerifier builds the one verifier of bearer tokens the API and the
// console share, from cfg. With a provider configured it discovers it and
// fetches its keys (an error when it cannot: start-up fails rather than
// refuse every token), then keeps them fresh until ctx ends.
func newVerifier(ctx context.Context, cfg serverConfig) (*auth.Verifier, error) {
	c := auth.Config{OIDC: cfg.Auth.OIDC, MaxLifetime: cfg.Auth.MaxLifetime}
	if cfg.JWTSecret != "" {
		c.Secret = []byte(cfg.JWTSecret)
	}
	v, err := auth.NewVerifier(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envOIDCIssuer, err)
	}
	return v, nil
}
