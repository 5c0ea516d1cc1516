package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --listen takes a loopback address, or with --listen-any any address;
// never a name but localhost.
func TestUIListenAddr(t *testing.T) {
	for _, tt := range []struct {
		addr    string
		any     bool
		want    string
		wantErr string
	}{
		{addr: "127.0.0.1:0", want: "127.0.0.1:0"},
		{addr: "localhost:8080", want: "127.0.0.1:8080"},
		{addr: "[::1]:0", want: "[::1]:0"},
		{addr: "127.0.0.2:0", want: "127.0.0.2:0"},
		{addr: "0.0.0.0:8080", wantErr: "not a loopback address"},
		{addr: ":8080", wantErr: "every address"},
		{addr: "192.168.1.5:8080", wantErr: "--listen-any"},
		{addr: "192.168.1.5:8080", any: true, want: "192.168.1.5:8080"},
		{addr: ":8080", any: true, want: ":8080"},
		{addr: "example.com:80", any: true, wantErr: "not a name"},
		{addr: "127.0.0.1", wantErr: "missing port"},
	} {
		got, err := listenAddr(tt.addr, tt.any)
		if got != tt.want || (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("listenAddr(%q, %v) = %q, %v; want %q, %q", tt.addr, tt.any, got, err, tt.want, tt.wantErr)
		}
	}
}

// A non-loopback --listen without --listen-any is a usage error, before
// the store is opened.
func TestUIRefusesBeyondLoopback(t *testing.T) {
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errOut, err := os.Create(filepath.Join(dir, "err"))
	if err != nil {
		t.Fatal(err)
	}
	defer errOut.Close()
	code := runMain(context.Background(), []string{"acp-sidecar", "ui", "--listen", "0.0.0.0:0", "--state-dir", filepath.Join(dir, "state")}, stdio{out: out, err: errOut})
	stdout, stderr := mustReadFile(t, out.Name()), mustReadFile(t, errOut.Name())
	if code != 2 || len(stdout) != 0 || !strings.Contains(string(stderr), "--listen-any") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing, a message naming --listen-any", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
		t.Error("the refused command created the state dir")
	}
}
