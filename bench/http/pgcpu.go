package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux this runs on).
const clockTick = 10 * time.Millisecond

// pgCPU measures the CPU time of a PostgreSQL server running on this
// machine: its postmaster and every process the postmaster started
// (backends, autovacuum, the WAL writer...). It reads /proc, so it works
// for the throwaway cluster and any local server this user can see, and
// reports nothing for a remote one.
type pgCPU struct {
	postmaster int // 0 when unknown
}

// newPGCPU returns the meter of the server that runs backend, the PID of
// one of its backends (pg_backend_pid()).
func newPGCPU(backend int) pgCPU {
	ppid, _, ok := procStat(backend)
	if !ok {
		return pgCPU{}
	}
	comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(ppid), "comm"))
	if err != nil || !bytes.HasPrefix(comm, []byte("postgres")) {
		return pgCPU{}
	}
	return pgCPU{postmaster: ppid}
}

// ok reports whether the server's processes can be measured.
func (m pgCPU) ok() bool { return m.postmaster != 0 }

// used returns the CPU time the server's processes that are alive now have
// used since they started. A process that exits between two calls takes
// its share with it; the pools keep their connections, so over a round
// that is rare and small.
func (m pgCPU) used() time.Duration {
	if m.postmaster == 0 {
		return 0
	}
	_, total, _ := procStat(m.postmaster)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, cpu, ok := procStat(pid); ok && ppid == m.postmaster {
			total += cpu
		}
	}
	return total
}

// procStat returns the parent PID and the CPU time (user and system) of
// process pid.
func procStat(pid int) (ppid int, cpu time.Duration, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	// The command name, field 2, is in parentheses and may hold spaces;
	// the fields after its closing parenthesis start with the state.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	utime, err2 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err3 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, false
	}
	return ppid, time.Duration(utime+stime) * clockTick, true
}
