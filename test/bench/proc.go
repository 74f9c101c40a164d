package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat; it
// is 100 on every Linux architecture Go supports.
const clockTicks = 100

// ProcStats is what /proc says about a process at one moment.
type ProcStats struct {
	// CPUSeconds is utime + stime.
	CPUSeconds float64 `json:"cpuSeconds"`
	// RSSBytes is VmRSS, the resident set now.
	RSSBytes int64 `json:"rssBytes"`
	// PeakRSSBytes is VmHWM, the largest resident set so far.
	PeakRSSBytes int64 `json:"peakRssBytes"`
	// RSSAnonBytes and RSSFileBytes split RSSBytes into anonymous memory
	// (the Go heap, stacks, runtime) and pages of mapped files (mostly the
	// binary's code and read-only data).
	RSSAnonBytes int64 `json:"rssAnonBytes"`
	RSSFileBytes int64 `json:"rssFileBytes"`
}

// readProc reads a process's CPU time and memory from /proc.
func readProc(pid int) (ProcStats, error) {
	var s ProcStats
	cpu, err := procCPU(pid)
	if err != nil {
		return s, err
	}
	s.CPUSeconds = cpu
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch key {
		case "VmRSS":
			s.RSSBytes = parseKB(value)
		case "VmHWM":
			s.PeakRSSBytes = parseKB(value)
		case "RssAnon":
			s.RSSAnonBytes = parseKB(value)
		case "RssFile":
			s.RSSFileBytes = parseKB(value)
		}
	}
	return s, nil
}

func parseKB(v string) int64 {
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n * 1024
}

// procStat returns the fields of /proc/PID/stat after the command name:
// field 3 (state) is index 0.
func procStat(pid int) (comm string, fields []string, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", nil, err
	}
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return "", nil, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return string(data[open+1 : end]), strings.Fields(string(data[end+1:])), nil
}

// procCPU returns utime + stime of a process in seconds.
func procCPU(pid int) (float64, error) {
	_, f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicks, nil
}

// controlPlaneProcesses finds the etcd, kube-apiserver and
// kube-controller-manager this process started.
func controlPlaneProcesses() map[string]int {
	out := map[string]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	self := strconv.Itoa(os.Getpid())
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		comm, f, err := procStat(pid)
		if err != nil || len(f) < 2 || f[1] != self {
			continue
		}
		switch {
		case comm == "etcd", comm == "kube-apiserver", strings.HasPrefix(comm, "kube-controller"):
			if strings.HasPrefix(comm, "kube-controller") {
				comm = "kube-controller-manager"
			}
			out[comm] = pid
		}
	}
	return out
}

// cpuOf returns the CPU seconds of each named process, and of this one as
// "bench".
func cpuOf(procs map[string]int) map[string]float64 {
	out := map[string]float64{}
	for name, pid := range procs {
		if c, err := procCPU(pid); err == nil {
			out[name] = c
		}
	}
	if c, err := procCPU(os.Getpid()); err == nil {
		out["bench"] = c
	}
	return out
}

func diffCPU(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		out[k] = round3(v - before[k])
	}
	return out
}

// Machine describes where the benchmark ran.
type Machine struct {
	CPUs       int     `json:"cpus"`
	CPUModel   string  `json:"cpuModel"`
	MemTotal   string  `json:"memTotal"`
	LoadAvg    string  `json:"loadAvgAtStart"`
	GoVersion  string  `json:"goVersion"`
	Kernel     string  `json:"kernel"`
	StartedAt  string  `json:"startedAt"`
	BogoMIPS   float64 `json:"bogoMIPS,omitempty"`
	GOMAXPROCS int     `json:"gomaxprocs"`
}

func machineInfo() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), StartedAt: time.Now().UTC().Format(time.RFC3339), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "model name":
				if m.CPUModel == "" {
					m.CPUModel = strings.TrimSpace(v)
				}
			case "bogomips":
				if m.BogoMIPS == 0 {
					m.BogoMIPS, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
				}
			}
		}
		f.Close()
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && k == "MemTotal" {
				m.MemTotal = fmt.Sprintf("%.1f GiB", float64(parseKB(v))/(1<<30))
			}
		}
	}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(data))[:3], " ")
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	return m
}

// Source says which code was measured.
type Source struct {
	Commit   string   `json:"commit"`
	Modified []string `json:"modified,omitempty"`
}

func sourceInfo(root string) Source {
	var s Source
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		s.Commit = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "-C", root, "status", "--porcelain", "--", "pkg", "cmd", "internal").Output(); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				s.Modified = append(s.Modified, l)
			}
		}
	}
	return s
}

// machineBusy returns the CPU seconds all CPUs of the machine spent busy
// (neither idle nor waiting for I/O) since boot, from /proc/stat.
func machineBusy() float64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0
	}
	busy := 0.0
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest time is already in user time
			break
		}
		x, _ := strconv.ParseFloat(v, 64)
		busy += x
	}
	return busy / clockTicks
}

// quietThreshold is the CPU share of other processes below which the
// machine counts as quiet.
const quietThreshold = 0.25

// waitQuiet waits, up to o.quietWait, until processes other than the
// benchmark's use less than quietThreshold CPUs over 2 seconds, and returns
// the CPUs they used in the last window.
func (b *bench) waitQuiet(ctx context.Context) float64 {
	const window = 2 * time.Second
	deadline := time.Now().Add(b.o.quietWait)
	logged := false
	for {
		procs := maps.Clone(b.cpProcs)
		for i, p := range b.procs() {
			procs[fmt.Sprintf("metactl-%d", i)] = p.PID
		}
		sum := func() float64 {
			t := 0.0
			for _, v := range cpuOf(procs) {
				t += v
			}
			return t
		}
		ours0, busy0 := sum(), machineBusy()
		sleep(ctx, window)
		if ctx.Err() != nil {
			return 0
		}
		share := max(0, (machineBusy()-busy0)-(sum()-ours0)) / window.Seconds()
		switch {
		case b.o.quietWait <= 0 || share < quietThreshold:
			if logged {
				logf("the machine is quiet (others use %.2f CPUs)", share)
			}
			return round3(share)
		case time.Now().After(deadline):
			logf("the machine is still busy (others use %.2f CPUs); measuring anyway", share)
			return round3(share)
		case !logged:
			logf("waiting up to %v for the machine to be quiet: others use %.2f CPUs", b.o.quietWait, share)
			logged = true
		}
	}
}

// resetPeakRSS resets the peak resident set size (VmHWM) of process pid to
// its current resident set size.
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}
