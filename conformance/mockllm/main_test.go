package mockllm

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain_ServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	logPath := filepath.Join(t.TempDir(), "requests.jsonl")
	outR, outW := io.Pipe()
	var stderr strings.Builder // written only by Main's goroutine, read after it exits

	exited := make(chan int, 1)
	go func() {
		defer outW.Close()
		exited <- Main(ctx, []string{"-log", logPath}, outW, &stderr)
	}()

	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("read URL: %v", err)
	}
	url := strings.TrimSpace(line)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("printed %q, want a loopback URL", line)
	}
	resp, err := http.Post(url+"/v1/messages?beta=true", "application/json", strings.NewReader(body(true)))
	if err != nil {
		cancel()
		t.Fatalf("POST: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	cancel()
	go io.Copy(io.Discard, outR) // Main prints nothing more; drain in case it does
	if code := <-exited; code != 0 {
		t.Errorf("Main = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var r Request
	if err := json.Unmarshal(data, &r); err != nil || r.Model != "claude-opus-4-6" || !r.Stream {
		t.Errorf("log %q decodes to %+v, %v", data, r, err)
	}
}

func TestMain_Usage(t *testing.T) {
	for _, args := range [][]string{{"-bogus"}, {"extra"}, {"-addr", "0.0.0.0:0"}} {
		var out, errOut strings.Builder
		code := Main(t.Context(), args, &out, &errOut)
		if code == 0 || out.Len() != 0 {
			t.Errorf("Main(%q) = %d, stdout %q; want failure and no output", args, code, out.String())
		}
	}
}
