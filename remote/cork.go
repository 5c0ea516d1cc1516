package remote

import (
	"context"
	"crypto/tls"
	"net"
)

// A WebSocket writes one frame per message, and the library flushes each
// one: a batch of small messages that are ready together would cost a
// segment, and on loopback the receiver's whole wake-up, per message. The
// pump corks the socket around such a batch (TCP_CORK on Linux), so the
// kernel sends the batch as full segments when it is uncorked. A single
// message is never corked: nothing waits to join it.

type netConnKey struct{}

// ConnContext is an http.Server's ConnContext: it keeps each request's
// network connection in its context, where a WebSocket finds the socket to
// cork. A server without it writes every frame on its own, as before.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, netConnKey{}, c)
}

// tcpOf is the TCP connection under a request's context, or nil.
func tcpOf(ctx context.Context) *net.TCPConn {
	c, _ := ctx.Value(netConnKey{}).(net.Conn)
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	tcp, _ := c.(*net.TCPConn)
	return tcp
}
