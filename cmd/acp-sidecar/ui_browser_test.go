//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/fakeagent"
	"github.com/acp-sidecar/acp-sidecar/replay"
)

// The browser tests of `acp-sidecar ui` (docs/ui.md): the real sidecar
// binary in front of the fake agent fills a state dir with a reset, a
// rewind, a kill and a fork; the real `acp-sidecar ui` serves it; a real
// headless Chromium reads the pages. One Chromium serves every check.

// uiBound bounds the whole test and each wait in it. Nothing asserts how
// long anything takes; this only turns a hang into a failure.
const uiBound = 4 * time.Minute

// stepBound bounds one step in the browser, likewise.
const stepBound = time.Minute

// chromiumOptions keep Chromium off the network, which the test machines
// do not have: without them it hangs on lookups of Google's services. Its
// profile and its temporary files (a socket dir it leaves behind when
// killed) are the test's.
func chromiumOptions(exe, profile, tmp string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(profile),
		chromedp.Env("TMPDIR=" + tmp),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints"),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
	}
}

// browser starts one headless Chromium for the test and returns a tab.
// Without Chromium the test fails in CI (CI=true: scripts/test installs it,
// scripts/chromium-setup.sh) and is skipped elsewhere, saying why.
func browser(ctx context.Context, t *testing.T) context.Context {
	t.Helper()
	var exe string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		const msg = "no Chromium on PATH (chromium, chromium-browser or google-chrome): scripts/chromium-setup.sh installs it (apt-get install chromium)"
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal(msg + "; the browser tests never skip in CI")
		}
		t.Skip(msg)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, chromiumOptions(exe, t.TempDir(), t.TempDir())...)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(tab); err != nil { // starts the browser, bound to ctx
		t.Fatalf("start %s: %v", exe, err)
	}
	return tab
}

// uiRecord is the state dir the tests read, and what filled it.
type uiRecord struct {
	stateDir string
	lp       *ladderPeer // the running sidecar, still serving s1
	s1       string      // new, reset, rewind, kill
	s2       string      // a fork of s1
	s3       string      // a prompt with <script> in it
}

