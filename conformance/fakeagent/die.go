package fakeagent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// diePoint is one -die-on point: die on receiving the Nth message of Method.
type diePoint struct {
	Method string
	N      int
}

// diePoints is the value of the repeatable -die-on flag.
type diePoints []diePoint

func (d *diePoints) String() string {
	if d == nil {
		return ""
	}
	var parts []string
	for _, p := range *d {
		parts = append(parts, p.Method+":"+strconv.Itoa(p.N))
	}
	return strings.Join(parts, ",")
}

// Set parses METHOD[:N][,METHOD[:N]...]; N defaults to 1. Method names
// contain no ':' (session/load, _fake/echo), so the last ':' splits.
func (d *diePoints) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return fmt.Errorf("empty METHOD in %q", v)
		}
		p := diePoint{Method: item, N: 1}
		if i := strings.LastIndexByte(item, ':'); i >= 0 {
			n, err := strconv.Atoi(item[i+1:])
			if err != nil || n < 1 {
				return fmt.Errorf("%q: N must be a whole number >= 1", item)
			}
			p.Method, p.N = item[:i], n
		}
		if p.Method == "" {
			return fmt.Errorf("empty METHOD in %q", item)
		}
		*d = append(*d, p)
	}
	return nil
}

// crasher ends the process abruptly: Main returns the code sent on exit
// at once, and the line writer drops every write from then on, so nothing
// follows a crash even while SDK goroutines live on. It owns the scripted
// crash points (-die-on, -die-mid-load, -die-once); the other crashes
// (-crash-mid-turn, "crash now", -die-after) call die.
type crasher struct {
	w       *lineWriter
	exit    chan int      // abrupt exit codes (crash, die-after, die-on); buffered 1
	stopped chan struct{} // closed when Main returns

	on      diePoints // -die-on
	once    string    // -die-once FILE, or ""
	code    int       // -die-code
	verbose bool      // -v: say why on stderr
	stderr  io.Writer

	received map[string]int // messages received per method, for -die-on; stdin reader only
}

func newCrasher(cfg config, w *lineWriter, stderr io.Writer) *crasher {
	return &crasher{
		w:        w,
		exit:     make(chan int, 1),
		stopped:  make(chan struct{}),
		on:       cfg.DieOn,
		once:     cfg.DieOnce,
		code:     cfg.DieCode,
		verbose:  cfg.Verbose,
		stderr:   stderr,
		received: map[string]int{},
	}
}

// die makes Main return code at once; nothing is written after it.
func (c *crasher) die(code int) {
	c.w.kill()
	select {
	case c.exit <- code:
	default:
	}
}

// arrived counts one received message of method (a request or a
// notification) and reports whether a -die-on point fired on it, in which
// case the agent is already dead and the message must not be handled. Only
// the stdin reader calls it, so the counts need no lock; they start at 0 in
// every process.
func (c *crasher) arrived(method string) bool {
	if len(c.on) == 0 {
		return false
	}
	c.received[method]++
	n := c.received[method]
	for _, p := range c.on {
		if p.Method == method && p.N == n {
			return c.scripted("-die-on " + p.Method + ":" + strconv.Itoa(p.N))
		}
	}
	return false
}

// scripted fires a scripted crash point (-die-on, -die-mid-load) with
// -die-code, unless -die-once names a file that already exists. With
// -die-once the file is created (exclusively, so of several agents sharing
// it exactly one dies) just before dying. It reports whether the agent died.
func (c *crasher) scripted(why string) bool {
	if path := c.once; path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		switch {
		case errors.Is(err, fs.ErrExist):
			return false // died once already, in an earlier life
		case err != nil:
			// Dying anyway makes a broken -die-once visible (the agent
			// keeps dying) instead of silently never crashing.
			fmt.Fprintf(c.stderr, "fakeagent: -die-once: %v\n", err)
		default:
			_, _ = f.WriteString(why + "\n")
			f.Close()
		}
	}
	if c.verbose {
		fmt.Fprintf(c.stderr, "fakeagent: dying (%s)\n", why)
	}
	c.die(c.code)
	return true
}
