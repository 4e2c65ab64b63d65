package framework

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes the machine a run had, so that the walls of two runs can be compared: the cluster tests
// are CPU-bound on two cores, and machines of the same kind differ in speed.
type Machine struct {
	CPUs int `json:"cpus"`
	// SHA256MiBps is one core's speed: how many MiB of zeros crypto/sha256 hashed per second, measured once
	// before the cluster starts.
	SHA256MiBps float64 `json:"sha256MiBps"`
	// BusySec and IdleSec are the whole host's CPU time (every core) from Linux's /proc/stat, since the
	// measurement began: busy is everything but idle and iowait.
	BusySec float64 `json:"busySec"`
	IdleSec float64 `json:"idleSec"`
}

// CPUClock reads /proc/stat's cumulative CPU times.
type CPUClock struct {
	Path string // /proc/stat unless set
}

// CPUTimes are cumulative CPU seconds of every core.
type CPUTimes struct{ Busy, Idle float64 }

// Read returns the cumulative busy and idle seconds of every core (the first "cpu" line: user, nice, system,
// idle, iowait, irq, softirq, steal; idle and iowait count as idle).
func (c CPUClock) Read() (CPUTimes, error) {
	path := c.Path
	if path == "" {
		path = "/proc/stat"
	}
	f, err := os.Open(path)
	if err != nil {
		return CPUTimes{}, fmt.Errorf("reading the CPU times: %w", err)
	}
	defer func() { _ = f.Close() }()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return CPUTimes{}, fmt.Errorf("reading %s: %w", path, err)
	}
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return CPUTimes{}, fmt.Errorf("%s: the first line is not the cpu total: %q", path, strings.TrimSpace(line))
	}
	var t CPUTimes
	for i, s := range fields[1:9] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("%s: field %d of the cpu line is %q: %w", path, i+1, s, err)
		}
		if i == 3 || i == 4 { // idle, iowait
			t.Idle += v
		} else {
			t.Busy += v
		}
	}
	// /proc/stat counts in USER_HZ, 100 on every Linux that Go supports
	t.Busy /= 100
	t.Idle /= 100
	return t, nil
}

// MeasureCoreSpeed hashes zeros with crypto/sha256 for about d on one goroutine and returns MiB per second.
func MeasureCoreSpeed(d time.Duration) float64 {
	buf := make([]byte, 1<<20)
	h := sha256.New()
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		_, _ = h.Write(buf)
		n++
	}
	_ = h.Sum(nil)
	return float64(n) / time.Since(start).Seconds()
}

// NewMachine measures the core speed and returns the machine with its CPU count; BusySec and IdleSec are
// for the caller to fill from two CPUClock readings.
func NewMachine() Machine {
	return Machine{CPUs: runtime.NumCPU(), SHA256MiBps: MeasureCoreSpeed(500 * time.Millisecond)}
}