const (
	scriptMark   = "ScriptMark5d2e"
	scriptPrompt = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> ` + scriptMark
)

// fillRecord drives a real sidecar in front of the fake agent through a
// reset, a rewind, a kill of the agent and a fork, and opens a third
// session with a prompt that is HTML.
func fillRecord(ctx context.Context, t *testing.T) *uiRecord {
	t.Helper()
	dir := t.TempDir()
	r := &uiRecord{stateDir: filepath.Join(dir, "state")}
	calls := filepath.Join(dir, "calls.jsonl")
	var stderr acpclient.Buffer
	lp := &ladderPeer{calls: calls, stderr: &stderr, nextID: 1}
	// no-load: after the kill the sidecar makes a fresh native session and
	// hands it the kept turns, which is what the timeline shows.
	lp.peer = startPeer(ctx, t, &stderr, "acp-sidecar", "--state-dir", r.stateDir, "--",
		"acp-sidecar", "fakeagent", "-profile", "no-load", "-state", filepath.Join(dir, "agent.json"), "-call-log", calls)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar stderr:\n%s", stderr.String())
		}
	})
	r.lp = lp
	initialize(lp.peer)
	open := func() string {
		_, resp := lp.request("session/new", map[string]any{"cwd": dir, "mcpServers": []any{}})
		return sessionIDFrom(t, resp)
	}
	say := func(text string) {
		t.Helper()
		resp, _, _ := lp.prompt(text)
		mustSucceed(t, "prompt "+text, resp)
	}
	lp.sid = open()
	r.s1 = lp.sid
	// A config of the user's own, which every rebuild below restores.
	_, resp := lp.request("session/set_config_option", map[string]any{"sessionId": lp.sid, "configId": "model", "value": fakeagent.ModelDeep})
	mustSucceed(t, "set model", resp)
	_, resp = lp.request("session/set_mode", map[string]any{"sessionId": lp.sid, "modeId": "plan"})
	mustSucceed(t, "set mode", resp)
	say("alpha kept turn")
	say("bravo kept turn")
	say("/reset")
	say("charlie after the reset")
	say("delta to be rewound")
	say("/rewind")
	say("echo: after the rewind")
	lp.barrier()
	lp.crash()
	say("foxtrot after the kill")

	_, resp = lp.request("session/fork", map[string]any{"sessionId": r.s1, "cwd": dir, "mcpServers": []any{}})
	mustSucceed(t, "session/fork", resp)
	r.s2 = sessionIDFrom(t, resp)
	lp.sid = r.s2
	say("golf on the fork")

	lp.sid = open()
	r.s3 = lp.sid
	say(scriptPrompt)
	lp.sid = r.s1
	lp.barrier()
	return r
}

// handoffsReceived are the handoffs the fake agent got, by native session:
// the first text block of a prompt that leads with the sidecar's tag.
func handoffsReceived(t *testing.T, calls string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range readCalls(t, calls) {
		if c.Method != "session/prompt" {
			continue
		}
		var p struct {
			Prompt []struct {
				Type, Text string
			} `json:"prompt"`
		}
		if err := json.Unmarshal(c.Params, &p); err != nil {
			t.Fatalf("a prompt in the call log: %v", err)
		}
		if len(p.Prompt) > 1 && strings.HasPrefix(p.Prompt[0].Text, replay.HandoffTag) {
			if _, dup := out[c.SessionID]; dup {
				t.Fatalf("native session %s got two handoffs", c.SessionID)
			}
			out[c.SessionID] = p.Prompt[0].Text
		}
	}
	return out
}

// startUI runs `acp-sidecar ui` on the state dir and returns the URL it
// printed. The test's end interrupts it, as Ctrl-C would, and waits. Its
// --budget is the smallest there is, far below the sidecar's: a handoff
// the page built again from the record would be cut to it, so one that
// matches what the agent received is the text the record kept.
func startUI(t *testing.T, stateDir string) string {
	t.Helper()
	cmd := exec.Command("acp-sidecar", "ui", "--state-dir", stateDir, "--budget", "1024")
	var stderr acpclient.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("acp-sidecar ui after SIGINT: %v\n%s", err, stderr.String())
			}
		case <-time.After(waitBound):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("acp-sidecar ui did not exit after SIGINT\n%s", stderr.String())
		}
		if s := stderr.String(); s != "" {
			t.Logf("acp-sidecar ui stderr:\n%s", s)
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("acp-sidecar ui printed no URL: %v\n%s", err, stderr.String())
	}
	u := strings.TrimSpace(line)
	if !regexp.MustCompile(`^http://127\.0\.0\.1:[0-9]+/\?token=[0-9a-f]{64}$`).MatchString(u) {
		t.Fatalf("acp-sidecar ui printed %q, want one URL with a token", u)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }() // nothing more is printed; ends with the process
	return u
}

// shots writes each page's screenshot under the test's temp dir (and, with
// ACP_SIDECAR_UI_SHOTS set, into that directory too: docs/ui.md's picture
// comes from there).
type shots struct{ dir string }

