package wire

import "github.com/acp-sidecar/acp-sidecar/proxy"

// The update kinds of streamed chunks from the agent, each in two parts of
// at most 16 bytes: the compiler turns a comparison with a constant that
// short into a few loads, and one with a longer constant (or through
// Envelope.MethodIs) into a call of runtime.memequal, which cost these
// checks, made for every chunk, most of their time.
const (
	msgChunkHead     = "agent_message_ch"
	thoughtChunkHead = "agent_thought_ch"
	chunkTail        = "unk"
	updMessageChunk  = msgChunkHead + chunkTail // 19 bytes, as updThoughtChunk
	updThoughtChunk  = thoughtChunkHead + chunkTail
)

// IsChunk says whether a frame is a streamed chunk: a session/update
// notification from the agent with an agent_message_chunk or
// agent_thought_chunk. The chain offers these only to the interceptors that
// may claim one (see Chain).
func IsChunk(dir proxy.Direction, env *proxy.Envelope) bool {
	u := env.Update
	if dir != proxy.AgentToClient || env.Kind != proxy.KindNotification || len(u) != len(updMessageChunk) {
		return false
	}
	return string(env.Method) == Update && string(u[len(msgChunkHead):]) == chunkTail &&
		(string(u[:len(msgChunkHead)]) == msgChunkHead || string(u[:len(thoughtChunkHead)]) == thoughtChunkHead)
}

// IsMessageChunk says whether an update kind is agent_message_chunk.
func IsMessageChunk(update []byte) bool {
	return len(update) == len(updMessageChunk) &&
		string(update[:len(msgChunkHead)]) == msgChunkHead && string(update[len(msgChunkHead):]) == chunkTail
}
