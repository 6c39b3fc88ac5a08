package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/searchd/searchd/migrations"
)

// migrate applies the migrations to DATABASE_URL and prints what it did.
func (a *app) migrate(ctx context.Context, args []string) error {
	cfg, err := a.loadCommand("migrate", migrateCommand, args)
	if err != nil {
		return err
	}
	return a.migrateUp(ctx, cfg.DatabaseURL)
}

// migrateUp applies the migrations to the database of dbURL and prints
// the versions applied.
func (a *app) migrateUp(ctx context.Context, dbURL string) error {
	applied, err := migrations.Up(ctx, dbURL)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(a.stdout, "migrations: schema already at the newest version; nothing applied")
		return nil
	}
	vs := make([]string, len(applied))
	for i, v := range applied {
		vs[i] = strconv.FormatInt(v, 10)
	}
	fmt.Fprintln(a.stdout, "migrations: applied version "+strings.Join(vs, ", "))
	return nil
}
