package metadata_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// realMessage encodes an object of several topics and partitions (one
// named by topic ID, one with two epochs) with the combiner, and the
// metadata message a leader publishes for it, with a marker; with digests,
// every entry carries one and the first starts a chain (version 5).
func realMessage(t *testing.T, digests bool) ([]byte, []combiner.SectionInfo, []byte) {
	t.Helper()
	enc, err := combiner.NewEncoder(combiner.EncoderOptions{})
	require.NoError(t, err)
	defer enc.Close()
	batch := func(epoch int32, first, last int64) storage.Batch {
		return storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, MaxTimestamp: 1_760_000_000_000 + first,
			Data: fmt.Appendf(nil, "records %d-%d of epoch %d", first, last, epoch)}
	}
	orders := func(p int32) metadata.TopicPartition { return metadata.TopicPartition{Topic: "orders", Partition: p} }
	byID := metadata.TopicPartition{TopicID: [16]byte{0xfe, 0xed}, Partition: 2}
	object, infos, err := enc.Encode(nil, []combiner.SectionInput{
		{Partition: orders(0), Batches: []storage.Batch{batch(7, 100, 109), batch(7, 110, 119)}},
		{Partition: orders(1), Batches: []storage.Batch{batch(7, 100, 104)}},
		{Partition: orders(3), Batches: []storage.Batch{batch(6, 50, 59)}},
		{Partition: orders(3), Batches: []storage.Batch{batch(7, 60, 61)}},
		{Partition: metadata.TopicPartition{Topic: "clicks", Partition: 1}, Batches: []storage.Batch{batch(2, 0, 4)}},
		{Partition: byID, Batches: []storage.Batch{batch(1, 8, 9)}},
	})
	require.NoError(t, err)
	ref := metadata.ObjectRef{AZ: "use1-az4", Bucket: "wal--use1-az4--x-s3", Key: "wal/3/obj-1.wal"}
	m := &metadata.Message{Object: ref, WriterBrokerID: 3,
		Markers: []metadata.EpochStart{{Partition: orders(3), Epoch: 7, StartOffset: 60, LeaderBrokerID: 3}}}
	for i, s := range infos {
		e := s.Entry(ref, 7, 3)
		if digests {
			e.Digest = 0x9e3779b97f4a7c15 * uint64(i+1)
			e.DigestFrom = max(0, e.FirstOffset-int64(i)*1000)
		}
		m.Entries = append(m.Entries, e)
	}
	msg, err := metadata.AppendMessage(nil, m)
	require.NoError(t, err)
	return object, infos, msg
}

type sectionID struct {
	partition   metadata.TopicPartition
	epoch       int32
	first, last int64
}

// flipOutcome counts what single-bit flips of an encoded message lead to.
type flipOutcome struct {
	flips, decoded int
	// verified counts decoded entries whose section verified; misattributed
	// those of them naming another section's identity.
	verified, misattributed int
}

// flipEveryBit flips each bit of msg in turn, decodes the result and, when
// that succeeds, fetches and verifies every entry's section from object
// as a follower would.
func flipEveryBit(t *testing.T, msg, object []byte, infos []combiner.SectionInfo) flipOutcome {
	dec, err := combiner.NewDecoder(combiner.DecoderOptions{Concurrency: 1})
	require.NoError(t, err)
	defer dec.Close()
	written := map[int64]sectionID{}
	for _, s := range infos {
		written[s.Position] = sectionID{s.Partition, s.Epoch, s.FirstOffset, s.LastOffset}
	}
	var o flipOutcome
	mut := bytes.Clone(msg)
	for bit := range 8 * len(msg) {
		mut[bit/8] ^= 1 << (bit % 8)
		o.flips++
		m, err := metadata.DecodeMessage(mut)
		if err == nil {
			o.decoded++
			for _, e := range m.Entries {
				if e.Position+e.Length > int64(len(object)) {
					continue // the GET fails: ErrInvalidRange
				}
				if _, err := dec.DecodeSection(nil, object[e.Position:e.Position+e.Length], combiner.SectionOf(e)); err != nil {
					require.ErrorIs(t, err, combiner.ErrCorrupt)
					continue
				}
				o.verified++
				if id := (sectionID{e.Partition, e.RecordEpoch, e.FirstOffset, e.LastOffset}); id != written[e.Position] {
					o.misattributed++
					t.Errorf("bit %d flipped: entry for %v verifies the section written as %v", bit, id, written[e.Position])
				}
			}
		} else {
			require.ErrorIs(t, err, metadata.ErrCorrupt)
		}
		mut[bit/8] ^= 1 << (bit % 8)
	}
	return o
}

// TestEveryBitFlipOfARealMessage flips every bit of a real metadata
// message. The message's checksum rejects every one. Without it (the same
// message in version 1, which has none), some flips still decode, and the
// sections' identity check must then reject every entry that names another
// section's identity: the two defences each suffice. The message with
// digests (version 5) has no version without a checksum.
func TestEveryBitFlipOfARealMessage(t *testing.T) {
	_, _, withDigests := realMessage(t, true)
	require.Equal(t, byte(5), withDigests[0])
	object, infos, msg := realMessage(t, false)
	for _, msg := range [][]byte{msg, withDigests} {
		o := flipEveryBit(t, msg, object, infos)
		require.Zero(t, o.decoded, "version %d: flips that decode despite the checksum", msg[0])
		t.Logf("version %d: %d single-bit flips of a %d-byte message, none decodes", msg[0], o.flips, len(msg))
	}

	// The version 1 encoding, which has no checksum.
	m, err := metadata.DecodeMessage(msg)
	require.NoError(t, err)
	v1, err := metadata.AppendMessageVersion(nil, m, 1)
	require.NoError(t, err)
	o := flipEveryBit(t, v1, object, infos)
	require.Positive(t, o.decoded, "without a checksum some flips decode; the test would show nothing otherwise")
	require.Zero(t, o.misattributed)
	t.Logf("version 1: %d of %d flips decode; %d of their entries' sections verify, all under their own identity", o.decoded, o.flips, o.verified)
}
