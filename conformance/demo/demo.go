package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// Run plays the demo with exe as the acp-sidecar binary, writing its story
// to w. stateDir keeps the record; "" uses a temporary one.
func Run(ctx context.Context, exe, stateDir string, w io.Writer) error {
	if stateDir == "" {
		dir, err := os.MkdirTemp("", "acp-sidecar-demo-")
		if err != nil {
			return fmt.Errorf("demo state dir: %w", err)
		}
		defer os.RemoveAll(dir)
		stateDir = dir
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	d := &demo{w: w}
	argv := []string{exe, "--state-dir", stateDir, "--", exe, "fakeagent"}
	d.say("$ %s", strings.Join(append([]string{"acp-sidecar", "--state-dir", "STATE"}, "--", "acp-sidecar", "fakeagent"), " "))
	c, err := acpclient.Start(ctx, argv, acpclient.Options{Stderr: os.Stderr, Env: []string{"GORACE=atexit_sleep_ms=0"}})
	if err != nil {
		return fmt.Errorf("start the sidecar: %w", err)
	}
	defer c.Close()
	sid, err := d.script(ctx, c)
	if err != nil {
		return err
	}
	if _, err := c.Close(); err != nil {
		return fmt.Errorf("close the sidecar: %w", err)
	}
	d.step("The editor closes; the record stays in the state dir")
	return d.record(ctx, stateDir, string(sid))
}

type demo struct {
	w io.Writer
	n int
}

func (d *demo) step(format string, args ...any) {
	d.n++
	fmt.Fprintf(d.w, "\n%d. %s\n", d.n, fmt.Sprintf(format, args...))
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.w, "   %s\n", fmt.Sprintf(format, args...))
}

// agentSaw reports what the fake agent said it saw.
func (d *demo) agentSaw(text string) {
	r, ok := fakeagent.ParseReply(text)
	if !ok {
		d.say("agent: %s", strings.TrimSpace(text))
		return
	}
	d.say("agent: native session %s, model=%s effort=%s mode=%s, its history holds %d turn(s)", r.Session, r.Model, r.Effort, r.Mode, r.Turns)
	// The agent's echo of what it got; the agent's own earlier answers in
	// a handoff are shortened to keep the story readable.
	for _, e := range r.Echo {
		skipping := false
		for _, line := range strings.Split(strings.TrimSpace(e), "\n") {
			switch {
			case strings.HasPrefix(line, "<turn ") && strings.HasSuffix(line, " assistant>"):
				skipping = true
				d.say("  | %s (the agent's answer) </turn>", strings.TrimSuffix(line, ">"))
				continue
			case strings.HasPrefix(line, "</turn ") && strings.HasSuffix(line, " assistant>"):
				skipping = false
				continue
			case skipping:
				continue
			}
			d.say("  | %s", line)
		}
	}
}

func (d *demo) prompt(ctx context.Context, c *acpclient.Client, sid acp.SessionId, text string) error {
	d.say("editor: %q", text)
	_, out, err := c.Prompt(ctx, sid, text)
	if err != nil {
		return fmt.Errorf("prompt %q: %w", text, err)
	}
	if strings.HasPrefix(text, "/") {
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			d.say("sidecar: %s", line)
		}
		return nil
	}
	d.agentSaw(out)
	return nil
}

