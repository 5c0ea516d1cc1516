package remote

import (
	"net"

	"golang.org/x/sys/unix"
)

// cork holds back (on) or lets go (off) c's partial segments; it reports
// whether the socket took it. Uncorking sends what was held at once.
func cork(c *net.TCPConn, on bool) bool {
	if c == nil {
		return false
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	v := 0
	if on {
		v = 1
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, v) }); err != nil {
		return false
	}
	return serr == nil
}
