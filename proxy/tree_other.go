//go:build unix && !linux

package proxy

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr keeps the agent in our process group; there is no parent-death
// signal outside Linux.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// descendants lists every process below pid, by parent pid as ps reports it.
func descendants(pid int) []int {
	out, err := exec.Command("ps", "-A", "-o", "pid=,ppid=").Output()
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		p, err1 := strconv.Atoi(f[0])
		pp, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil {
			children[pp] = append(children[pp], p)
		}
	}
	var res []int
	queue := []int{pid}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		for _, c := range children[next] {
			res = append(res, c)
			queue = append(queue, c)
		}
	}
	return res
}

// AdoptOrphans does nothing on a unix other than Linux; orphans go to init
// there.
func AdoptOrphans() error { return nil }
