package bench

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// The several-agents workload (issue 14): the sidecar runs two named
// agents, a the default and b, and the generator streams through a's
// relay and the switchboard that puts both behind one client. The
// byte-copy baseline runs the same generator alone. Both relays' output is
// compared, byte for byte, with the stream the generator wrote, so a frame
// lost, reordered or cut by another writer fails the run.

// Names of the several-agents workload's agents.
const (
	severalDefault = "a"
	severalOther   = "b"
)

// severalArgv is the command line of a sidecar with two named agents that
// both run agent; a is the default, so the client's frames go to it.
func (r *runner) severalArgv(agent []string) []string {
	state := r.state
	if state == "" {
		state = filepath.Join(r.dir, "state")
	}
	argv := []string{r.exe, "--state-dir", state, "--log-file", filepath.Join(r.dir, "sidecar.log")}
	argv = append(argv, r.extra...)
	cmd := shellWords(agent)
	return append(argv, "--agent", severalDefault+"="+cmd, "--agent", severalOther+"="+cmd, "--default-agent", severalDefault)
}

// shellWords quotes argv for --agent NAME=COMMAND, which the sidecar splits
// as a POSIX shell would.
func shellWords(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// several relays n frames of size bytes from a generator agent to the
// driver: through the sidecar with two agents (k is sidecarRelay) or through
// the byte copy, and checks every byte against what the generator wrote.
func (r *runner) several(ctx context.Context, k relayKind, kind string, n, size int) (tputResult, error) {
	agent := genArgv(r.exe, kind, n, size)
	var p *relayProc
	var err error
	if k == sidecarRelay {
		p, err = r.startArgv(ctx, k, r.severalArgv(agent))
	} else {
		p, err = r.start(ctx, k, agent)
	}
	if err != nil {
		return tputResult{}, err
	}
	block, err := genBlock(kind, n, size)
	if err != nil {
		return tputResult{}, p.fail(err)
	}
	v := &streamCheck{block: block}
	return relayStream(p, n, size, v.check)
}

// streamCheck compares a stream with the generator's: its block over and
// over, the last time cut short (gen).
type streamCheck struct {
	block []byte
	pos   int64 // bytes checked so far
}

// check compares the next bytes of the stream.
func (c *streamCheck) check(p []byte) error {
	for len(p) > 0 {
		off := int(c.pos % int64(len(c.block)))
		m := min(len(p), len(c.block)-off)
		if !bytes.Equal(p[:m], c.block[off:off+m]) {
			at := 0
			for at < m && p[at] == c.block[off+at] {
				at++
			}
			return fmt.Errorf("the stream differs from the generator's at byte %d: got %.60q, want %.60q", c.pos+int64(at), p[at:m], c.block[off+at:off+m])
		}
		c.pos += int64(m)
		p = p[m:]
	}
	return nil
}
