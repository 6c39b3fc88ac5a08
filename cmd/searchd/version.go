package main

import (
	"cmp"
	"context"
	"fmt"
	"runtime/debug"

	"github.com/searchd/searchd"
)

// commit is stamped by `make build` and the container image's build
// (-ldflags "-X main.commit=..."); a plain go build leaves it empty and
// buildInfo falls back to the revision the Go toolchain recorded.
var commit string

// build describes the binary: its version, commit and Go version.
type build struct {
	Version, Commit, GoVersion string
}

// buildInfo returns the build of this binary: the version of the VERSION
// file it was built from (one source, whoever builds it: make, go build,
// go install or the image), the stamped commit, else the VCS revision Go
// recorded, else "unknown".
func buildInfo() build {
	b := build{Version: searchd.Version(), Commit: commit, GoVersion: "unknown"}
	if info, ok := debug.ReadBuildInfo(); ok {
		b.GoVersion = info.GoVersion
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && b.Commit == "" {
				b.Commit = s.Value
			}
		}
	}
	b.Commit = cmp.Or(b.Commit, "unknown")
	return b
}

// printVersion is `searchd version`.
func (a *app) printVersion(_ context.Context, args []string) error {
	fs := a.flagSet("version", command{})
	if err := parse(fs, args); err != nil {
		return err
	}
	b := buildInfo()
	fmt.Fprintf(a.stdout, "searchd %s (commit %s, %s)\n", b.Version, b.Commit, b.GoVersion)
	return nil
}
