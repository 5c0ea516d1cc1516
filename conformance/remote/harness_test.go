//go:build linux

package remote

import (
	"context"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpclient"
	"github.com/acp-sidecar/acp-sidecar/conformance/remotetest"
)

const bound = remotetest.Bound

type server = remotetest.Server

// startServe runs serve in front of argv (the fake agent when empty), with
// a token named after the test.
func startServe(t *testing.T, flags []string, argv ...string) *server {
	t.Helper()
	return startServeWithToken(t, "test-token-"+strings.ReplaceAll(t.Name(), "/", "-"), flags, argv...)
}

func startServeWithToken(t *testing.T, token string, flags []string, argv ...string) *server {
	t.Helper()
	return remotetest.Start(t, remotetest.Options{Bin: sidecar.Path(t), Token: token, Flags: flags, Argv: argv})
}

func sdkClient(t *testing.T, transport, url, token string, opts acpclient.Options) *acpclient.Client {
	t.Helper()
	return remotetest.SDKClient(t, transport, url, token, opts)
}

func ctxFor(t *testing.T) context.Context { return remotetest.Ctx(t) }
