//go:build linux

package remote

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// faultProxy is a TCP proxy on loopback between a client and a server,
// which a test tells to drop every connection (a reset, as a network
// failure does), to refuse new ones for a while, or to send new ones to
// another server. It counts the connections it carried.
type faultProxy struct {
	l net.Listener

	mu       sync.Mutex
	upstream string
	refusing bool
	conns    map[net.Conn]bool
	// holes: connections whose bytes the proxy swallows, as a network
	// path that went dark without a reset does (a half-open connection).
	holes map[net.Conn]bool
	// lag is added before each write the proxy passes on.
	lag      time.Duration
	accepted int
	changed  chan struct{} // closed and replaced at each accept
	wg       sync.WaitGroup
}

func startFaultProxy(t *testing.T, upstream string) *faultProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{l: l, upstream: upstream, conns: map[net.Conn]bool{}, holes: map[net.Conn]bool{}, changed: make(chan struct{})}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) addr() string { return p.l.Addr().String() }

func (p *faultProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refusing, upstream := p.refusing, p.upstream
		p.accepted++
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
		if refusing {
			reset(c)
			continue
		}
		u, err := net.Dial("tcp", upstream)
		if err != nil {
			reset(c)
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[u] = true, true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, u)
		go p.pipe(u, c)
	}
}

// pipe copies one way until either side fails, then drops both. Once src
// is a hole, what it reads goes nowhere.
func (p *faultProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if d := p.delay(); n > 0 && d > 0 {
			time.Sleep(d) // the fault itself: a slow path, not a wait for an event
		}
		if n > 0 && !p.hole(src) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break // either side's end is the connection's end
		}
	}
	p.drop(dst)
	p.drop(src)
}

func (p *faultProxy) delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lag
}

// slow adds d before every write the proxy passes on (0: none).
func (p *faultProxy) slow(d time.Duration) {
	p.mu.Lock()
	p.lag = d
	p.mu.Unlock()
}

func (p *faultProxy) hole(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holes[c]
}

// darken makes every connection the proxy carries now a hole both ways:
// open, silent, never reset. New connections go through.
func (p *faultProxy) darken() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		p.holes[c] = true
	}
}

func (p *faultProxy) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.holes, c)
	p.mu.Unlock()
	reset(c)
}

// reset closes c with a TCP reset, as a dropped network path ends a
// connection for the side that still writes.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // without it the close is an orderly FIN: still a drop
	}
	_ = c.Close() // closing twice (pipe's two halves) only errs
}

// waitAccepted waits until the proxy has taken n connections in all.
func (p *faultProxy) waitAccepted(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	for {
		p.mu.Lock()
		got, ch := p.accepted, p.changed
		p.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("the proxy took %d connections, not %d: %v", got, n, ctx.Err())
		}
	}
}

// taken is how many connections the proxy has taken.
func (p *faultProxy) taken() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// cut drops every connection the proxy carries now.
func (p *faultProxy) cut() {
	p.mu.Lock()
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		reset(c)
	}
}

// refuse makes new connections fail (true) or go through (false).
func (p *faultProxy) refuse(on bool) {
	p.mu.Lock()
	p.refusing = on
	p.mu.Unlock()
}

// point sends new connections to another server.
func (p *faultProxy) point(upstream string) {
	p.mu.Lock()
	p.upstream = upstream
	p.mu.Unlock()
}

func (p *faultProxy) close() {
	err := p.l.Close()
	p.cut()
	p.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		panic(err)
	}
}
