package life

import "testing"

// TestHabitsByAgentInfo: an agent is known by the last element of its
// agentInfo name, and a version the table cannot read gets no habit that
// needs a version.
func TestHabitsByAgentInfo(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		fresh         bool
	}{
		{"gemini-cli", "0.61.0", true},
		{"@google/gemini-cli", "", true},
		{"fake-agent", "1", false},
		{"", "", false},
	} {
		if got := HabitsOf(tc.name, tc.version); got.LosesFreshLoads != tc.fresh {
			t.Errorf("HabitsOf(%q, %q).LosesFreshLoads = %v, want %v", tc.name, tc.version, got.LosesFreshLoads, tc.fresh)
		}
	}
}

// TestForksAtMessage: the current packages fork at a message; an older
// claude-agent-acp does not.
func TestForksAtMessage(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		want          bool
	}{
		{"@agentclientprotocol/claude-agent-acp", "0.101.0", true},
		{"@agentclientprotocol/codex-acp", "2.6.0", true},
		{"@agentclientprotocol/codex-acp", "2.7.1", true},
		{"@zed-industries/claude-agent-acp", "0.23.1", false},
		{"codex-acp", "0.16.0", false},
		{"codex-acp", "", false},
	} {
		if got := HabitsOf(tc.name, tc.version).ForksAtMessage; got != tc.want {
			t.Errorf("HabitsOf(%q, %q).ForksAtMessage = %v, want %v", tc.name, tc.version, got, tc.want)
		}
	}
}

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		v, min string
		want   bool
	}{
		{"0.101.0", "0.101.0", true},
		{"0.101.1", "0.101.0", true},
		{"0.99.9", "0.101.0", false},
		{"2.6", "2.6.0", true},
		{"v2.10.0-beta.1", "2.6.0", true},
		{"2.5.9+build", "2.6.0", false},
		{"", "2.6.0", false},
		{"two", "2.6.0", false},
	} {
		if got := versionAtLeast(tc.v, tc.min); got != tc.want {
			t.Errorf("versionAtLeast(%q, %q) = %v, want %v", tc.v, tc.min, got, tc.want)
		}
	}
}
