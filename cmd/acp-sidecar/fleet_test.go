//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
	"github.com/acp-sidecar/acp-sidecar/proxy"
	"github.com/acp-sidecar/acp-sidecar/state/pgtest"
	"github.com/jackc/pgx/v5"
)

// The fleet (docs/fleet.md): sidecars that stand for several hosts, each
// with its own state dir and its own fake agent, share one record on a real
// PostgreSQL, and each session has one writer at a time.

// startPostgres starts a PostgreSQL for one test (pgtest.For) and returns
// its --store URL.
func startPostgres(t *testing.T) string {
	t.Helper()
	return pgtest.For(t, pgtest.Options{}).URL("postgres")
}

// host starts another sidecar on store in front of a fake agent of its own
// that knows no session, and initializes it.
func host(t *testing.T, flags ...string) *ladderPeer {
	t.Helper()
	lp := startHost(t, nil, flags...)
	initialize(lp.peer)
	return lp
}

// startHost is host with the fake agent's flags, and no initialize.
func startHost(t *testing.T, agentFlags []string, flags ...string) *ladderPeer {
	t.Helper()
	dir := t.TempDir()
	var stderr acpclient.Buffer
	lp := &ladderPeer{stderr: &stderr, nextID: 1}
	logFile := filepath.Join(dir, "sidecar.log")
	flags = append([]string{"--log-file", logFile}, flags...)
	agent := append([]string{"acp-sidecar", "fakeagent", "-state", filepath.Join(dir, "state.json")}, agentFlags...)
	lp.peer = startPeer(boundedCtx(t), t, &stderr, sidecarArgv(t, flags, agent...)...)
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(logFile)
			t.Logf("sidecar %d stderr:\n%s\nlog:\n%s", lp.c.Pid(), stderr.String(), log)
		}
	})
	return lp
}

var leaseEnd = regexp.MustCompile(`until (\S+) unless`)

// loadUntilFree loads sid on lp until the lease is free (each refusal must
// name holder's pid) and returns the load's response and the refusals.
func loadUntilFree(t *testing.T, lp *ladderPeer, sid string, holder int) (resp []byte, refused int) {
	t.Helper()
	return openUntilFree(t, lp, "session/load", sid, holder)
}

// openUntilFree is loadUntilFree with the open's method: a v2 editor
// resumes, as v2 has no session/load.
func openUntilFree(t *testing.T, lp *ladderPeer, method, sid string, holder int) (resp []byte, refused int) {
	t.Helper()
	for {
		_, resp := lp.request(method, map[string]any{"sessionId": sid, "cwd": t.TempDir(), "mcpServers": []any{}})
		if strings.Contains(string(resp), `"result"`) {
			return resp, refused
		}
		_, code, msg := decodeRPCError(t, resp)
		if code != proxy.CodeLeaseHeld || !strings.Contains(msg, fmt.Sprintf("pid %d", holder)) {
			t.Fatalf("%s while the lease is %d's: %s, want %d naming it", method, holder, clip(resp), proxy.CodeLeaseHeld)
		}
		refused++
		// The refusal says when the lease ends, as an orchestrator would
		// read it: try again then, not before.
		m := leaseEnd.FindStringSubmatch(msg)
		if m == nil {
			t.Fatalf("the refusal does not say when the lease ends: %s", msg)
		}
		until, err := time.Parse(time.RFC3339, m[1])
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-time.After(time.Until(until) + 10*time.Millisecond):
		case <-lp.ctx.Done():
			t.Fatalf("the lease of %d did not end: %s", holder, msg)
		}
	}
}

// turnStatuses are the statuses of sid's turns, as `show --json` reads
// them from the fleet's store, from any host.
func turnStatuses(t *testing.T, store, sid string) []string {
	t.Helper()
	var st []string
	for _, tr := range shownTurns(t, store, sid) {
		st = append(st, tr.Status)
	}
	return st
}

// shownTurn is what the fleet tests read of a turn in `show --json`.
type shownTurn struct {
	Status        string `json:"status"`
	UserMessageID string `json:"userMessageId"`
}

// shownTurns are sid's turns as `show --json` reads them from the fleet's
// store.
func shownTurns(t *testing.T, store, sid string) []shownTurn {
	t.Helper()
	var v struct {
		Turns []shownTurn `json:"turns"`
	}
	showInto(t, &v, sid, "--store", store)
	return v.Turns
}

