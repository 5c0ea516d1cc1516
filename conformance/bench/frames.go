package bench

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strconv"
)

// The frames the generator writes. They are what agents send most: message
// chunks of a reply (small, many) and tool results carrying a base64 image
// (few, megabytes each). Only their size is a parameter; the shape is fixed so
// runs compare.
const (
	chunkHead = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_5f3a9c2e81d047b6","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`
	chunkTail = `"}}}}`

	imageHead1 = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_5f3a9c2e81d047b6","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_`
	imageHead2 = `","status":"completed","content":[{"type":"content","content":{"type":"image","mimeType":"image/png","data":"`
	imageTail  = `"}}]}}}`
)

// Frame kinds of the generator (-kind).
const (
	kindChunk = "chunk"
	kindImage = "image"
)

// minFrameSize is the smallest frame of each kind.
func minFrameSize(kind string) int {
	if kind == kindImage {
		return len(imageHead1) + 1 + len(imageHead2) + len(imageTail)
	}
	return len(chunkHead) + len(chunkTail)
}

// filler is prose for message chunks: plain ASCII, no escapes, as most
// model output is.
const filler = "The relay reads one line, peeks its envelope and writes the same bytes on. "

// chunkFrame is an agent_message_chunk notification of exactly size bytes,
// without the '\n'. seq makes consecutive frames differ.
func chunkFrame(size int, seq int) ([]byte, error) {
	if size < minFrameSize(kindChunk) {
		return nil, fmt.Errorf("chunk frame of %d bytes: the smallest is %d", size, minFrameSize(kindChunk))
	}
	b := make([]byte, 0, size)
	b = append(b, chunkHead...)
	text := size - len(chunkHead) - len(chunkTail)
	tag := strconv.AppendInt(nil, int64(seq), 10)
	tag = append(tag, ' ')
	if len(tag) > text {
		tag = tag[:0]
	}
	b = append(b, tag...)
	for i := len(tag); i < text; i++ {
		b = append(b, filler[i%len(filler)])
	}
	b = append(b, chunkTail...)
	return b, nil
}

// imageFrame is a tool_call_update carrying base64 data, exactly size bytes
// without the '\n'. The data is random, so it does not compress and has no
// structure a scanner could exploit; base64 needs a multiple of four
// characters, so the remainder lengthens the tool call id.
func imageFrame(size int) ([]byte, error) {
	if size < minFrameSize(kindImage) {
		return nil, fmt.Errorf("image frame of %d bytes: the smallest is %d", size, minFrameSize(kindImage))
	}
	free := size - len(imageHead1) - len(imageHead2) - len(imageTail)
	idLen := 1 + (free-1)%4
	dataLen := free - idLen
	raw := make([]byte, dataLen/4*3)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	b := make([]byte, 0, size)
	b = append(b, imageHead1...)
	for i := 0; i < idLen; i++ {
		b = append(b, 'a'+byte(i%26))
	}
	b = append(b, imageHead2...)
	b = base64.StdEncoding.AppendEncode(b, raw)
	b = append(b, imageTail...)
	if len(b) != size {
		return nil, fmt.Errorf("image frame: built %d bytes, want %d", len(b), size)
	}
	return b, nil
}

// frameBlock is count frames of the kind, each followed by '\n', laid out so
// the generator writes many per system call. Image frames are identical; chunk
// frames differ by a sequence number.
func frameBlock(kind string, size, count int) ([]byte, error) {
	switch kind {
	case kindChunk:
		block := make([]byte, 0, (size+1)*count)
		for i := range count {
			f, err := chunkFrame(size, i)
			if err != nil {
				return nil, err
			}
			block = append(append(block, f...), '\n')
		}
		return block, nil
	case kindImage:
		f, err := imageFrame(size)
		if err != nil {
			return nil, err
		}
		block := make([]byte, 0, (size+1)*count)
		for range count {
			block = append(append(block, f...), '\n')
		}
		return block, nil
	}
	return nil, fmt.Errorf("unknown frame kind %q (have %s, %s)", kind, kindChunk, kindImage)
}
