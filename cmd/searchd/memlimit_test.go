package main

import (
	"log/slog"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestSetMemoryLimit: with GOMEMLIMIT unset, serve's soft limit is 90 %
// of the container's; with it set, GOMEMLIMIT's stands. (The runtime
// limit is the process's: the test puts it back, and runs alone.)
func TestSetMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const container = 512 << 20

	ratio := memoryLimitRatio
	want := int64(float64(container) * ratio)
	t.Setenv("GOMEMLIMIT", "")
	if got := setMemoryLimit(slog.New(slog.DiscardHandler), memlimit.Limit(container)); got != want || debug.SetMemoryLimit(-1) != want {
		t.Errorf("in a container of 512 MiB: limit %d (runtime %d), want %d", got, debug.SetMemoryLimit(-1), want)
	}

	debug.SetMemoryLimit(300 << 20) // as the runtime does from GOMEMLIMIT at start
	t.Setenv("GOMEMLIMIT", "300MiB")
	if got := setMemoryLimit(slog.New(slog.DiscardHandler), memlimit.Limit(container)); got != 300<<20 || debug.SetMemoryLimit(-1) != 300<<20 {
		t.Errorf("with GOMEMLIMIT=300MiB: limit %d (runtime %d), want GOMEMLIMIT's", got, debug.SetMemoryLimit(-1))
	}
}
