package proxy

// AgentPipeSize is what the agent's stdout pipe is grown to once it fills
// (GrowPipe, readAhead): Linux's largest for a process without privileges
// (the default /proc/sys/fs/pipe-max-size). At the default 64 KiB an agent
// streaming a burst of chunks (a reply, a load's replay) blocks every
// 64 KiB and each read gives no more, so every 280-odd small frames cost
// both sides a wake-up and the reader a hand-over of its buffer. Grown,
// the agent writes on while a buffer of ReadBufSize is decided, and a
// read fills the whole buffer. Half of it gave the bench's small frames
// about a twentieth less.
const AgentPipeSize = 1 << 20

// defaultPipeSize is a new pipe's size on Linux: a read that gives this
// much found the pipe full.
const defaultPipeSize = 64 << 10
