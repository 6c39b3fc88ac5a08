package main

import (
	"cmp"
	"fmt"
	"runtime/debug"
)

// version and commit are stamped by `make build` (-ldflags "-X
// main.version=... -X main.commit=..."); a plain go build leaves them empty
// and buildInfo falls back to what the Go toolchain recorded.
var (
	version string
	commit  string
)

// build describes the binary: its version, commit and Go version.
type build struct {
	Version, Commit, GoVersion string
}

// buildInfo returns the build of this binary: the stamped version and
// commit, else the module version and VCS revision Go recorded, else
// "dev" and "unknown".
func buildInfo() build {
	b := build{Version: version, Commit: commit, GoVersion: "unknown"}
	if info, ok := debug.ReadBuildInfo(); ok {
		b.GoVersion = info.GoVersion
		if v := info.Main.Version; b.Version == "" && v != "" && v != "(devel)" {
			b.Version = v
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && b.Commit == "" {
				b.Commit = s.Value
			}
		}
	}
	b.Version = cmp.Or(b.Version, "dev")
	b.Commit = cmp.Or(b.Commit, "unknown")
	return b
}

// printVersion is `searchd version`.
func (a *app) printVersion(args []string) error {
	fs := a.flagSet("version")
	if err := parse(fs, args); err != nil {
		return err
	}
	b := buildInfo()
	fmt.Fprintf(a.stdout, "searchd %s (commit %s, %s)\n", b.Version, b.Commit, b.GoVersion)
	return nil
}
