package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/searchd/searchd/internal/seatq"
)

// What else happened during a round, for the rounds with slow requests:
// each hypothesis of issue 35 about the bimodal replays, measured rather
// than guessed. A sample is taken as a round begins and as it ends; the
// round keeps their difference (stalls).
//
//   - the machine: CPU pressure (Linux PSI, /proc/pressure/cpu: the time
//     some runnable task waited for a CPU) and the CPU the machine's other
//     processes used (all of /proc/stat's busy time, less this process's
//     and the PostgreSQL server's);
//   - this process's Go runtime (runtime/metrics): goroutines that waited
//     10 ms or more to run once runnable, GC cycles and their longest
//     stop-the-world pause;
//   - the server's pool (pgxpool.Stat): acquires that found no idle
//     connection and waited, and the time all acquires took;
//   - the real server's seat queue (a seatq.Observer): requests that
//     waited for a seat or were refused one, and the longest wait;
//   - PostgreSQL (pg_stat_bgwriter, pg_stat_all_tables): checkpoints and
//     autovacuum or autoanalyze runs that ended.

// sample is the counters a round's stalls are the difference of.
type sample struct {
	at              time.Time
	cpuBusy, cpuAll uint64        // jiffies of every CPU, from /proc/stat
	psi             time.Duration // PSI cpu "some" total
	psiOK           bool
	goSched         []uint64 // runtime/metrics buckets of /sched/latencies:seconds
	gcPauses        []uint64 // ... of /sched/pauses/total/gc:seconds
	gcCycles        uint64
	pool            *pgxpool.Stat
	queueWaits      int64
	checkpoints     int64
	autovacuums     int64
}

// stalls is what happened during a round besides its requests.
type stalls struct {
	psi          time.Duration // CPU pressure: time some task waited for a CPU
	psiOK        bool
	sampled      time.Duration // from the first sample to the second
	others       float64       // CPUs the machine's other processes used
	schedWaits   uint64        // goroutines that waited ≥ 10 ms to run
	schedMax     float64       // seconds, the upper bound of the slowest bucket hit
	gcCycles     uint64
	gcPauseMax   float64 // seconds, the upper bound of the longest pause's bucket
	poolWaits    int64   // acquires that waited for a connection
	poolAcquire  time.Duration
	queueWaits   int64 // requests that waited for a seat (real only)
	queueWaitMax time.Duration
	checkpoints  int64
	autovacuums  int64
}

// String is the round's stalls in one line.
func (s stalls) String() string {
	psi := "n/a"
	if s.psiOK {
		psi = msShort(s.psi)
	}
	return fmt.Sprintf("CPU pressure %s, other processes %.2f CPUs; Go: %d waits ≥10ms to run (longest ≤%s), "+
		"%d GCs (longest pause ≤%s); pool: %d acquires waited (all acquires %s); queue: %d waited or refused (longest wait %s); "+
		"PG: %d checkpoints, %d autovacuum/analyze runs",
		psi, s.others, s.schedWaits, msShort(time.Duration(s.schedMax*1e9)), s.gcCycles,
		msShort(time.Duration(s.gcPauseMax*1e9)), s.poolWaits, msShort(s.poolAcquire), s.queueWaits,
		msShort(s.queueWaitMax), s.checkpoints, s.autovacuums)
}

// pressure returns " cpu-wait N%": the share of the round in which some
// runnable task of the machine waited for a CPU (PSI), or "" when the
// kernel does not tell. Near 0% the round had the CPUs it wanted; near
// 100% something always waited, and latencies are the machine's. (PSI
// updates its total every few milliseconds, so a short round may read a
// little over 100%.)
func (s stalls) pressure() string {
	if !s.psiOK || s.sampled <= 0 {
		return ""
	}
	return fmt.Sprintf(" cpu-wait %.0f%%", 100*float64(s.psi)/float64(s.sampled))
}

// queueWatch is the seat queue's Observer: it counts the requests
// that waited for a seat.
type queueWatch struct {
	waits   atomic.Int64
	mu      sync.Mutex
	longest time.Duration
}

func (q *queueWatch) ObserveSeat(_ seatq.Kind, outcome seatq.Outcome, waited time.Duration) {
	if waited > 0 || outcome != seatq.Seated {
		q.waits.Add(1)
		q.mu.Lock()
		q.longest = max(q.longest, waited)
		q.mu.Unlock()
	}
}

