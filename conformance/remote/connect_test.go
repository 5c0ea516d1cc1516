//go:build linux

package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/state/pgtest"
)

// connectClient is a scripted editor with `acp-sidecar connect URL...` where
// it had the agent command.
func connectClient(t *testing.T, token string, urls ...string) *acpclient.Client {
	t.Helper()
	return connectClientWith(t, token, nil, urls...)
}

// connectClientWith is connectClient with more flags for connect.
func connectClientWith(t *testing.T, token string, flags []string, urls ...string) *acpclient.Client {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	argv := append(append([]string{sidecar.Path(t), "connect", "--token-file", tokenFile, "--state-dir", dir}, flags...), urls...)
	stderr := &acpclient.Buffer{}
	c, err := acpclient.Start(context.Background(), argv, acpclient.Options{Stderr: stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if code, err := c.Close(); err != nil || code != 0 || t.Failed() {
			t.Errorf("connect ended with %d, %v\nstderr: %s\nlog: %s", code, err, stderr, readFile(filepath.Join(dir, "sidecar.log")))
		}
	})
	return c
}

func readFile(path string) string {
	b, _ := os.ReadFile(path) // for a failure's message: a missing file says so by being empty
	return string(b)
}

// hostOf is the host:port of an http:// URL.
func hostOf(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Host
}

// chunks counts the agent_message_chunk updates of sid.
func chunks(ups []acp.SessionNotification) int {
	n := 0
	for _, u := range ups {
		if u.Update.AgentMessageChunk != nil {
			n++
		}
	}
	return n
}

type promptResult struct {
	stop acp.StopReason
	text string
	err  error
}

func promptAsync(ctx context.Context, c *acpclient.Client, sid acp.SessionId, text string) <-chan promptResult {
	ch := make(chan promptResult, 1)
	go func() {
		stop, got, err := c.Prompt(ctx, sid, text)
		ch <- promptResult{stop, got, err}
	}()
	return ch
}

