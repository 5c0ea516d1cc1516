package state

import "testing"

// The store stays on this machine, in %LocalAppData%, whatever
// XDG_STATE_HOME says.
func TestDefaultDir(t *testing.T) {
	t.Setenv("LOCALAPPDATA", `C:\Users\u\AppData\Local`)
	t.Setenv("XDG_STATE_HOME", `C:\xdg\state`)
	if got, err := DefaultDir(); err != nil || got != `C:\Users\u\AppData\Local\acp-sidecar` {
		t.Errorf(`DefaultDir() = %q, %v, want C:\Users\u\AppData\Local\acp-sidecar`, got, err)
	}
}
