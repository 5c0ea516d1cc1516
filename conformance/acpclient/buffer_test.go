package acpclient_test

import (
	"fmt"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
)

func TestBufferKeepsTheTail(t *testing.T) {
	all, tail := &acpclient.Buffer{}, &acpclient.Buffer{Max: 10}
	for i := range 5 {
		fmt.Fprintf(all, "line %d\n", i)
		fmt.Fprintf(tail, "line %d\n", i)
	}
	if got := all.String(); got != "line 0\nline 1\nline 2\nline 3\nline 4\n" {
		t.Errorf("without Max the buffer holds %q", got)
	}
	if got := tail.String(); got != " 3\nline 4\n" {
		t.Errorf("with Max 10 the buffer holds %q, want the last 10 bytes", got)
	}
}
