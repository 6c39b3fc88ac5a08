package api

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestCPUPressureSeesEveryProcessorTaken burns four goroutines a processor
// for up to three seconds: the scheduling-latency histogram must then say
// saturated within that time.
func TestCPUPressureSeesEveryProcessorTaken(t *testing.T) {
	p := newCPUPressure()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := 0; i < 1e5; i++ {
					_ = i * i
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	deadline := time.Now().Add(3 * time.Second)
	for !p.Saturated() {
		if time.Now().After(deadline) {
			t.Fatal("every processor taken for 3 s, and the pressure never said saturated")
		}
		time.Sleep(pressureWindow / 4)
	}
}

// TestMachineBusyReadsTheProcessorCounters feeds machineBusy two readings
// of a /proc/stat: busy (user, nice, system, irq, softirq, steal) against
// idle and iowait since the last reading decides.
func TestMachineBusyReadsTheProcessorCounters(t *testing.T) {
	path := t.TempDir() + "/stat"
	p := newCPUPressure()
	p.procStat = path
	write := func(user, idle, iowait uint64) {
		t.Helper()
		line := fmt.Sprintf("cpu  %d 0 100 %d %d 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n", user, idle, iowait)
		if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(1000, 1000, 0)
	if p.machineBusy(true) {
		t.Error("the first reading judged: it has nothing to compare with")
	}
	write(1950, 1050, 0) // 950 busy of 1000
	if !p.machineBusy(true) {
		t.Error("95% busy since the last reading, not saturated")
	}
	write(2450, 1450, 100) // 500 busy of 1000, iowait counted idle
	if p.machineBusy(true) {
		t.Error("50% busy (the rest idle or waiting on I/O), saturated")
	}
	write(3400, 1500, 100)
	if p.machineBusy(false) {
		t.Error("a reading not to be judged said saturated")
	}
	p.procStat = path + ".missing"
	if p.machineBusy(true) {
		t.Error("without /proc/stat, saturated")
	}
}
