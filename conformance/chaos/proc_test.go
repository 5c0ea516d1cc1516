//go:build linux

package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procInfo is what /proc/PID/stat says of a process: enough to tell it
// apart from a later process with the same pid.
type procInfo struct {
	pid, ppid int
	state     byte   // R, S, Z, …
	start     uint64 // start time in clock ticks since boot
}

// readStat parses /proc/PID/stat. The command name may hold spaces and
// parentheses, so the fields are read after the last ')'.
func readStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procInfo{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] state, f[1] ppid, … f[19] starttime (field 22 of stat).
	if len(f) < 20 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return procInfo{pid: pid, ppid: ppid, state: f[0][0], start: start}, true
}

// threadStates are the states of pid's threads, from /proc/PID/task.
func threadStates(pid int) string {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return ""
	}
	var states []byte
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue // the thread ended meanwhile
		}
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
			states = append(states, b[i+2])
		}
	}
	return string(states)
}

// waitStopped waits until every thread of pid is stopped (T). A SIGSTOP
// stops a process's threads one at a time, each as it next enters the
// kernel, and kill(2) returns before they all have.
func waitStopped(pid int, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	for {
		st := threadStates(pid)
		if st != "" && strings.Trim(st, "T") == "" {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// children lists the live (not zombie) children of pid.
func children(pid int) []procInfo {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procInfo
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pi, ok := readStat(n); ok && pi.ppid == pid && pi.state != 'Z' {
			out = append(out, pi)
		}
	}
	return out
}

// descendants lists the live processes under pid: its children, theirs,
// and so on.
func descendants(pid int) []procInfo {
	var out []procInfo
	for _, c := range children(pid) {
		out = append(out, c)
		out = append(out, descendants(c.pid)...)
	}
	return out
}

// dumpGoroutines makes the process pid (a sidecar) and every process under
// it (its agent) print their goroutines on their stderr and exit: SIGQUIT,
// with GOTRACEBACK=all in their environment. The sidecar is stopped first,
// so that it does not react to its agent's exit before its own dump, and
// goes last. It waits up to 10 s for each to be gone; the caller then reads
// the stderr it captured, once the copy of it has ended.
func dumpGoroutines(pid int) {
	top, ok := readStat(pid)
	if !ok {
		return
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	below := descendants(pid)
	for _, p := range below {
		syscall.Kill(p.pid, syscall.SIGQUIT)
	}
	for _, p := range below {
		waitGone(p, 10*time.Second)
	}
	syscall.Kill(pid, syscall.SIGQUIT)
	syscall.Kill(pid, syscall.SIGCONT)
	waitGone(top, 10*time.Second)
}

// agentOf waits up to d for the sidecar pid to have a live child (its
// agent) and returns it.
func agentOf(sidecar int, d time.Duration) (procInfo, bool) {
	deadline := time.Now().Add(d)
	for {
		if c := children(sidecar); len(c) > 0 {
			return c[len(c)-1], true
		}
		if time.Now().After(deadline) {
			return procInfo{}, false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// alive reports whether the process p still runs: the same pid with the
// same start time, and not a zombie.
func alive(p procInfo) bool {
	now, ok := readStat(p.pid)
	return ok && now.start == p.start && now.state != 'Z'
}

// waitGone waits up to d for p to be gone (or a zombie).
func waitGone(p procInfo, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for alive(p) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// sigkill SIGKILLs p alone, if it is still the process we saw.
func sigkill(p procInfo) error {
	if !alive(p) {
		return fmt.Errorf("process %d already gone", p.pid)
	}
	return syscall.Kill(p.pid, syscall.SIGKILL)
}

// holdsFile reports whether pid has path open, by its /proc/PID/fd links.
func holdsFile(pid int, path string) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == path {
			return true
		}
	}
	return false
}

// vmRSS is /proc/PID/status VmRSS in bytes.
func vmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for %d", pid)
}
