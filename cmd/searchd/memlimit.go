package main

import (
	"log/slog"
	"math"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// envGoMemLimit is the Go runtime's soft memory limit, read by the
// runtime itself.
const envGoMemLimit = "GOMEMLIMIT"

// memoryLimitRatio is the share of the container's memory limit serve
// gives the Go runtime as its soft limit when GOMEMLIMIT is unset: the
// rest is for what the runtime does not count (stacks' slack, the
// binary, the kernel's buffers of the process's sockets).
const memoryLimitRatio = 0.9

// setMemoryLimit sets the Go runtime's soft memory limit, under which the
// collector works harder rather than let the heap grow past it: GOMEMLIMIT
// when it is set (the runtime has read it already); else
// memoryLimitRatio of the memory limit from (the cgroup's, in a
// container; none, outside one, leaves no limit). It logs the limit in
// effect and returns it, math.MaxInt64 for none. A limit from fails only
// to be read: it is logged, and the limit left as it was.
func setMemoryLimit(logger *slog.Logger, from memlimit.Provider) int64 {
	limit, err := memlimit.Set(memlimit.WithRatio(memoryLimitRatio), memlimit.WithProvider(from),
		memlimit.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		logger.Warn("could not read the memory limit; the Go runtime's is left as it was", slog.Any("error", err))
		limit = debug.SetMemoryLimit(-1)
	}
	if limit == math.MaxInt64 {
		logger.Info("no memory limit: set GOMEMLIMIT, or run in a container with one")
	} else {
		logger.Info("memory limit", slog.Int64("bytes", limit))
	}
	return limit
}
