package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/searchd/searchd/bench/internal/summary"
)

// command returns cmd with the environment plus env, its stderr going to
// ours so progress and failures show.
func command(ctx context.Context, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// goTest runs one benchmark test of pkg with SEARCHD_BENCH=1 and env, and
// returns what it printed. Its output is echoed to stderr as it runs.
func goTest(ctx context.Context, pkg, test string, env []string) (string, error) {
	cmd := command(ctx, append([]string{"SEARCHD_BENCH=1"}, env...),
		"go", "test", "-count=1", "-run", "^"+test+"$", "-v", "-timeout", "40m", pkg)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, os.Stderr)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w", pkg, test, err)
	}
	return out.String(), nil
}

// runHTTP runs the bench/http binary at clients clients. Its text report
// goes to a log file in dir, shown only when it fails.
func runHTTP(ctx context.Context, bin, dir string, clients int, args []string) (summary.Summary, error) {
	jsonPath := filepath.Join(dir, fmt.Sprintf("http-%d.json", clients))
	cmd := exec.CommandContext(ctx, bin, append([]string{"-clients", strconv.Itoa(clients), "-json", jsonPath}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return summary.Summary{}, fmt.Errorf("bench/http at %d clients: %w\n%s", clients, err, out.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		return summary.Summary{}, err
	}
	var res summary.Summary
	if err := json.Unmarshal(b, &res); err != nil {
		return summary.Summary{}, fmt.Errorf("reading bench/http's -json at %d clients: %w", clients, err)
	}
	return res, nil
}

// machine describes where the benchmarks ran.
type machine struct {
	cpus      int
	cpuModel  string
	memory    string
	goVersion string
	kernel    string
}

func readMachine(ctx context.Context) machine {
	m := machine{cpus: runtime.NumCPU(), cpuModel: "unknown", memory: "unknown", goVersion: "unknown", kernel: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpuModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			if len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					m.memory = fmt.Sprintf("%.1f GiB", kb/(1<<20))
				}
			}
		}
	}
	if out, err := exec.CommandContext(ctx, "go", "version").Output(); err == nil {
		m.goVersion = strings.TrimSpace(string(out))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = runtime.GOOS + " " + strings.TrimSpace(string(b)) + " " + runtime.GOARCH
	}
	return m
}
