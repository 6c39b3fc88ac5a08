#!/usr/bin/env python3
"""Stall one CPU on purpose, to see what a stall does to bench/http's tail.

    chrt -f 1 taskset -c 0 python3 bench/http/stall.py 150 500 300 &
    chrt -f 1 taskset -c 1 python3 bench/http/stall.py 150 500 300 &

spins for MS milliseconds of every PERIOD milliseconds, for SECONDS
seconds. Run as a real-time task (chrt -f) pinned to a CPU (taskset -c), a
spin preempts every normal task on that CPU: one per CPU stalls the whole
machine, as a burst of other work or a hypervisor can. See
docs/benchmarks.md, "Tail latency". Run it only beside your own benchmark,
under the benchmark lock: it takes MS/PERIOD of the CPUs from everyone.
"""
import sys
import time

ms, period, seconds = (float(a) for a in sys.argv[1:4])
end = time.monotonic() + seconds
while time.monotonic() < end:
    start = time.monotonic()
    while time.monotonic() - start < ms / 1e3:
        pass
    time.sleep(max(0.0, (period - ms) / 1e3))
