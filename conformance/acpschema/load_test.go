package acpschema_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/acp-sidecar/acp-sidecar/conformance/acpschema"
)

// TestLoad: the file of each version and option, and the errors
// `acp-sidecar conformance --schema DIR` shows (docs/conformance.md).
func TestLoad(t *testing.T) {
	for _, tt := range []struct {
		version int
		stable  bool
		file    string
	}{
		{1, false, "v1/schema.unstable.json"},
		{2, false, "v2/schema.unstable.json"},
		{2, true, "v2/schema.json"},
	} {
		var opts []acpschema.Option
		if tt.stable {
			opts = append(opts, acpschema.Stable())
		}
		s := schema(t, tt.version, opts...)
		if s.Version != tt.version || s.File != tt.file || !strings.HasSuffix(s.Path, "/schema/"+tt.file) {
			t.Errorf("v%d stable %t: Version %d, File %q, Path %q; want %s", tt.version, tt.stable, s.Version, s.File, s.Path, tt.file)
		}
	}
	dir := t.TempDir()
	if _, err := acpschema.Load(dir, 2); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "DIR is the schema directory of @agentclientprotocol/sdk, which holds v1/ and v2/") {
		t.Errorf("Load of an empty dir: %v, want a missing file and what DIR is", err)
	}
	if _, err := acpschema.Load(dir, 3); err == nil || err.Error() != "no schema file known for ACP v3" {
		t.Errorf("Load of v3: %v", err)
	}
	if _, err := acpschema.CacheDir(dir); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "scripts/e2e-setup.sh") {
		t.Errorf("CacheDir of an empty root: %v, want fs.ErrNotExist and how to install it", err)
	}
}