func (d *demo) script(ctx context.Context, c *acpclient.Client) (acp.SessionId, error) {
	d.step("The editor starts a session through the sidecar")
	if _, err := c.Initialize(ctx); err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	cwd, _ := os.Getwd()
	sess, err := c.NewSession(ctx, cwd)
	if err != nil {
		return "", fmt.Errorf("session/new: %w", err)
	}
	sid := sess.SessionId
	d.say("session id the editor knows: %s", sid)

	d.step("The user picks a model, a model-dependent effort and a mode")
	for _, kv := range [][2]string{{"model", "deep-3"}, {"effort", "max"}} {
		if _, err := c.SetConfigOption(ctx, sid, kv[0], kv[1]); err != nil {
			return "", fmt.Errorf("set %s: %w", kv[0], err)
		}
		d.say("editor: set %s = %s", kv[0], kv[1])
	}
	if err := c.SetMode(ctx, sid, "plan"); err != nil {
		return "", fmt.Errorf("set mode: %w", err)
	}
	d.say("editor: set mode = plan")
	if err := d.prompt(ctx, c, sid, "Hello"); err != nil {
		return "", err
	}

	d.step("A context reset: a fresh native session, the same config, the same session id")
	if err := d.prompt(ctx, c, sid, "/reset"); err != nil {
		return "", err
	}
	if err := d.prompt(ctx, c, sid, "Do you remember me?"); err != nil {
		return "", err
	}

	d.step("A rewind: the agent keeps what the user kept and forgets what was taken back")
	for _, p := range []string{"My favourite colour is teal", "My favourite animal is an otter", "/rewind"} {
		if err := d.prompt(ctx, c, sid, p); err != nil {
			return "", err
		}
	}
	d.say("the next prompt carries the kept turns once (the fake agent echoes every block it got):")
	if err := d.prompt(ctx, c, sid, "echo: What did I say first?"); err != nil {
		return "", err
	}
	if err := d.prompt(ctx, c, sid, "echo: And now?"); err != nil {
		return "", err
	}

	d.step("The agent crashes in the middle of a turn; the sidecar restarts it and keeps the session")
	d.say("editor: %q", "crash now")
	if _, _, err := c.Prompt(ctx, sid, "crash now"); err != nil {
		d.say("sidecar: %s", errMessage(err))
	} else {
		return "", fmt.Errorf("the crashing prompt did not fail")
	}
	d.say("the next prompt goes at once, while the agent is still restarting: the sidecar holds it, rebuilds the session in a fresh native session (the restarted fake agent numbers its sessions from 1 again) on the same config, and sends it there with the kept turns:")
	text := "Still there?"
	d.say("editor: %q", text)
	_, out, err := c.Prompt(ctx, sid, text)
	if err != nil {
		return "", fmt.Errorf("prompt sent while the agent restarts: %w", err)
	}
	d.agentSaw(out)
	if r, ok := fakeagent.ParseReply(out); ok && r.Blocks == 2 {
		d.say("the agent got 2 content blocks: the kept turns (the interrupted one marked as such), then the prompt; the editor only waited")
	}
	return sid, nil
}

// record shows what the store kept of the session.
func (d *demo) record(ctx context.Context, dir, sid string) error {
	st, err := state.Open(ctx, dir, state.Options{})
	if err != nil {
		return fmt.Errorf("open the record: %w", err)
	}
	defer st.Close()
	sess, err := st.Session(ctx, sid)
	if err != nil {
		return fmt.Errorf("read session %s: %w", sid, err)
	}
	turns, err := st.Turns(ctx, sid)
	if err != nil {
		return fmt.Errorf("read turns of %s: %w", sid, err)
	}
	// Each native session with the event that put it there, as the record
	// says (`show` prints the table).
	natives := make([]string, 0, len(sess.Natives))
	for _, n := range sess.Natives {
		natives = append(natives, n.ID+" ("+n.Event+")")
	}
	d.say("session %s, native sessions %s", sess.ClientID, strings.Join(natives, " → "))
	d.say("original: %s", values(sess.Original))
	d.say("live:     %s", values(sess.Live))
	for _, t := range turns {
		d.say("turn %d %-11s %q", t.Index, t.Status, firstLine(t.PromptText))
	}
	d.say("(acp-sidecar show %s prints the whole record)", sid)
	return nil
}

func values(c *state.Config) string {
	if c == nil {
		return "(none)"
	}
	var parts []string
	for _, o := range c.Options {
		parts = append(parts, o.ID+"="+strings.Trim(string(o.Current), `"`))
	}
	return strings.Join(parts, " ")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// errMessage is the JSON-RPC error's message, as an editor would show it.
func errMessage(err error) string {
	var re *acp.RequestError
	if errors.As(err, &re) {
		return re.Message
	}
	return err.Error()
}
