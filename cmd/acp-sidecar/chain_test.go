package main

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/intercept"
	"github.com/acp-sidecar/acp-sidecar/state"
)

// TestChainOrder holds the order of the stages, which each stage's work
// depends on:
//   - the lifeline is first, so a request held while the agent restarts or
//     its session is rebuilt has been seen by no stage yet, and goes through
//     all the others once, when it goes on;
//   - the emulation follows it, so what it answers for the agent has passed
//     the gate, and what it sends on meets every stage after it;
//   - the sidecar's own commands come before the record, which must not
//     record what they answer;
//   - the record sees client session ids before the id mapper turns them
//     into native ones, and agent frames after it turned them back;
//   - the tracker is last, so it notes only the requests that really reach
//     the agent: only those get "the agent exited" when it dies.
//
// At debug level the method log follows, and sees every frame as it goes.
func TestChainOrder(t *testing.T) {
	core := intercept.New(intercept.Config{Store: state.NewMemory()})
	quiet := slog.New(slog.DiscardHandler)
	if got, want := buildChain(context.Background(), quiet, core, true, true).String(), "lifeline → emulation → commands → recordstage → idmapper → pickers → tracker"; got != want {
		t.Errorf("the chain is %s, want %s", got, want)
	}
	debug := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if got, want := buildChain(context.Background(), debug, core, true, true).String(), "lifeline → emulation → commands → recordstage → idmapper → pickers → tracker → methodlog"; got != want {
		t.Errorf("at debug the chain is %s, want %s", got, want)
	}
	if got := buildChain(context.Background(), quiet, core, false, true).String(); got != "" {
		t.Errorf("without a record the chain is %q, want none", got)
	}
}
