package main

import (
	"context"
	"fmt"
	"strings"
)

// subcommand is one verb of a command with several (`claims show`).
type subcommand struct {
	name string
	run  func(context.Context, []string) error
}

// dispatchSubcommand runs the subcommand args[0] names among subs with the
// rest of args. "help", "-h", "-help" and "--help" print usage on stdout;
// no subcommand prints it on stderr and, like an unknown one, answers a
// usage error prefixed by command ("claims", "runs dispatch").
func (a *app) dispatchSubcommand(ctx context.Context, command, usage string, args []string, subs ...subcommand) error {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	choice := names[0]
	if n := len(names); n > 1 {
		choice = strings.Join(names[:n-1], ", ") + " or " + names[n-1]
	}
	if len(args) == 0 {
		fmt.Fprint(a.stderr, usage)
		return usagef("%s: name a subcommand: %s", command, choice)
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(a.stdout, usage)
		return nil
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(ctx, args[1:])
		}
	}
	return usagef("%s: unknown subcommand %q: use %s", command, args[0], choice)
}
