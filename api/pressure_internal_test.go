package api

import (
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