// takeLongest returns the longest wait since the last call, and forgets it.
func (q *queueWatch) takeLongest() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.longest
	q.longest = 0
	return l
}

var goMetrics = []metrics.Sample{
	{Name: "/sched/latencies:seconds"},
	{Name: "/sched/pauses/total/gc:seconds"},
	{Name: "/gc/cycles/total:gc-cycles"},
}

// takeSample reads every counter. The PostgreSQL ones are read through
// admin, outside the measured pools; an error leaves them zero.
func (e *env) takeSample(ctx context.Context, t *target) sample {
	s := sample{at: time.Now()}
	s.cpuBusy, s.cpuAll = procStatCPU()
	s.psi, s.psiOK = cpuPressure()
	metrics.Read(goMetrics)
	s.goSched = slices.Clone(goMetrics[0].Value.Float64Histogram().Counts)
	s.gcPauses = slices.Clone(goMetrics[1].Value.Float64Histogram().Counts)
	s.gcCycles = goMetrics[2].Value.Uint64()
	s.pool = t.pool.Stat()
	if e.queue != nil && t == e.real {
		s.queueWaits = e.queue.waits.Load()
	}
	_ = e.admin.QueryRow(ctx, `SELECT (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter),
		(SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0) FROM pg_stat_all_tables)`).
		Scan(&s.checkpoints, &s.autovacuums)
	return s
}

// stallsBetween returns what happened from a to b, over elapsed, with
// ownCPU and pgCPU the CPU time this process and the server used.
func (e *env) stallsBetween(a, b sample, t *target, elapsed, ownCPU, pgCPU time.Duration) stalls {
	s := stalls{psi: b.psi - a.psi, psiOK: a.psiOK && b.psiOK, sampled: b.at.Sub(a.at), gcCycles: b.gcCycles - a.gcCycles,
		poolWaits:   b.pool.EmptyAcquireCount() - a.pool.EmptyAcquireCount(),
		poolAcquire: b.pool.AcquireDuration() - a.pool.AcquireDuration(),
		queueWaits:  b.queueWaits - a.queueWaits, checkpoints: b.checkpoints - a.checkpoints,
		autovacuums: b.autovacuums - a.autovacuums}
	if e.queue != nil && t == e.real {
		s.queueWaitMax = e.queue.takeLongest()
	}
	if all := b.cpuAll - a.cpuAll; all > 0 {
		busy := time.Duration(float64(b.cpuBusy-a.cpuBusy) / float64(all) * float64(elapsed) * float64(runtime.NumCPU()))
		s.others = max(0, float64(busy-ownCPU-pgCPU)/float64(elapsed))
	}
	goMetricsBounds := func(i int) []float64 {
		metrics.Read(goMetrics[i : i+1])
		return goMetrics[i].Value.Float64Histogram().Buckets
	}
	schedBounds, pauseBounds := goMetricsBounds(0), goMetricsBounds(1)
	for i := range b.goSched {
		n := b.goSched[i] - a.goSched[i]
		if n > 0 && schedBounds[i] >= 0.010 {
			s.schedWaits += n
		}
		if n > 0 {
			s.schedMax = upper(schedBounds, i)
		}
	}
	for i := range b.gcPauses {
		if b.gcPauses[i] > a.gcPauses[i] {
			s.gcPauseMax = upper(pauseBounds, i)
		}
	}
	return s
}

// procStatCPU returns the busy and all jiffies of every CPU, from the
// first line of /proc/stat.
func procStatCPU() (busy, all uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		if i == 8 || i == 9 { // guest time, already in user and nice
			break
		}
		all += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, all
}

// cpuPressure returns the total of PSI's cpu "some" line: how long, since
// boot, some runnable task waited for a CPU.
func cpuPressure() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0, false
	}
	for field := range strings.FieldsSeq(strings.SplitN(string(b), "\n", 2)[0]) {
		if v, ok := strings.CutPrefix(field, "total="); ok {
			us, err := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond, err == nil
		}
	}
	return 0, false
}

// upper returns the upper bound of bucket i, or its lower bound when the
// bucket is open above.
func upper(bounds []float64, i int) float64 {
	if math.IsInf(bounds[i+1], 1) {
		return bounds[i]
	}
	return bounds[i+1]
}
