package pgtest

import (
	"net"
	"sync"
	"time"
)

// Proxy stands between a client and a server on loopback, in a test, and
// breaks the way networks do (SetMode): it delays, drops every connection,
// or goes half-open (it keeps the connections and forwards nothing).
type Proxy struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	mode  Mode
	conns map[net.Conn]bool
	moved chan struct{} // closed (and replaced) when mode changes
}

// Mode is what a Proxy does to the bytes it forwards.
type Mode string

const (
	Pass  Mode = "pass"  // forwards
	Delay Mode = "delay" // forwards, 20 ms late a read
	Drop  Mode = "drop"  // closes every connection, and each new one at once
	Stall Mode = "stall" // keeps the connections and forwards nothing: half-open
)

// NewProxy listens on a free port of 127.0.0.1 and forwards to target
// until t ends.
func NewProxy(t TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{l: l, target: target, mode: Pass, conns: map[net.Conn]bool{}, moved: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		l.Close()
		p.SetMode(Drop)
		p.wg.Wait()
	})
	return p
}

// Port is the port the proxy listens on.
func (p *Proxy) Port() int { return p.l.Addr().(*net.TCPAddr).Port }

// SetMode changes the mode. Going to Drop closes every connection;
// leaving Stall closes the stalled ones, whose peer, for all they know,
// is gone.
func (p *Proxy) SetMode(mode Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if mode == Drop || p.mode == Stall {
		for c := range p.conns {
			c.Close()
		}
	}
	p.mode = mode
	close(p.moved)
	p.moved = make(chan struct{})
}

func (p *Proxy) state() (Mode, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.moved
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == Drop {
		c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return // the listener closed: the test is over
		}
		if !p.track(c) {
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve forwards one client connection, both ways, through the faults.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(s) {
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	go func() { p.copy(s, c); done <- struct{}{} }()
	go func() { p.copy(c, s); done <- struct{}{} }()
	<-done
	c.Close()
	s.Close()
	<-done
}

// copy moves bytes from src to dst, holding them while the mode is stall
// and slowing them while it is delay.
func (p *Proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for n > 0 {
			mode, moved := p.state()
			switch mode {
			case Stall:
				<-moved // a connection that stalled is closed when the stall ends
				continue
			case Delay:
				time.Sleep(20 * time.Millisecond) // the fault itself: a slow network, not a wait for anything
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			break
		}
		if err != nil {
			return // EOF or a closed connection: this direction is done
		}
	}
}
