package wire

import "testing"

func TestSetPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"result":{"agentCapabilities":{"loadSession":true}},"id":1}`, `{"result":{"agentCapabilities":{"loadSession":true,"_meta":{"acp-sidecar":X}}},"id":1}`},
		{`{"result":{"agentCapabilities":{"_meta":{"other":1}}}}`, `{"result":{"agentCapabilities":{"_meta":{"other":1,"acp-sidecar":X}}}}`},
		{`{"result":{}}`, `{"result":{"agentCapabilities":{"_meta":{"acp-sidecar":X}}}}`},
		{`{ "result" : { "agentCapabilities" : { "_meta" : { "acp-sidecar" : 5 } } } }`, `{ "result" : { "agentCapabilities" : { "_meta" : { "acp-sidecar" : X } } } }`},
		{`{"result":{"agentCapabilities":null,"big":12345678901234567890,"h":"<>&"}}`, `{"result":{"agentCapabilities":{"_meta":{"acp-sidecar":X}},"big":12345678901234567890,"h":"<>&"}}`},
	}
	for _, tt := range tests {
		got, err := SetPath([]byte(tt.in), []byte("X"), "result", "agentCapabilities", "_meta", "acp-sidecar")
		if err != nil || string(got) != tt.want {
			t.Errorf("SetPath(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestInsertArray(t *testing.T) {
	in := `{"params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}`
	got, err := InsertArray([]byte(in), true, [][]byte{[]byte(`{"type":"text","text":"before"}`)}, "params", "prompt")
	if want := `{"params":{"sessionId":"s","prompt":[{"type":"text","text":"before"},{"type":"text","text":"hi"}]}}`; err != nil || string(got) != want {
		t.Errorf("front: %s, %v; want %s", got, err, want)
	}
	got, err = InsertArray([]byte(`{"a":[ ]}`), false, [][]byte{[]byte("1"), []byte("2")}, "a")
	if want := `{"a":[ 1,2]}`; err != nil || string(got) != want {
		t.Errorf("back into empty: %s, %v; want %s", got, err, want)
	}
	got, err = InsertArray([]byte(`{"a":[0]}`), false, [][]byte{[]byte("1")}, "a")
	if want := `{"a":[0,1]}`; err != nil || string(got) != want {
		t.Errorf("back: %s, %v; want %s", got, err, want)
	}
}

func TestDelete(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"a":1,"title":"x","b":2}`, `{"a":1,"b":2}`},
		{`{"title":"x","b":2}`, `{"b":2}`},
		{`{"a":1,"title":"x"}`, `{"a":1}`},
		{`{"title":"x"}`, `{}`},
		{`{ "a" : 1 , "title" : "x" , "b" : 2 }`, `{ "a" : 1 , "b" : 2 }`},
		{`{"a":1}`, `{"a":1}`},
		{`{"t\"itle":1,"title":{"n":[1,2]},"z":"\"}"}`, `{"t\"itle":1,"z":"\"}"}`},
	} {
		got, err := Delete([]byte(tt.in), "title")
		if err != nil || string(got) != tt.want {
			t.Errorf("Delete(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	nested := `{"params":{"update":{"sessionUpdate":"session_info_update","title":"[x]","updatedAt":"t"}}}`
	got, err := Delete([]byte(nested), "params", "update", "title")
	if want := `{"params":{"update":{"sessionUpdate":"session_info_update","updatedAt":"t"}}}`; err != nil || string(got) != want {
		t.Errorf("nested Delete = %s, %v; want %s", got, err, want)
	}
}

// TestOtherMembers: the members not skipped, keys and values as they
// were, in their order; nothing when none is left.
func TestOtherMembers(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`{"cwd":"/w","systemPrompt":{"mode":"append","content":[{"type":"text","text":"<b>&"}]},"mcpServers":[],"x":12345678901234567890}`,
			`{"systemPrompt":{"mode":"append","content":[{"type":"text","text":"<b>&"}]},"x":12345678901234567890}`},
		{`{"cwd":"/w","mcpServers":[]}`, ``},
		{`{ "cwd" : "/w", "a\u00e9" : [ 1 , 2 ] }`, `{"aé":[ 1 , 2 ]}`},
		{`[1]`, ``},
	} {
		if got := string(OtherMembers([]byte(tc.raw), "cwd", "mcpServers")); got != tc.want {
			t.Errorf("OtherMembers(%s) = %s, want %s", tc.raw, got, tc.want)
		}
	}
}
