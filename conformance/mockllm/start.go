package mockllm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Start serves a new Server on 127.0.0.1 at a free port and returns it with
// its base URL (http://127.0.0.1:PORT, no trailing slash), the value for
// ANTHROPIC_BASE_URL. The server stops when ctx is done or Close is called,
// whichever comes first.
func Start(ctx context.Context, opts Options) (*Server, string, error) {
	return listenAndServe(ctx, "127.0.0.1:0", opts)
}

// listenAndServe listens on addr, which must be a loopback address, and
// serves a new Server there on a goroutine that Close waits for.
func listenAndServe(ctx context.Context, addr string, opts Options) (*Server, string, error) {
	if err := checkLoopback(addr); err != nil {
		return nil, "", err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("mockllm: listen on %s: %w", addr, err)
	}
	s := New(opts)
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}

	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	var once sync.Once
	var closeErr error
	s.closeFn = func() error {
		once.Do(func() {
			s.mu.Lock()
			stop := s.stopWatch
			s.mu.Unlock()
			if stop != nil {
				stop()
			}
			// Close, not Shutdown: an agent may hold a stream open, and the
			// test that owns the mock is done with it.
			err := hs.Close()
			if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
				err = errors.Join(err, serr)
			}
			// hs.Close does not wait for handlers; their connections are
			// closed, so they return as soon as they next write.
			s.drain()
			if err != nil {
				closeErr = fmt.Errorf("mockllm: close %s: %w", ln.Addr(), err)
			}
		})
		return closeErr
	}
	// Registered after closeFn is set, because it may fire at once.
	stop := context.AfterFunc(ctx, func() { _ = s.Close() })
	s.mu.Lock()
	s.stopWatch = stop
	s.mu.Unlock()
	return s, "http://" + ln.Addr().String(), nil
}

// Close stops a server made by Start and waits until it has stopped serving.
// It is safe to call more than once and from several goroutines. On a Server
// made by New, which does not listen, it does nothing.
func (s *Server) Close() error {
	if s.closeFn == nil {
		return nil
	}
	return s.closeFn()
}

// checkLoopback refuses addresses that would expose the mock beyond this
// machine: the tests promise to reach nothing but loopback.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("mockllm: address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("mockllm: address %q is not loopback", addr)
	}
	return nil
}
