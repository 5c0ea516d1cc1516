package acpclient

import "sync"

// memFS is the in-memory file system the Client serves the peer's
// fs/read_text_file and fs/write_text_file from (handler.go), which a test
// seeds (Options.Files, SetFile) and reads back (File).
type memFS struct {
	mu    sync.Mutex
	files map[string]string
}

func newMemFS(seed map[string]string) *memFS {
	m := &memFS{files: map[string]string{}}
	for k, v := range seed {
		m.files[k] = v
	}
	return m
}

// File returns the in-memory file at path.
func (m *memFS) File(path string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.files[path]
	return s, ok
}

// SetFile writes the in-memory file at path.
func (m *memFS) SetFile(path, content string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[path] = content
}
