package proxy

import (
	"syscall"
	"unsafe"
)

// fdUnread asks the kernel how many bytes a pipe holds (FIONREAD, which a
// pipe answers on either end).
func fdUnread(fd uintptr) int64 {
	var n int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); errno != 0 {
		return 0
	}
	return int64(n)
}
