package suite

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestInOrder: results that come in any order go out in the registry's,
// each as soon as every one before it is in.
func TestInOrder(t *testing.T) {
	tests := []struct {
		name  string
		order []int   // the order the 4 checks end in
		want  [][]int // what each end releases
	}{
		{"in order", []int{0, 1, 2, 3}, [][]int{{0}, {1}, {2}, {3}}},
		{"reversed", []int{3, 2, 1, 0}, [][]int{nil, nil, nil, {0, 1, 2, 3}}},
		{"a slow first check", []int{1, 2, 0, 3}, [][]int{nil, nil, {0, 1, 2}, {3}}},
		{"pairs", []int{1, 0, 3, 2}, [][]int{nil, {0, 1}, nil, {2, 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newInOrder(4)
			var got [][]int
			for _, i := range tt.order {
				var ids []int
				for _, res := range o.add(i, CheckResult{ID: string(rune('a' + i))}) {
					ids = append(ids, int(res.ID[0]-'a'))
				}
				got = append(got, ids)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("released (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTableColumns: the columns are as wide as the registry needs, whatever
// the rows printed so far, so rows printed one at a time line up: every
// row's tier, verdict, time and detail start where the header's do.
func TestTableColumns(t *testing.T) {
	var longID, shortID string
	for _, c := range checks() {
		if len(c.id) > len(longID) {
			longID = c.id
		}
		if shortID == "" || len(c.id) < len(shortID) {
			shortID = c.id
		}
	}
	rep := &Report{Agent: AgentInfo{Name: "a"}, Transcripts: "/t", Checks: []CheckResult{
		{ID: shortID, Tier: string(Advisory), Verdict: Absorbed, DurationMs: 123456, Detail: "d1"},
		{ID: longID, Tier: string(Mandatory), Verdict: Pass, DurationMs: 0, Detail: "d2"},
		{ID: shortID, Tier: string(Capability), Verdict: Skip, DurationMs: 1500, Detail: ""},
	}}
	rep.Summary = Summary{Pass: 2, Absorbed: 1, Skip: 1}
	var b bytes.Buffer
	printTable(&b, rep)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want the agent, the header, 3 rows and the summary:\n%s", len(lines), b.String())
	}
	starts := func(l string) []int {
		var out []int
		for i := 1; i < len(l); i++ {
			if l[i] != ' ' && l[i-1] == ' ' && i > 1 && l[i-2] == ' ' {
				out = append(out, i)
			}
		}
		return out
	}
	head := starts(lines[1])
	if len(head) != 4 {
		t.Fatalf("header %q: %d columns after the first, want 4", lines[1], len(head))
	}
	for _, row := range lines[2:4] {
		if got := starts(row); !slices.Equal(got, head) {
			t.Errorf("row %q: columns start at %v, the header's at %v", row, got, head)
		}
	}
	if got := starts(lines[4]); !slices.Equal(got, head[:3]) {
		t.Errorf("row without detail %q: columns start at %v, want %v", lines[4], got, head[:3])
	}
	if strings.HasSuffix(lines[4], " ") {
		t.Errorf("row without detail %q ends in spaces", lines[4])
	}
	if want := "2 passed (1 absorbed), 0 failed, 1 skipped in 0.0s; transcripts in /t"; lines[5] != want {
		t.Errorf("summary %q, want %q", lines[5], want)
	}
}

// TestSummaryCount: absorbed counts as a pass too, so pass, fail, skip and
// warn still add up to the checks run.
func TestSummaryCount(t *testing.T) {
	var s Summary
	for _, v := range []string{Pass, Absorbed, Fail, Skip, Warn, Absorbed} {
		s.count(v)
	}
	if want := (Summary{Pass: 3, Absorbed: 2, Fail: 1, Skip: 1, Warn: 1}); s != want {
		t.Errorf("summary %+v, want %+v", s, want)
	}
}
