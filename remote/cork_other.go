//go:build !linux

package remote

import "net"

// cork is Linux's TCP_CORK; elsewhere each frame goes out on its own.
func cork(*net.TCPConn, bool) bool { return false }
