package proxy

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// GrowPipe asks the kernel to give the pipe f is an end of AgentPipeSize
// bytes (F_SETPIPE_SZ). A refusal (a lower pipe-max-size, a user past
// pipe-user-pages-soft) leaves the pipe as it was and is returned: the
// size is speed, not function.
func GrowPipe(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("grow pipe: %w", err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		_, serr = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, AgentPipeSize)
	}); err != nil {
		return fmt.Errorf("grow pipe: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("grow pipe to %d bytes: %w", AgentPipeSize, serr)
	}
	return nil
}
