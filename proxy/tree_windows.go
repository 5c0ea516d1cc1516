package proxy

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Windows can neither signal a process group nor send a process any signal
// but kill, so the agent's tree is a job object (processTree). A process the agent starts
// joins its job, and stays in it when the agent dies, so terminating the job
// reaches the agent, its children and their orphans alike.

// sysProcAttr asks nothing of CreateProcess: the job object, which kills
// its processes when the sidecar dies, stands in for Linux's parent-death
// signal.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// AdoptOrphans does nothing on Windows: an orphan of the agent is still in
// the agent's job object, which a shutdown terminates.
func AdoptOrphans() error { return nil }

// killedExitCode is the exit status of a process the job's termination
// ended: 1, as os.Process.Kill gives on Windows.
const killedExitCode = 1

// processTree is the job object the agent runs in. It is made with
// JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, so when its one handle closes (at
// release, or with the sidecar, however the sidecar dies) every process
// still in it is killed.
type processTree struct {
	mu  sync.Mutex
	job windows.Handle // 0 before hold, after release, or when hold failed
}

// hold puts the agent, just started, in a new job object. os/exec gives no
// way to resume a process started suspended, so the agent runs for the
// moment before it is assigned, and a process it starts then is outside the
// job.
func (t *processTree) hold(pid int) error {
	job, err := KillOnCloseJob(pid, "agent")
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.job = job
	t.mu.Unlock()
	return nil
}

// KillOnCloseJob puts process pid (who names it in errors) in a new job
// object made with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, and returns the
// job's one handle: what the process starts joins the job, terminating the
// job ends them all, and so does closing the handle, however its owner
// dies. A process pid starts before the call is outside the job: os/exec
// gives no way to resume a process started suspended.
func KillOnCloseJob(pid int, who string) (windows.Handle, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, fmt.Errorf("create job object: %w", err)
	}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return 0, fmt.Errorf("set kill-on-close on job object: %w", err)
	}
	proc, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		windows.CloseHandle(job)
		return 0, fmt.Errorf("open %s process %d: %w", who, pid, err)
	}
	defer windows.CloseHandle(proc)
	if err := windows.AssignProcessToJobObject(job, proc); err != nil {
		windows.CloseHandle(job)
		return 0, fmt.Errorf("assign %s process %d to job object: %w", who, pid, err)
	}
	return job, nil
}

// release closes the job's handle, which kills whatever is still in it.
func (t *processTree) release() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.job == 0 {
		return nil
	}
	err := windows.CloseHandle(t.job)
	t.job = 0
	if err != nil {
		return fmt.Errorf("close agent's job object: %w", err)
	}
	return nil
}

// kill terminates every process in the job, or the agent alone when it is
// in none. Both only start each process's end; active says when it is done.
func (t *processTree) kill(agent *os.Process) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.job == 0 {
		agent.Kill() // an agent that has exited is the only error, and then it is dead
		return
	}
	windows.TerminateJobObject(t.job, killedExitCode) // fails only for a handle that is not a job, which ours is
}

// jobAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, which
// x/sys/windows does not define.
type jobAccounting struct {
	TotalUserTime, TotalKernelTime                                                 int64
	ThisPeriodTotalUserTime, ThisPeriodTotalKernelTime                             int64
	TotalPageFaultCount, TotalProcesses, ActiveProcesses, TotalTerminatedProcesses uint32
}

// active is how many processes the job still holds: 0 without a job, or
// when the job cannot say.
func (t *processTree) active() uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.job == 0 {
		return 0
	}
	var info jobAccounting
	if err := windows.QueryInformationJobObject(t.job, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), nil); err != nil {
		return 0
	}
	return info.ActiveProcesses
}

// stopSteps is what a shutdown does to the tree after each grace period
// while the agent runs. There is no SIGTERM on Windows: the agent's stdin
// closing is the polite step, and one grace period later the job is
// terminated, whether or not we received a signal.
func stopSteps(os.Signal) []os.Signal { return []os.Signal{os.Kill} }

// signalTree terminates the agent's job for os.Kill (syscall.SIGKILL). Any
// other signal is not sent: Windows delivers none, and the Ctrl+C or close
// event that a signal we received stands for has already reached an agent
// that shares our console.
func (p *Process) signalTree(sig os.Signal) {
	if sig != os.Kill {
		return
	}
	p.tree.kill(p.cmd.Process)
}

// reapOrphans waits, within reapBound, until the job holds no process, so
// "the sidecar has exited" means its whole tree is gone: a terminated
// process can take a moment to end. There is nothing to reap on Windows;
// the job counts its own, whether or not AgentSpec.Orphans is set.
func (p *Process) reapOrphans(ctx context.Context) {
	deadline := time.Now().Add(reapBound)
	for p.tree.active() > 0 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}
