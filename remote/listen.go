package remote

import (
	"context"
	"fmt"
	"net"
	"strings"
)

// Listen opens the server's listener on addr: host:port on TCP, or
// unix:PATH for a Unix socket. Without TLS a TCP listener binds to a
// loopback address only: a token sent in the clear must not cross a
// network.
func Listen(ctx context.Context, addr string, tls bool) (net.Listener, error) {
	var lc net.ListenConfig
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		l, err := lc.Listen(ctx, "unix", path)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		return l, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %q: want HOST:PORT or unix:PATH: %w", addr, err)
	}
	if !tls && !loopback(host) {
		return nil, fmt.Errorf("--listen %q: without --tls-cert and --tls-key the server listens on a loopback address only (127.0.0.1, ::1, localhost) or a unix: socket; reach it from elsewhere through an SSH port forward, or give it TLS", addr)
	}
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return l, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
