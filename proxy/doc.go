// Package proxy moves newline-delimited JSON-RPC frames between a client and an
// agent process, byte for byte and in order per direction.
//
// It owns framing (whole lines up to a limit), the envelope peek (id, method,
// params.sessionId, params.update.sessionUpdate), the sidecar's own id space for
// requests it sends to the agent, and the agent process's life. Several relays,
// one per agent, can share one client (ClientPort): the client's frames are read
// and scanned once, and every relay writes to the one output. It knows nothing
// of ACP's meaning: what a frame is for is decided by the Hook that intercept/
// provides, and where a client frame goes by the route of the port's owner. It
// imports no other package of this module.
//
// The hook's verdict on a frame is Pass, Rewrite, Answer, Drop, Hold or
// Defer. Hold keeps the frame's place in its direction, so what its peer
// sends after it waits, and decides it later (Verdict.Later) on a goroutine
// the relay owns; Defer decides it later without keeping a place. For a
// client request a Later must forward it once or answer it once. The rule
// is held in one place, by the hook's owner, which sees every answer
// (intercept's Chain.WithAnswers); the relay, which sees only a Later's,
// notes a decision that breaks it (answerOnce): a log, and under
// Config.Strict, as in every test, a panic naming the request. When the relay stops, a
// StopHook answers the requests the agent never answered.
//
// An agent's end is told to the owner twice: OnAgentEnd while no client
// frame is being decided (the requests the dead agent never read have gone
// back to the hook, UnsentHook), and OnAgentExit, which may start the next
// agent.
//
// How a frame of the agent's travels, which is what the speed of the sidecar
// comes down to (DESIGN.md, "Speed"): while the agent streams, a goroutine
// of the line reader reads the next buffer while the relay's goroutine
// decides the frames of this one (LineReader.readAhead), and grows the
// agent's pipe to 1 MiB the first time it finds it full (GrowPipe), so a
// streaming agent writes on meanwhile. While the agent is quiet, that
// goroutine is parked and the relay's goroutine reads for itself, so a lone
// response costs no hand-over between goroutines (readAhead.park). A
// chunk after a chunk is found and scanned by its text alone
// (streamScanner.byTail); any other frame is found by its newline and
// scanned whole. Either way a string's text is looked through 16 bytes an
// instruction for the next byte that matters (stopIndex). A frame the hook
// passes unchanged is not copied: it joins a run of the reader's buffer that
// the relay's goroutine grows without a lock (output.passLocal), and whoever
// writes to the output next takes the run first, so order holds. When the
// reader needs its buffer back, the run goes in line for the sink's
// owned-write goroutine, which writes it straight from the buffer while the
// reader reads on into another (output.settle, sink.drainOwned). A frame
// longer than the read buffer is read by the relay's goroutine itself,
// straight into a buffer of the frame's own, while the goroutine that reads
// ahead waits (LineReader.longLine); once scanned, that buffer goes whole to
// the owned-write goroutine, and the reader reads the next frame into
// another.
package proxy
