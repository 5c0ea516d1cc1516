package state

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/state/pgtest"
	"github.com/jackc/pgx/v5"
)

// faultProxy stands between the fleet's store and PostgreSQL on loopback,
// and breaks the way networks do: it delays, drops every connection, or
// goes half-open (it keeps the connections and forwards nothing).
type faultProxy struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	mode  string // pass, delay, drop or stall
	conns map[net.Conn]bool
	moved chan struct{} // closed (and replaced) when mode changes
}

func startFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{l: l, target: target, mode: "pass", conns: map[net.Conn]bool{}, moved: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		l.Close()
		p.set("drop")
		p.wg.Wait()
	})
	return p
}

func (p *faultProxy) port() int { return p.l.Addr().(*net.TCPAddr).Port }

// set changes the mode. Going to drop closes every connection; leaving
// stall closes the stalled ones, whose peer, for all they know, is gone.
func (p *faultProxy) set(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if mode == "drop" || p.mode == "stall" {
		for c := range p.conns {
			c.Close()
		}
	}
	p.mode = mode
	close(p.moved)
	p.moved = make(chan struct{})
}

func (p *faultProxy) state() (string, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.moved
}

func (p *faultProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == "drop" {
		c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *faultProxy) accept() {
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
func (p *faultProxy) serve(c net.Conn) {
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
func (p *faultProxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for n > 0 {
			mode, moved := p.state()
			switch mode {
			case "stall":
				<-moved // a connection that stalled is closed when the stall ends
				continue
			case "delay":
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

// TestFleetThroughANetworkThatBreaks: between the store and PostgreSQL the
// network delays, drops every connection and goes half-open. Writes go on
// being taken at once, and once the network is back each lands once: no
// turn lost, none counted twice.
func TestFleetThroughANetworkThatBreaks(t *testing.T) {
	ctx := t.Context()
	srv := pgtest.For(t, pgtest.Options{TCP: true})
	proxy := startFaultProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.Port()))
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=1", proxy.port())
	f, err := OpenPostgres(ctx, dsn, Options{Logger: testLogger(t), WriteTimeout: time.Second}, PostgresOptions{LeaseCallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer closeOK(t, f)
	mustPut(t, f, sampleSession("s"))

	n := 0
	write := func(k int) {
		for range k {
			n++
			mustTurn(t, f, "s", sampleTurn(n, TurnCompleted)) // taken at once, whatever the network does
		}
	}
	notYet := func(what string) {
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := f.Flush(short); err == nil {
			t.Errorf("%s: Flush returned nil, but the writes cannot have landed", what)
		}
	}

	write(3)
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.set("delay")
	write(3)
	if err := f.Flush(ctx); err != nil {
		t.Fatalf("through a slow network: %v", err)
	}
	proxy.set("drop")
	write(3)
	notYet("every connection dropped")
	proxy.set("pass")
	if err := f.Flush(ctx); err != nil {
		t.Fatalf("after the drop: %v", err)
	}
	proxy.set("stall")
	write(3)
	notYet("half-open connections")
	// A prompt's lease check does not hang on a half-open connection: past
	// its bound the database counts as out of reach, and the prompt goes on.
	if err := f.Confirm(ctx, "s"); err != nil {
		t.Errorf("Confirm through half-open connections = %v, want nil: go on, not shared", err)
	}
	proxy.set("pass")
	if err := f.Flush(ctx); err != nil {
		t.Fatalf("after the half-open connections: %v", err)
	}

	conn, err := pgx.Connect(ctx, srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var count, distinct, kept int
	if err := conn.QueryRow(ctx, "SELECT count(*), count(DISTINCT idx), (SELECT turns_kept FROM acp_sidecar.sessions WHERE client_id = 's') FROM acp_sidecar.turns WHERE client_id = 's'").
		Scan(&count, &distinct, &kept); err != nil {
		t.Fatal(err)
	}
	if count != n || distinct != n || kept != n {
		t.Errorf("turns in the database = %d (%d distinct), counted %d; want %d of each", count, distinct, kept, n)
	}
	t.Logf("fleet report network: written=%d lost=%d doubled=%d miscounted=%d", n, max(0, n-distinct), count-distinct, kept-n)
}
