//go:build linux

package proxy

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// TestUnreadRequestsOfAPipe writes three requests into a real pipe, reads
// the first and half of the second, and closes the reader as a dead agent
// would: only the third lies wholly in what is unread, so only it comes
// back. A request half read was partly received and is not resent.
func TestUnreadRequestsOfAPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	o := newOutput(w)
	var log sentLog
	reqs := []string{`{"id":1,"method":"a"}`, `{"id":2,"method":"b"}`, `{"id":3,"method":"c"}`}
	for _, q := range reqs {
		end, err := o.writeFlushed([]byte(q))
		if err != nil || end < 0 {
			t.Fatalf("write %s: end %d, %v", q, end, err)
		}
		log.add([]byte("orig "+q), len(q)+1, end)
	}
	first := make([]byte, len(reqs[0])+1+len(reqs[1])/2)
	if _, err := io.ReadFull(r, first); err != nil {
		t.Fatal(err)
	}
	r.Close()
	unread := pipeUnread(w)
	if want := int64(len(reqs[1])+1) - int64(len(reqs[1])/2) + int64(len(reqs[2])+1); unread != want {
		t.Fatalf("pipeUnread = %d, want %d", unread, want)
	}
	got := log.unread(o.taken(), unread)
	if len(got) != 1 || !bytes.Equal(got[0], []byte("orig "+reqs[2])) {
		t.Errorf("unread requests = %q, want only the third, as the client sent it", got)
	}
	if again := log.unread(o.taken(), unread); len(again) != 0 {
		t.Errorf("a second look found %q; the log is emptied once read", again)
	}
}

// TestSentLogKeepsWhatAPipeCanHold: requests that ended more than a pipe's
// largest buffer ago are surely read and leave the log, and the log never
// holds more than maxKept.
func TestSentLogKeepsWhatAPipeCanHold(t *testing.T) {
	var log sentLog
	big := strings.Repeat("x", 100<<10)
	var end int64
	for range 20 {
		end += int64(len(big) + 1)
		log.add([]byte(big), len(big)+1, end)
	}
	for _, s := range log.list {
		if s.end <= end-maxUnread {
			t.Errorf("kept a request that ended %d bytes before the last", end-s.end)
		}
	}
	for range 3 * maxKept {
		end += 10
		log.add([]byte("small req"), 10, end)
	}
	if len(log.list) > maxKept {
		t.Errorf("the log holds %d requests, more than %d", len(log.list), maxKept)
	}
	log.add(make([]byte, maxUnread+1), maxUnread+1, end+maxUnread+1)
	if last := log.list[len(log.list)-1]; len(last.raw) > maxUnread {
		t.Error("kept a request longer than a pipe can hold")
	}
}
