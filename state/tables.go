package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/fb"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
)

// checkTables reads the footer of every table file in dir and verifies its
// index checksum before badger sees it. badger opens tables on goroutines of
// its own and panics there on a damaged footer (table.initIndex reads with
// readNoFail), which no recover in this process can catch; a damaged store
// must cost the sidecar its store, not its life. Tables are small here (a few
// MiB in all), so reading them once per open is cheap.
//
// The footer, from the end: u32 BE checksum length, the checksum (protobuf
// pb.Checksum), u32 BE index length, the index (flatbuffer fb.TableIndex, which
// lists the blocks). A block ends the same way: u32 BE checksum length, the
// checksum, over everything before it.
//
// Only the tables the MANIFEST names are checked: a table a killed process
// was still writing (a flush, a compaction) is not in it yet, and badger
// deletes such a table at open. Checking it would take a live store for a
// damaged one, and the sidecar would record in memory and lose its turns.
func checkTables(dir string) error {
	fp, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if errors.Is(err, os.ErrNotExist) {
		return nil // a new store; any table is an orphan badger removes
	}
	if err != nil {
		return fmt.Errorf("%w: manifest: %w", ErrCorrupt, err)
	}
	mf, _, err := badger.ReplayManifestFile(fp, 0, badger.DefaultOptions(dir))
	fp.Close()
	if err != nil {
		return fmt.Errorf("%w: manifest: %w", ErrCorrupt, err)
	}
	var files []string
	for id := range mf.Tables {
		files = append(files, table.NewFilename(id, dir))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("%w: table %s: %w", ErrCorrupt, f, err)
		}
		if err := checkTable(data); err != nil {
			return fmt.Errorf("%w: table %s: %w", ErrCorrupt, f, err)
		}
	}
	return nil
}

func checkTable(data []byte) error {
	pos := len(data) - 4
	if pos < 0 {
		return errors.New("too short")
	}
	n := int(binary.BigEndian.Uint32(data[pos:]))
	if n == 0 || n > pos-4 {
		return errors.New("bad checksum length")
	}
	pos -= n
	sum, err := decodeChecksum(data[pos : pos+n])
	if err != nil {
		return err
	}
	pos -= 4
	n = int(binary.BigEndian.Uint32(data[pos:]))
	if n == 0 || n > pos {
		return errors.New("bad index length")
	}
	index := data[pos-n : pos]
	if err := verify(index, sum); err != nil {
		return fmt.Errorf("index: %w", err)
	}
	// With the index intact, check each block the same way: badger parses a
	// block's entry table before it verifies the block's checksum, and panics
	// on garbage there too.
	ti := fb.GetRootAsTableIndex(index, 0)
	var bo fb.BlockOffset
	for i := range ti.OffsetsLength() {
		if !ti.Offsets(&bo, i) {
			return fmt.Errorf("block %d: no offset", i)
		}
		off, l := int(bo.Offset()), int(bo.Len())
		if l < 8 || off+l > pos-n {
			return fmt.Errorf("block %d: out of bounds", i)
		}
		blk := data[off : off+l]
		cl := int(binary.BigEndian.Uint32(blk[l-4:]))
		if cl == 0 || cl > l-8 {
			return fmt.Errorf("block %d: bad checksum length", i)
		}
		bsum, err := decodeChecksum(blk[l-4-cl : l-4])
		if err != nil {
			return fmt.Errorf("block %d: %w", i, err)
		}
		if err := verify(blk[:l-4-cl], bsum); err != nil {
			return fmt.Errorf("block %d: %w", i, err)
		}
	}
	return nil
}

func verify(data []byte, sum *pb.Checksum) error {
	if sum.Algo != pb.Checksum_CRC32C && sum.Algo != pb.Checksum_XXHash64 {
		return fmt.Errorf("unknown checksum algorithm %d", sum.Algo) // y would panic
	}
	return y.VerifyChecksum(data, sum)
}

// decodeChecksum decodes pb.Checksum{algo = 1 (enum), sum = 2 (uint64)} by
// hand: two varint fields, without taking a protobuf dependency here.
func decodeChecksum(b []byte) (*pb.Checksum, error) {
	var c pb.Checksum
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("bad checksum")
		}
		b = b[n:]
		v, n := binary.Uvarint(b)
		if n <= 0 || tag&7 != 0 {
			return nil, errors.New("bad checksum")
		}
		b = b[n:]
		switch tag >> 3 {
		case 1:
			c.Algo = pb.Checksum_Algorithm(v)
		case 2:
			c.Sum = v
		}
	}
	return &c, nil
}
