package remote

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/coder/websocket"
)

// The transport's own cost, apart from the chain and the agent: a host
// that answers at once, reached over a WebSocket, beside the same
// library's bare echo on the same loopback (the floor this transport can
// reach with one message per frame). acp-sidecar bench -only remote has
// the whole path against stdio and the SDK's server.

// echoHost answers each request with an empty result, and a request whose
// method is "stream" with its params' count of notifications first.
func echoHost(_ context.Context, h *Host) {
	sc := bufio.NewScanner(h)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	w := bufio.NewWriter(h)
	note := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"0123456789012345678901234567890123456789"}}}}` + "\n")
	for sc.Scan() {
		line := sc.Bytes()
		id := field(line, `"id":`)
		if id == nil {
			continue
		}
		if bytes.Contains(line, []byte(`"method":"stream"`)) {
			n, _ := strconv.Atoi(string(field(line, `"count":`)))
			for range n {
				w.Write(note)
			}
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", id)
		w.Flush()
	}
}

// field is the raw number or string after key in line, for the bench's
// own frames only.
func field(line []byte, key string) []byte {
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return nil
	}
	rest := line[i+len(key):]
	end := bytes.IndexAny(rest, ",}")
	if end < 0 {
		return nil
	}
	return rest[:end]
}

func benchServer(b *testing.B, bare bool) (*websocket.Conn, func()) {
	b.Helper()
	var h http.Handler
	var srv *Server
	if bare {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer ws.CloseNow()
			ctx := r.Context()
			note := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"0123456789012345678901234567890123456789"}}}}`)
			for {
				_, msg, err := ws.Read(ctx)
				if err != nil {
					return
				}
				if bytes.Contains(msg, []byte(`"method":"stream"`)) {
					n, _ := strconv.Atoi(string(field(msg, `"count":`)))
					for range n {
						if ws.Write(ctx, websocket.MessageText, note) != nil {
							return
						}
					}
				}
				if ws.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{}}`, field(msg, `"id":`))) != nil {
					return
				}
			}
		})
	} else {
		srv = NewServer(Config{Token: "t", Open: echoHost})
		h = srv
	}
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ConnContext = ConnContext
	ts.Start()
	ctx := context.Background()
	ws, _, err := websocket.Dial(ctx, "ws"+ts.URL[len("http"):], &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer t"}}})
	if err != nil {
		b.Fatal(err)
	}
	ws.SetReadLimit(1 << 20)
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)); err != nil {
		b.Fatal(err)
	}
	if _, _, err := ws.Read(ctx); err != nil {
		b.Fatal(err)
	}
	return ws, func() {
		ws.CloseNow()
		if srv != nil {
			srv.Close(ctx)
		}
		ts.Close()
	}
}

func benchRoundTrip(b *testing.B, bare bool) {
	ws, done := benchServer(b, bare)
	defer done()
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		msg := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"_bench/ping","params":{"sessionId":"s1"}}`, i+1)
		if err := ws.Write(ctx, websocket.MessageText, msg); err != nil {
			b.Fatal(err)
		}
		if _, _, err := ws.Read(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func benchStream(b *testing.B, bare bool) {
	ws, done := benchServer(b, bare)
	defer done()
	ctx := context.Background()
	b.ResetTimer()
	msg := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":7,"method":"stream","params":{"sessionId":"s1","count":%d}}`, b.N)
	if err := ws.Write(ctx, websocket.MessageText, msg); err != nil {
		b.Fatal(err)
	}
	for range b.N + 1 {
		if _, _, err := ws.Read(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWSRoundTrip(b *testing.B)     { benchRoundTrip(b, false) }
func BenchmarkWSRoundTripBare(b *testing.B) { benchRoundTrip(b, true) }
func BenchmarkWSStream(b *testing.B)        { benchStream(b, false) }
func BenchmarkWSStreamBare(b *testing.B)    { benchStream(b, true) }
