//go:build linux

package suite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProbeHangReport: a peer that never answers initialize fails the
// probe with what a reader of a CI log needs to find why, the run's files
// being gone by then: the transcript, the peer's goroutines (a Go peer
// dumps them on SIGQUIT) and the suite's own. The peer here is a Go
// program that speaks no ACP: the mock LLM, which serves HTTP and prints
// its address.
func TestProbeHangReport(t *testing.T) {
	bin := sidecarBinary(t)
	dir := t.TempDir()
	cfg := &config{exe: bin, agent: []string{bin, "mockllm"}, env: baseEnv(os.Environ(), nil), only: []string{"initialize"},
		timeout: 3 * time.Second, transcripts: filepath.Join(dir, "transcripts")}
	_, err := runSuite(t.Context(), cfg)
	if err == nil {
		t.Fatal("the probe of a peer that never answers passed")
	}
	msg := err.Error()
	for _, want := range []string{
		"probe (initialize and session/new, directly)",
		"--- direct: transcript",
		`send {"jsonrpc":"2.0","id":`,
		"--- direct: stderr, with its goroutines",
		"SIGQUIT",
		"goroutine ",
		"--- the suite's goroutines",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the probe's error lacks %q:\n%s", want, tail(msg, 4<<10))
		}
	}
}