// TestFleetFailover: three hosts. Host A dies (SIGKILL, its whole tree) in
// the middle of a turn. The editor reconnects to host B and loads the
// session: B refuses while A's lease is live, naming A, then takes it once
// it expired, and the session goes on there with its config and its kept
// turns; the turn that was running on A is marked interrupted. Host C,
// asked for the session meanwhile, refuses it, naming B.
func TestFleetFailover(t *testing.T) {
	t.Parallel()
	store := startPostgres(t)
	flags := []string{"--store", store, "--lease-ttl", "2s"}
	a := startLadderWith(t, append(flags, "--host", "host-a"), func(agent []string) []string { return agent })
	a.send(`{"jsonrpc":"2.0","id":"hang","method":"session/prompt","params":{"sessionId":"` + a.sid + `","prompt":[{"type":"text","text":"hang"}]}}`)
	holder := dieMidTurn(t, a, store)

	b := host(t, append(flags, "--host", "host-b")...)
	resp, refused := loadUntilFree(t, b, a.sid, holder)
	t.Logf("host B's load was refused %d times while host A's lease ran out", refused)
	mustSucceed(t, "load on host B", resp)
	b.sid = a.sid
	// A third host, while B holds the session: refused, naming B.
	c := host(t, flags...)
	_, resp = c.request("session/load", map[string]any{"sessionId": a.sid, "cwd": t.TempDir(), "mcpServers": []any{}})
	if _, code, msg := decodeRPCError(t, resp); code != proxy.CodeLeaseHeld || !strings.Contains(msg, fmt.Sprintf("pid %d", b.c.Pid())) {
		t.Errorf("load on host C while B holds the session: %s, want %d naming B", clip(resp), proxy.CodeLeaseHeld)
	}
	_, text, _ := b.prompt("charlie on host b")
	r, ok := fakeagent.ParseReply(text)
	if !ok || r.Model != fakeagent.ModelDeep || r.Mode != "plan" {
		t.Errorf("the first prompt on host B ran on %+v (%v), want deep-3 / plan", r, ok)
	}
	if ok && r.Blocks != 2 {
		t.Errorf("the first prompt on host B had %d blocks, want 2: the kept turns, then the prompt", r.Blocks)
	}
	got := checkFailedOver(t, store, a.sid)
	t.Logf("fleet report failover: acknowledged-lost=%d refused-while-held=%d interrupted-marked=%v", lostOf(got, []string{"completed", "completed"}), refused, slices.Contains(got, "interrupted"))
}

// dieMidTurn waits until lp's turn that hangs is running, in the fleet's
// store too, then kills the host, its whole tree, and returns its pid. The
// host dies once the turn's start is in the store, as a host that dies
// seconds into a turn does: a kill within the milliseconds before leaves
// the turn absent, never half-written.
func dieMidTurn(t *testing.T, lp *ladderPeer, store string) (pid int) {
	t.Helper()
	lp.await("the turn that hangs", func(l []byte) bool { return strings.Contains(string(l), "fake-agent waiting for session/cancel") })
	for !slices.Equal(turnStatuses(t, store, lp.sid), []string{"completed", "completed", "running"}) {
		if lp.ctx.Err() != nil {
			t.Fatal("the running turn never reached the fleet's store")
		}
	}
	pid = lp.c.Pid()
	if err := lp.c.Kill(); err != nil {
		t.Fatal(err)
	}
	return pid
}

// checkFailedOver checks the record of a session that host-a ran two turns
// of and died in the third, and host-b took on for a fourth: the running
// turn is marked interrupted, and the native session on B was made by a
// failover from A. It returns the turns' statuses.
func checkFailedOver(t *testing.T, store, sid string) []string {
	t.Helper()
	got, want := turnStatuses(t, store, sid), []string{"completed", "completed", "interrupted", "completed"}
	if !slices.Equal(got, want) {
		t.Errorf("turns in the fleet's store = %q, want %q", got, want)
	}
	if n := nativeEvents(t, store, sid); len(n) != 2 || n[0] != "new@host-a" || n[1] != "failover@host-b" {
		t.Errorf("native sessions in the fleet's store = %q, want new@host-a then failover@host-b", n)
	}
	return got
}