func (s shots) take(tab context.Context, t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	for _, dir := range []string{s.dir, os.Getenv("ACP_SIDECAR_UI_SHOTS")} {
		if dir == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot %s: %s (%d bytes)", name, filepath.Join(s.dir, name+".png"), len(png))
}

// nativeRow is what a session's page says of one native session.
type nativeRow struct {
	Native  string  `json:"native"`
	Event   string  `json:"event"`
	Handoff *string `json:"handoff"`
}

const readNatives = `[...document.querySelectorAll('li.native')].map(li => ({
	native: li.dataset.native, event: li.dataset.event,
	handoff: li.querySelector('pre.handoff') ? li.querySelector('pre.handoff').textContent : null}))`

func TestUIInABrowser(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), uiBound)
	defer cancel()
	tab := browser(ctx, t)
	rec := fillRecord(ctx, t)
	link := startUI(t, rec.stateDir)
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + u.Host
	shot := shots{dir: t.TempDir()}
	do := func(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		step, stop := context.WithTimeout(tab, stepBound)
		defer stop()
		if err := chromedp.Do(step, steps...); err != nil {
			where, _ := chromedp.Run(tab, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText.slice(0, 2000)`))
			t.Fatalf("%s: %v\nthe page: %s", what, err, where)
		}
	}
	eval := func(t *testing.T, what, js string, v any) {
		t.Helper()
		raw, err := chromedp.Run(tab, chromedp.Evaluate[[]byte](js))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("%s: %s: %v", what, raw, err)
		}
	}

	t.Run("the page lists the sessions", func(t *testing.T) {
		do(t, "open the printed URL", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("table.sessions")))
		var rows []string
		eval(t, "the rows", `[...document.querySelectorAll('tr[data-session]')].map(tr => tr.dataset.session)`, &rows)
		for _, sid := range []string{rec.s1, rec.s2, rec.s3} {
			if !slices.Contains(rows, sid) {
				t.Errorf("the listing %v lacks %s", rows, sid)
			}
		}
		var title string
		eval(t, "s1's title", fmt.Sprintf(`document.querySelector('tr[data-session=%q] td.title a').textContent`, rec.s1), &title)
		if title != "alpha kept turn" {
			t.Errorf("s1's title %q, want its first prompt (the fake agent gives no title)", title)
		}
		var loc string
		eval(t, "the address", `location.href`, &loc)
		if strings.Contains(loc, "token") {
			t.Errorf("the token stays in the address bar: %s", loc)
		}
		shot.take(tab, t, "sessions")
	})

	t.Run("the timeline shows each native session with its event", func(t *testing.T) {
		do(t, "open s1", chromedp.Navigate(base+"/session?id="+url.QueryEscape(rec.s1)), chromedp.WaitVisible(chromedp.CSS("svg.timeline")))
		var natives []nativeRow
		eval(t, "s1's native sessions", readNatives, &natives)
		var history []string
		for _, n := range natives {
			history = append(history, n.Native)
		}
		var events []string
		for _, n := range natives {
			events = append(events, n.Event)
		}
		if want := []string{"new", "reset", "rewind", "crash"}; !slices.Equal(events, want) {
			t.Errorf("s1's events %v, want %v", events, want)
		}
		if want := showNatives(t, rec.stateDir, rec.s1); !slices.Equal(history, want) {
			t.Errorf("the page's native sessions %v, the record's %v", history, want)
		}
		var drawn []string
		eval(t, "the drawing", `[...document.querySelectorAll('svg.timeline g.node:not(.parent)')].map(g => g.classList[1])`, &drawn)
		if want := []string{"ev-new", "ev-reset", "ev-rewind", "ev-crash"}; !slices.Equal(drawn, want) {
			t.Errorf("the drawn nodes %v, want %v", drawn, want)
		}
		var live map[string]string
		eval(t, "the live layer", `Object.fromEntries([...document.querySelectorAll('table.config tr[data-option]')].map(tr =>
			[tr.dataset.option + (tr.querySelector('th .muted') ? ' (legacy)' : ''), tr.cells[4].className + ' ' + tr.cells[4].textContent.trim()]))`, &live)
		if got := live["model"]; got != "changed "+fakeagent.ModelDeep+" ●" {
			t.Errorf("the live model cell %q, want %s marked as changed from the baseline", got, fakeagent.ModelDeep)
		}
		if got := live["mode"]; got != "changed plan ●" {
			t.Errorf("the live mode cell %q, want plan marked as changed", got)
		}
		var rolledBack []string
		eval(t, "the turns", `[...document.querySelectorAll('tr.turn.s-rolled_back td.prompt')].map(td => td.textContent)`, &rolledBack)
		if !slices.Equal(rolledBack, []string{"delta to be rewound"}) {
			t.Errorf("rolled-back turns %v", rolledBack)
		}
		shot.take(tab, t, "session")

		do(t, "open the fork", chromedp.Navigate(base+"/session?id="+url.QueryEscape(rec.s2)), chromedp.WaitVisible(chromedp.CSS("svg.timeline")))
		eval(t, "s2's native sessions", readNatives, &natives)
		if len(natives) != 1 || natives[0].Event != "fork" {
			t.Errorf("the fork's native sessions %+v, want one, made by a fork", natives)
		}
		var branch struct {
			Parent int  `json:"parent"`
			Forked bool `json:"forked"`
		}
		eval(t, "the branch", `({parent: document.querySelectorAll('svg.timeline g.node.parent').length,
			forked: !!document.querySelector('svg.timeline path.forked')})`, &branch)
		if branch.Parent == 0 || !branch.Forked {
			t.Errorf("the fork's drawing has %d parent nodes and forked edge %v: no branch", branch.Parent, branch.Forked)
		}
		shot.take(tab, t, "fork")
	})

	t.Run("the handoff shown is the one the agent received", func(t *testing.T) {
		received := handoffsReceived(t, rec.lp.calls)
		shown := 0
		for _, sid := range []string{rec.s1, rec.s2} {
			do(t, "open "+sid, chromedp.Navigate(base+"/session?id="+url.QueryEscape(sid)), chromedp.WaitVisible(chromedp.CSS("ol.natives")))
			var natives []nativeRow
			eval(t, "native sessions", readNatives, &natives)
			for _, n := range natives {
				got, sent := n.Handoff, received[n.Native]
				switch {
				case got == nil && sent != "":
					t.Errorf("%s: native session %s received a handoff the page does not show:\n%s", sid, n.Native, sent)
				case got != nil && *got != sent:
					t.Errorf("%s: native session %s: the page shows\n%s\nthe agent received\n%s", sid, n.Native, *got, sent)
				case got != nil:
					shown++
				}
			}
		}
		// The rewind, the kill and the fork each handed over kept turns.
		if shown != 3 || len(received) != 3 {
			t.Errorf("%d handoffs shown and %d received, want 3 of each", shown, len(received))
		}
		do(t, "open a handoff", chromedp.Navigate(base+"/session?id="+url.QueryEscape(rec.s1)),
			chromedp.Click(chromedp.CSS("li.ev-crash details.handoff-box summary")), chromedp.WaitVisible(chromedp.CSS("li.ev-crash pre.handoff")))
		shot.take(tab, t, "session-handoff")
		// The page of one handoff, where a session's page links the older
		// ones of a long session, says the same.
		var restart nativeRow
		eval(t, "the crash", `(li => ({native: li.dataset.native, event: li.dataset.event}))(document.querySelector('li.ev-crash'))`, &restart)
		do(t, "open the handoff's page", chromedp.Navigate(base+"/session/handoff?native=4&id="+url.QueryEscape(rec.s1)), chromedp.WaitVisible(chromedp.CSS("pre.handoff")))
		var text string
		eval(t, "the handoff's page", `document.querySelector('pre.handoff').textContent`, &text)
		if sent := received[restart.Native]; text != sent || sent == "" {
			t.Errorf("the handoff's page shows\n%s\nthe agent received\n%s", text, sent)
		}
		shot.take(tab, t, "handoff")
	})

	t.Run("a <script> prompt renders as text", func(t *testing.T) {
		do(t, "open s3", chromedp.Navigate(base+"/session?id="+url.QueryEscape(rec.s3)), chromedp.WaitVisible(chromedp.CSS("td.prompt")))
		var page struct {
			Prompt  string `json:"prompt"`
			Title   string `json:"title"`
			Scripts int    `json:"scripts"`
			Imgs    int    `json:"imgs"`
			Pwned   bool   `json:"pwned"`
		}
		eval(t, "s3", `({prompt: document.querySelector('td.prompt').textContent, title: document.querySelector('h1').textContent,
			scripts: document.scripts.length, imgs: document.images.length, pwned: window.__pwned !== undefined})`, &page)
		if page.Prompt != scriptPrompt || !strings.Contains(page.Title, "<script>") {
			t.Errorf("the prompt reads %q and the title %q, want the text as typed", page.Prompt, page.Title)
		}
		if page.Scripts != 1 || page.Imgs != 0 || page.Pwned {
			t.Errorf("the prompt became markup: %d scripts, %d images, ran: %v", page.Scripts, page.Imgs, page.Pwned)
		}
		do(t, "open s3's turn", chromedp.Navigate(base+"/session/turn?n=1&id="+url.QueryEscape(rec.s3)), chromedp.WaitVisible(chromedp.CSS("pre.prompt")))
		eval(t, "the turn page", `({prompt: document.querySelector('pre.prompt').textContent, scripts: document.scripts.length,
			imgs: document.images.length, pwned: window.__pwned !== undefined})`, &page)
		if page.Prompt != scriptPrompt || page.Scripts != 1 || page.Imgs != 0 || page.Pwned {
			t.Errorf("the turn's page: %+v", page)
		}
		shot.take(tab, t, "turn")
	})

	t.Run("a live prompt appears without a reload", func(t *testing.T) {
		do(t, "open s1", chromedp.Navigate(base+"/session?id="+url.QueryEscape(rec.s1)), chromedp.WaitVisible(chromedp.CSS("#live-state.on")))
		do(t, "mark the page", chromedp.Evaluate[chromedp.Void](`window.__sameDocument = true`))
		const live = "hotel live prompt"
		sent := time.Now()
		resp, _, _ := rec.lp.prompt(live)
		mustSucceed(t, "the live prompt", resp)
		wait, stop := context.WithTimeout(tab, 30*time.Second) // generous: a bound, not a measure
		defer stop()
		if _, err := chromedp.Run(wait, chromedp.Poll[bool](fmt.Sprintf(`[...document.querySelectorAll('tr.turn.s-completed td.prompt')].some(td => td.textContent === %q)`, live))); err != nil {
			t.Fatalf("the live prompt did not appear on the open page: %v", err)
		}
		t.Logf("the prompt's completed turn was on the page %v after the prompt was sent (it ran in between)", time.Since(sent).Round(time.Millisecond))
		var same bool
		eval(t, "the page", `window.__sameDocument === true`, &same)
		if !same {
			t.Error("the page was reloaded: it did not follow the stream")
		}
	})

	t.Run("delete from the page removes the session from disk", func(t *testing.T) {
		if found := filesHolding(t, rec.stateDir, scriptMark); len(found) == 0 {
			t.Fatal("the session to delete is on no file of the state dir: the check below proves nothing")
		}
		do(t, "delete s3", chromedp.Navigate(base+"/session?id="+url.QueryEscape(rec.s3)),
			chromedp.Click(chromedp.CSS("details.delete summary")), chromedp.WaitVisible(chromedp.ID("delete-button")),
			chromedp.Click(chromedp.ID("delete-button")), chromedp.WaitVisible(chromedp.ID("deleted")))
		if found := filesHolding(t, rec.stateDir, scriptMark); len(found) > 0 {
			t.Errorf("after the page's delete the session is still on disk: %v", found)
		}
		var rows []string
		eval(t, "the rows", `[...document.querySelectorAll('tr[data-session]')].map(tr => tr.dataset.session)`, &rows)
		if slices.Contains(rows, rec.s3) || !slices.Contains(rows, rec.s1) {
			t.Errorf("the listing after the delete: %v", rows)
		}
		shot.take(tab, t, "deleted")
	})

	t.Run("no token, a foreign Host or a foreign Origin is refused", func(t *testing.T) {
		checkRefusals(ctx, t, link, base, rec.s1)
	})
}

// showNatives is the record's native history of sid, from `show --json`.
func showNatives(t *testing.T, dir, sid string) []string {
	t.Helper()
	var v struct {
		NativeHistory []string `json:"nativeHistory"`
	}
	showInto(t, &v, sid, "--state-dir", dir)
	return v.NativeHistory
}

// checkRefusals asks the real server what a foreign page or a process
// without the token would.
func checkRefusals(ctx context.Context, t *testing.T, link, base, sid string) {
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(r *http.Request) (int, string) {
		t.Helper()
		resp, err := client.Do(r.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	req := func(method, u string, body io.Reader) *http.Request {
		r, err := http.NewRequest(method, u, body)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	page := base + "/session?id=" + url.QueryEscape(sid)

	if code, _ := do(req("GET", page, nil)); code != http.StatusForbidden {
		t.Errorf("no token: %d, want 403", code)
	}
	r := req("GET", link, nil)
	r.Host = "rebound.example:" + strings.Split(strings.TrimPrefix(base, "http://"), ":")[1]
	if code, _ := do(r); code != http.StatusForbidden {
		t.Errorf("a foreign Host with the token: %d, want 403", code)
	}

	// With the token's cookie and the page's form token, a delete from
	// another origin is still refused.
	resp, err := client.Do(req("GET", link, nil).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("the token's answer set cookies %v", cookies)
	}
	r = req("GET", page, nil)
	r.AddCookie(cookies[0])
	code, html := do(r)
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(html)
	if code != http.StatusOK || csrf == nil {
		t.Fatalf("the session's page with the cookie: %d, form token %v", code, csrf)
	}
	form := url.Values{"id": {sid}, "csrf": {csrf[1]}}.Encode()
	for _, origin := range []string{"http://rebound.example", "null", ""} {
		r = req("POST", base+"/session/delete", strings.NewReader(form))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		r.AddCookie(cookies[0])
		if code, body := do(r); code != http.StatusForbidden {
			t.Errorf("a delete from Origin %q: %d %s, want 403", origin, code, body)
		}
	}
	r = req("GET", page, nil)
	r.AddCookie(cookies[0])
	if code, _ := do(r); code != http.StatusOK {
		t.Errorf("after the refused deletes the session's page is %d: was it deleted?", code)
	}
}
