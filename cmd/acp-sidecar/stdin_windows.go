package main

import (
	"io"
	"os"
)

// pollable returns stdin as it is. Windows has no non-blocking mode for an
// anonymous pipe, and Go needs none to stop a read: closing an *os.File that
// is a pipe cancels its pending I/O (internal/poll's Close calls CancelIoEx),
// so the relay's client reader can still be stopped and waited for. Only
// read in Go's source here, not seen to work on Windows.
func pollable(f *os.File) io.Reader { return f }