// nativeEvents are the events that made sid's native sessions, each as
// event@host, as `show --json` reads them from the fleet's store.
func nativeEvents(t *testing.T, store, sid string) []string {
	t.Helper()
	var v struct {
		Natives []struct {
			Event string `json:"event"`
			Host  string `json:"host"`
		} `json:"natives"`
	}
	showInto(t, &v, sid, "--store", store)
	var ev []string
	for _, n := range v.Natives {
		ev = append(ev, n.Event+"@"+n.Host)
	}
	return ev
}

// lostOf counts the acknowledged turns (the first of want, completed)
// missing from got.
func lostOf(got, want []string) int {
	lost := 0
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			lost++
		}
	}
	return lost
}

// TestFleetFencesTheOldHolder: host A is paused (SIGSTOP) past its lease,
// host B takes the session, and A, resumed, tries to go on with it: A's
// client gets an error that names B and says to reconnect, and nothing A
// does reaches the record B writes.
func TestFleetFencesTheOldHolder(t *testing.T) {
	t.Parallel()
	store := startPostgres(t)
	flags := []string{"--store", store, "--lease-ttl", "2s"}
	a := startLadderWith(t, flags, func(agent []string) []string { return agent })
	if err := syscall.Kill(a.c.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b := host(t, flags...)
	resp, _ := loadUntilFree(t, b, a.sid, a.c.Pid())
	mustSucceed(t, "load on host B", resp)
	b.sid = a.sid
	resp, _, _ = b.prompt("charlie on host b")
	mustSucceed(t, "prompt on host B", resp)
	if err := syscall.Kill(a.c.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	// A's client goes on with the session: its prompt is refused before
	// it reaches A's agent, since A confirms its lease with the database
	// before a turn starts.
	_, resp = a.request("session/prompt", map[string]any{"sessionId": a.sid, "prompt": []map[string]any{{"type": "text", "text": "delta on host a"}}})
	_, code, msg := decodeRPCError(t, resp)
	if code != proxy.CodeLeaseHeld || !strings.Contains(msg, fmt.Sprintf("pid %d", b.c.Pid())) || !strings.Contains(msg, "reconnect") {
		t.Fatalf("host A's prompt after B took over: %s, want %d naming B and saying to reconnect", clip(resp), proxy.CodeLeaseHeld)
	}
	if log, err := os.ReadFile(a.calls); err != nil || strings.Contains(string(log), "delta on host a") {
		t.Errorf("host A's agent got the prompt refused after the takeover (call log read: %v)", err)
	}
	// And so is anything else on it, without asking the database again.
	_, resp = a.request("session/set_mode", map[string]any{"sessionId": a.sid, "modeId": "ask"})
	if _, code, _ := decodeRPCError(t, resp); code != proxy.CodeLeaseHeld {
		t.Errorf("host A's set_mode after B took over: %s, want %d", clip(resp), proxy.CodeLeaseHeld)
	}
	got, want := turnStatuses(t, store, a.sid), []string{"completed", "completed", "completed"}
	if !slices.Equal(got, want) {
		t.Errorf("turns in the fleet's store = %q, want %q: B's three, none of A's after the takeover", got, want)
	}
	t.Logf("fleet report fenced: old-holder-prompts-run=0 old-holder-requests-refused=2 new-holder-turns-overwritten=%d", lostOf(got, want))
}

// TestFleetStartupStorm: 50 sidecars start at once on an empty database.
// Every one of them opens the store, and the schema is migrated once.
func TestFleetStartupStorm(t *testing.T) {
	t.Parallel()
	store := startPostgres(t)
	const n = 50
	errs := make(chan error, n)
	for range n {
		go func() {
			// A sidecar whose editor closes its stdin at once: it opens the
			// store, starts the agent, and goes down cleanly.
			cmd := exec.CommandContext(boundedCtx(t), "acp-sidecar", "--state-dir", t.TempDir(), "--store", store, "--", "acp-sidecar", "fakeagent")
			out, err := cmd.CombinedOutput()
			if err == nil && strings.Contains(string(out), "cannot be used") {
				err = fmt.Errorf("the store was refused: %s", out)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	out, err := exec.CommandContext(boundedCtx(t), "acp-sidecar", "sessions", "--json", "--store", store).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "[]" {
		t.Errorf("sessions after the storm: %v %s", err, out)
	}
	conn, err := pgx.Connect(t.Context(), store)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var applied, distinct int
	if err := conn.QueryRow(t.Context(), "SELECT count(*), count(DISTINCT version) FROM acp_sidecar.schema_version").Scan(&applied, &distinct); err != nil {
		t.Fatal(err)
	}
	if applied != distinct || applied == 0 {
		t.Errorf("schema_version has %d rows for %d versions: migrated more than once", applied, distinct)
	}
}

// TestFleetDatabaseKilledMidWrite: PostgreSQL is SIGKILLed while a session
// writes, then started again. The relay never stops (every prompt is
// answered), and once the database is back every acknowledged turn is in
// it, once.
func TestFleetDatabaseKilledMidWrite(t *testing.T) {
	t.Parallel()
	srv := pgtest.For(t, pgtest.Options{Fsync: true})
	store := srv.URL("postgres")
	a := startLadderWith(t, []string{"--store", store}, func(agent []string) []string { return agent })
	answered := 2 // startLadder's two turns
	prompt := func(text string) {
		resp, _, _ := a.prompt(text)
		mustSucceed(t, text, resp)
		answered++
	}
	a.send(`{"jsonrpc":"2.0","id":"long","method":"session/prompt","params":{"sessionId":"` + a.sid + `","prompt":[{"type":"text","text":"stream 2000 100"}]}}`)
	srv.Kill() // in the middle of the stream, and of the writes it makes
	a.await("the long turn's answer", acpclient.HasID(`"long"`))
	answered++
	prompt("while the database is down")
	status := func() map[string]any {
		_, resp := a.request("_sidecar/status", map[string]any{"sessionId": a.sid})
		var r struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal(resp, &r); err != nil || r.Result == nil {
			t.Fatalf("_sidecar/status: %s", clip(resp))
		}
		return r.Result
	}
	if st := status(); st["shared"] != false || !strings.Contains(fmt.Sprint(st["notShared"]), "out of reach") {
		t.Errorf("status with the database down: shared=%v notShared=%v, want not shared, out of reach", st["shared"], st["notShared"])
	}
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	prompt("once it is back")
	for st := status(); st["shared"] != true; st = status() {
		if a.ctx.Err() != nil {
			t.Fatalf("the session was never shared again: %v", st["notShared"])
		}
	}
	if code := a.finish(); code != 0 {
		t.Fatalf("the sidecar exited %d", code)
	}

	checkTurnsLanded(t, store, a.sid, answered, "database-killed")
}

// TestSessionsWatch: `sessions --watch --json` on a fleet's store prints
// the listing, then a line for each session as a sidecar on another host
// creates it, records its turns and deletes it.
func TestSessionsWatch(t *testing.T) {
	t.Parallel()
	store := startPostgres(t)
	w := startPeer(boundedCtx(t), t, nil, "acp-sidecar", "sessions", "--watch", "--json", "--store", store)
	w.await("the listing", func(l []byte) bool { return string(l) == "[]" })

	a := startLadderWith(t, []string{"--store", store}, func(agent []string) []string { return agent })
	row := w.await("the session's row", func(l []byte) bool {
		return strings.Contains(string(l), a.sid) && strings.Contains(string(l), `"turns":2`)
	})
	if !strings.Contains(string(row), `"live":true`) {
		t.Errorf("the row of a session a sidecar serves: %s, want it live", row)
	}
	if code := a.finish(); code != 0 {
		t.Fatalf("the sidecar exited %d", code)
	}
	// Its sidecar gone, and its lease released with it: idle.
	table, err := exec.CommandContext(boundedCtx(t), "acp-sidecar", "sessions", "--store", store).CombinedOutput()
	if err != nil || !strings.Contains(string(table), "idle") {
		t.Errorf("sessions after the sidecar exited: %v\n%s\nwant the session idle", err, table)
	}
	out, err := exec.CommandContext(boundedCtx(t), "acp-sidecar", "delete", a.sid, "--store", store).CombinedOutput()
	if err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	w.await("the delete", func(l []byte) bool {
		return strings.Contains(string(l), a.sid) && strings.Contains(string(l), `"gone":true`)
	})
}

// TestFleetKilledDuringAnOutage: the database is down, a turn ends, and
// the sidecar is SIGKILLed before the turn reached the database. The host
// kept it: `sessions` says the session is not shared, and the next sidecar
// on the host replays it once the database is back.
func TestFleetKilledDuringAnOutage(t *testing.T) {
	t.Parallel()
	srv := pgtest.For(t, pgtest.Options{})
	store, dir := srv.URL("postgres"), t.TempDir()
	flags := []string{"--state-dir", dir, "--store", store, "--lease-ttl", "1s"}
	a := startLadderWith(t, flags, func(agent []string) []string { return agent })
	srv.Kill()
	resp, _, _ := a.prompt("charlie while the database is down")
	mustSucceed(t, "the prompt while the database is down", resp)
	if err := a.c.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	listing := func() sessionJSON {
		out, err := exec.CommandContext(boundedCtx(t), "acp-sidecar", "sessions", "--json", "--store", store, "--state-dir", dir).Output()
		if err != nil {
			t.Fatalf("sessions: %v\n%s", err, out)
		}
		var rows []sessionJSON
		if err := json.Unmarshal(out, &rows); err != nil || len(rows) != 1 {
			t.Fatalf("sessions: %v\n%s", err, out)
		}
		return rows[0]
	}
	if row := listing(); !row.NotShared || row.Turns != 2 {
		t.Errorf("sessions after the kill: %+v, want the two turns the database has, not shared", row)
	}

	// The next sidecar of the host replays what was kept.
	next := host(t, flags...)
	for row := listing(); row.NotShared || row.Turns != 3; row = listing() {
		if next.ctx.Err() != nil {
			t.Fatalf("the kept turn never reached the database: %+v", row)
		}
	}
	got := turnStatuses(t, store, a.sid)
	t.Logf("fleet report killed-in-outage: acknowledged=3 in-database=%d lost=%d", len(got), lostOf(got, []string{"completed", "completed", "completed"}))
}

// TestFleetSidecarThroughABrokenNetwork: between a sidecar and PostgreSQL
// the network delays, drops every connection, then goes half-open, a
// prompt at a time. Every prompt is answered (the relay never stops), and
// once the network is back every answered turn is in the database, once.
func TestFleetSidecarThroughABrokenNetwork(t *testing.T) {
	t.Parallel()
	srv := pgtest.For(t, pgtest.Options{TCP: true})
	net := pgtest.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.Port()))
	store := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", net.Port())
	a := startLadderWith(t, []string{"--store", store}, func(agent []string) []string { return agent })
	answered := 2 // startLadder's
	for _, mode := range []pgtest.Mode{pgtest.Delay, pgtest.Drop, pgtest.Stall, pgtest.Pass} {
		net.SetMode(mode)
		resp, _, _ := a.prompt("a turn while the network is " + string(mode))
		mustSucceed(t, string(mode), resp)
		answered++
	}
	if code := a.finish(); code != 0 {
		t.Fatalf("the sidecar exited %d", code)
	}
	checkTurnsLanded(t, srv.DSN("postgres"), a.sid, answered, "sidecar-network")
}

// checkTurnsLanded checks that the fleet's database holds each of the
// answered turns of sid once, completed and counted once, and logs the
// fault test's counters under label.
func checkTurnsLanded(t *testing.T, dsn, sid string, answered int, label string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var count, distinct, completed, kept int
	if err := conn.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT idx), count(*) FILTER (WHERE status = 'completed'),
		(SELECT turns_kept FROM acp_sidecar.sessions WHERE client_id = $1) FROM acp_sidecar.turns WHERE client_id = $1`, sid).
		Scan(&count, &distinct, &completed, &kept); err != nil {
		t.Fatal(err)
	}
	if count != answered || distinct != answered || completed != answered || kept != answered {
		t.Errorf("the database holds %d turns (%d distinct, %d completed, counted %d); want the %d answered, once each", count, distinct, completed, kept, answered)
	}
	t.Logf("fleet report %s: answered=%d lost=%d doubled=%d", label, answered, max(0, answered-distinct), count-distinct)
}