// An editor behind connect sees a turn whole, once, though the network
// drops twice while it streams: the bridge resumes from its cursor, and
// nothing is lost, repeated or answered twice.
func TestConnectCarriesTheEditorAcrossDrops(t *testing.T) {
	t.Parallel()
	srv := startServe(t, nil)
	px := startFaultProxy(t, hostOf(t, srv.URL))
	ed := connectClient(t, srv.Token, "http://"+px.addr())
	ctx := ctxFor(t)
	if _, err := ed.Initialize(ctx); err != nil {
		t.Fatalf("initialize: %v\nserve:\n%s", err, srv.Stderr)
	}
	sess, err := ed.NewSession(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sid := sess.SessionId
	if err := ed.SetMode(ctx, sid, "plan"); err != nil {
		t.Fatal(err)
	}
	const n = 400
	before := chunks(ed.Updates(sid))
	res := promptAsync(ctx, ed, sid, fmt.Sprintf("stream %d 64", n))
	for _, at := range []int{20, 200} {
		if _, err := ed.WaitUpdates(ctx, sid, func(u []acp.SessionNotification) bool { return chunks(u)-before >= at }); err != nil {
			t.Fatalf("waiting for chunk %d: %v", at, err)
		}
		px.cut()
	}
	r := <-res
	if r.err != nil || r.stop != acp.StopReasonEndTurn {
		t.Fatalf("the turn across drops: %v %v\nserve:\n%s", r.stop, r.err, srv.Stderr)
	}
	lost := n + 2 - (chunks(ed.Updates(sid)) - before)
	twice := acpclient.AnsweredTwice(ed.Lines())
	t.Logf("fault counters: turns lost 0, chunks lost or repeated %d, requests answered twice %d, connections %d", lost, len(twice), px.taken())
	if lost != 0 {
		t.Errorf("the editor got %d chunks fewer (negative: more) than the agent sent", lost)
	}
	if len(twice) > 0 {
		t.Errorf("answered twice: %v", twice)
	}
	if !strings.Contains(r.text, "mode=plan") {
		t.Errorf("the turn's reply: %q", r.text)
	}
	_, text, err := ed.Prompt(ctx, sid, "after the drops")
	if err != nil || !strings.Contains(text, "mode=plan") || !strings.Contains(text, "turns=2") {
		t.Errorf("the next turn: %q %v", text, err)
	}
}

// The editor's transcript across a slow path and two drops mid-turn is the
// transcript of the same session with no fault, line for line.
func TestConnectTranscriptEqualsOneWithoutFaults(t *testing.T) {
	t.Parallel()
	run := func(faults bool) [][]byte {
		srv := startServe(t, nil)
		px := startFaultProxy(t, hostOf(t, srv.URL))
		ed := connectClient(t, srv.Token, "http://"+px.addr())
		ctx := ctxFor(t)
		if _, err := ed.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		sess, err := ed.NewSession(ctx, "/tmp")
		if err != nil {
			t.Fatal(err)
		}
		sid := sess.SessionId
		if err := ed.SetMode(ctx, sid, "plan"); err != nil {
			t.Fatal(err)
		}
		if faults {
			px.slow(2 * time.Millisecond)
		}
		res := promptAsync(ctx, ed, sid, "stream 300 32")
		if faults {
			for _, at := range []int{30, 150} {
				if _, err := ed.WaitUpdates(ctx, sid, func(u []acp.SessionNotification) bool { return chunks(u) >= at }); err != nil {
					t.Fatal(err)
				}
				px.cut()
			}
			px.slow(0)
		}
		if r := <-res; r.err != nil {
			t.Fatalf("the turn (faults %v): %v", faults, r.err)
		}
		if _, _, err := ed.Prompt(ctx, sid, "after"); err != nil {
			t.Fatal(err)
		}
		// From the turns on: before them, when the sidecar's command list
		// comes beside the agent's is its own timing, faults or none.
		lines := ed.Lines()
		for i, l := range lines {
			if strings.Contains(string(l), `"id":3,"result"`) {
				return lines[i+1:]
			}
		}
		t.Fatal("no answer to set_mode in the transcript")
		return nil
	}
	clean, faulty := run(false), run(true)
	if len(clean) != len(faulty) {
		t.Errorf("the editor got %d lines with faults, %d without", len(faulty), len(clean))
	}
	for i := range min(len(clean), len(faulty)) {
		if string(clean[i]) != string(faulty[i]) {
			t.Errorf("line %d differs:\nwithout faults: %.300s\nwith faults:    %.300s", i, clean[i], faulty[i])
			break
		}
	}
}

// A prompt the editor sends while no server can be reached waits for the
// bridge to be back, and runs then: latency, not an error.
func TestConnectHoldsRequestsWhileAway(t *testing.T) {
	t.Parallel()
	srv := startServe(t, nil)
	px := startFaultProxy(t, hostOf(t, srv.URL))
	ed := connectClient(t, srv.Token, "http://"+px.addr())
	ctx := ctxFor(t)
	if _, err := ed.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	sess, err := ed.NewSession(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	px.refuse(true)
	px.cut()
	res := promptAsync(ctx, ed, sess.SessionId, "while away")
	// The bridge tries, and is refused, twice; then the network is back.
	px.waitAccepted(ctx, t, 3)
	px.refuse(false)
	r := <-res
	if r.err != nil || r.stop != acp.StopReasonEndTurn || !strings.Contains(r.text, "text=while away") {
		t.Fatalf("the prompt sent while away: %v %q %v", r.stop, r.text, r.err)
	}
}

// A connection that goes dark without a reset (a half-open TCP connection)
// is found by the bridge's heartbeat, dropped and resumed: a prompt sent
// into the dark runs once, and is answered.
func TestConnectResumesAHalfOpenConnection(t *testing.T) {
	t.Parallel()
	srv := startServe(t, nil)
	px := startFaultProxy(t, hostOf(t, srv.URL))
	ed := connectClientWith(t, srv.Token, []string{"--heartbeat", "300ms"}, "http://"+px.addr())
	ctx := ctxFor(t)
	if _, err := ed.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	sess, err := ed.NewSession(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	px.darken()
	stop, text, err := ed.Prompt(ctx, sess.SessionId, "into the dark")
	if err != nil || stop != acp.StopReasonEndTurn || !strings.Contains(text, "turns=1") {
		t.Fatalf("the prompt sent into a half-open connection: %v %q %v", stop, text, err)
	}
	if twice := acpclient.AnsweredTwice(ed.Lines()); len(twice) > 0 {
		t.Errorf("answered twice: %v", twice)
	}
}

// When the server cannot resume the connection (it restarted), the bridge
// opens a fresh one and loads the session there: the editor's next prompt
// runs on the same session id, on the config it chose, with no error.
func TestConnectReattachesWhenTheServerRestarts(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state")
	a := startServe(t, []string{"--state-dir", state})
	px := startFaultProxy(t, hostOf(t, a.URL))
	ed := connectClient(t, a.Token, "http://"+px.addr())
	ctx := ctxFor(t)
	if _, err := ed.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	sess, err := ed.NewSession(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sid := sess.SessionId
	if err := ed.SetMode(ctx, sid, "plan"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ed.Prompt(ctx, sid, "before the restart"); err != nil {
		t.Fatal(err)
	}
	a.Stop(t)
	b := startServeWithToken(t, a.Token, []string{"--state-dir", state})
	px.point(hostOf(t, b.URL))
	px.cut()
	_, text, err := ed.Prompt(ctx, sid, "after the restart")
	if err != nil {
		t.Fatalf("the prompt after the server restarted: %v\nserve b:\n%s", err, b.Stderr)
	}
	if !strings.Contains(text, "mode=plan") || !strings.Contains(text, "text=after the restart") {
		t.Errorf("after the restart the turn ran so: %q", text)
		for _, l := range ed.Lines() {
			t.Logf("editor got: %.250s", l)
		}
	}
	if twice := acpclient.AnsweredTwice(ed.Lines()); len(twice) > 0 {
		t.Errorf("answered twice: %v", twice)
	}
}

// A fleet: two serve hosts on one PostgreSQL. The host that holds the
// session dies mid-turn; `connect URL1 URL2` carries the editor to the
// other host, which loads the session from the fleet's record once the
// dead host's lease runs out, and the editor's next prompt runs there on
// the config it chose.
func TestConnectFailsOverInAFleet(t *testing.T) {
	t.Parallel()
	store := pgtest.For(t, pgtest.Options{}).URL("postgres")
	flags := func(host string) []string {
		return []string{"--store", store, "--lease-ttl", "2s", "--host", host}
	}
	token := "fleet-token"
	a := startServeWithToken(t, token, flags("host-a"))
	b := startServeWithToken(t, token, flags("host-b"))
	ed := connectClient(t, token, a.URL, b.URL)
	ctx := ctxFor(t)
	if _, err := ed.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	sess, err := ed.NewSession(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sid := sess.SessionId
	if err := ed.SetMode(ctx, sid, "plan"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ed.Prompt(ctx, sid, "before the failover"); err != nil {
		t.Fatal(err)
	}
	hung := promptAsync(ctx, ed, sid, "hang")
	if _, err := ed.WaitUpdates(ctx, sid, func(u []acp.SessionNotification) bool {
		return strings.Contains(acpclient.AgentText(u), "waiting for session/cancel")
	}); err != nil {
		t.Fatal(err)
	}
	a.Kill(t)
	// The turn that was running on the dead host is lost with it: the
	// editor gets an answer, not a hang.
	if r := <-hung; r.err == nil && r.stop != acp.StopReasonCancelled {
		t.Errorf("the turn the dead host ran ended %v", r.stop)
	}
	_, text, err := ed.Prompt(ctx, sid, "after the failover")
	if err != nil {
		t.Fatalf("the prompt after the failover: %v\nhost b:\n%s", err, b.Stderr)
	}
	if !strings.Contains(text, "mode=plan") || !strings.Contains(text, "text=after the failover") {
		t.Errorf("after the failover the turn ran so: %q", text)
	}
	// The fleet's record says how: a native session made by a failover on
	// host b.
	out, err := exec.Command(sidecar.Path(t), "show", string(sid), "--json", "--store", store, "--state-dir", t.TempDir()).Output()
	if err != nil {
		t.Fatalf("show: %v", err)
	}
	var rec struct {
		Natives []struct {
			Event string `json:"event"`
			Host  string `json:"host"`
		} `json:"natives"`
	}
	if err := json.Unmarshal(out, &rec); err != nil {
		t.Fatalf("show --json: %v\n%s", err, out)
	}
	var events []string
	for _, n := range rec.Natives {
		events = append(events, n.Event+"@"+n.Host)
	}
	if !slices.Contains(events, "failover@host-b") {
		t.Errorf("the record's native sessions: %v, want one made by a failover on host-b", events)
	}
}

// A wrong token ends connect with a clear error, at once, though the
// editor keeps its end open: it is not a network drop to wait out.
func TestConnectRefusedToken(t *testing.T) {
	t.Parallel()
	srv := startServe(t, nil)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("not-the-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sidecar.Path(t), "connect", "--token-file", tokenFile, "--state-dir", dir, srv.URL)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var out acpclient.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err == nil || !strings.Contains(out.String(), "refused the token") {
			t.Errorf("connect with a wrong token: %v\n%s", err, out.String())
		}
	case <-time.After(bound):
		_ = cmd.Process.Kill() // the test fails; this only cleans up
		<-exited
		t.Errorf("connect with a wrong token did not end\n%s", out.String())
	}
}
