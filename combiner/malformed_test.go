package combiner

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// These tests feed the parsers bytes no Encoder writes but whose checksums
// are valid: what a buggy or hostile writer could produce. Each must be
// rejected with a *CorruptError that says what is wrong.

// raw builds bytes from a compact description: uint64 is written as a
// uvarint, int64 as a varint, byte as itself, []byte as is, and string as
// a uvarint length and its bytes.
func raw(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch v := p.(type) {
		case uint64:
			b = binary.AppendUvarint(b, v)
		case int64:
			b = binary.AppendVarint(b, v)
		case byte:
			b = append(b, v)
		case []byte:
			b = append(b, v...)
		case string:
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		default:
			panic("raw: unsupported part")
		}
	}
	return b
}

func TestDecodeSectionMalformed(t *testing.T) {
	zenc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	require.NoError(t, err)
	defer zenc.Close()
	five := []byte("hello")
	zstdFive := zenc.EncodeAll(five, nil)
	s2Five := s2.Encode(nil, five)
	s2Corrupt := append([]byte{10}, 0xFF, 0xFF, 0xFF) // claims 10 bytes, body invalid
	overlong := []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}
	const v, none, zst, s2c = byte(sectionVersion), byte(metadata.CodecNone), byte(metadata.CodecZstd), byte(metadata.CodecS2)

	// want describes a one-batch section: offsets 0-0 at epoch 1, max
	// timestamp 0, with size bytes of data.
	want := func(codec byte, size int64) SectionInfo {
		return SectionInfo{Partition: metadata.TopicPartition{Topic: "t"}, Epoch: 1, Codec: metadata.Codec(codec), UncompressedSize: size}
	}
	at := func(w SectionInfo, first, last int64) SectionInfo {
		w.FirstOffset, w.LastOffset = first, last
		return w
	}
	cases := []struct {
		name   string
		body   []byte
		want   SectionInfo
		reason string
	}{
		{"future version", raw(byte(sectionVersion+1), none, int64(1), uint64(1), uint64(0), uint64(0), int64(0), uint64(5), five), want(none, 5), "section format version 3"},
		{"no version", raw(byte(0), none, int64(1), uint64(1), uint64(0), uint64(0), int64(0), uint64(5), five), want(none, 5), "section format version 0"},
		{"truncated table", raw(v, none, int64(1), uint64(2), uint64(0), uint64(0), int64(0), uint64(5), []byte{0x80, 0x80, 0x80, 0x80}), want(none, 5), "batch 1: truncated first offset"},
		{"overlong varint", raw(v, none, overlong, uint64(1), []byte("0123456789")), want(none, 5), "overlong varint epoch"},
		{"epoch beyond int32", raw(v, none, int64(math.MaxInt32+1), uint64(1), []byte("0123456789")), want(none, 5), "out of range epoch"},
		{"no batches", raw(v, none, int64(1), uint64(0), []byte("0123456789")), want(none, 5), "batch count 0"},
		{"too many batches", raw(v, none, int64(1), uint64(1000), []byte("0123456789")), want(none, 5), "batch count 1000"},
		{"empty batch", raw(v, none, int64(1), uint64(1), uint64(0), uint64(0), int64(0), uint64(0), five), want(none, 0), "data length 0"},
		{"first offset beyond int64", raw(v, none, int64(1), uint64(1), uint64(math.MaxUint64), uint64(0), int64(0), uint64(5), five), want(none, 5), "out of range first offset"},
		{"span overflows", raw(v, none, int64(1), uint64(1), uint64(math.MaxInt64), uint64(1), int64(0), uint64(5), five), want(none, 5), "overflowing offset span"},
		{"gap overflows", raw(v, none, int64(1), uint64(2),
			uint64(math.MaxInt64-1), uint64(0), int64(0), uint64(2),
			uint64(5), uint64(0), int64(0), uint64(3), five), at(want(none, 5), math.MaxInt64-1, 0), "overflowing first offset"},
		{"no payload", raw(v, none, int64(1), uint64(1), uint64(1_000_000), uint64(0), int64(0), uint64(5)), at(want(none, 5), 1_000_000, 1_000_000), "no payload"},
		{"short raw payload", raw(v, none, int64(1), uint64(1), uint64(0), uint64(0), int64(0), uint64(5), []byte("hell")), want(none, 5), "stored payload of 4 bytes, want 5"},
		{"zstd garbage", raw(v, zst, int64(1), uint64(1), uint64(0), uint64(0), int64(0), uint64(5), []byte("not zstd")), want(zst, 5), "zstd payload does not decode"},
		{"zstd shorter than claimed", raw(v, zst, int64(1), uint64(1), uint64(0), uint64(0), int64(0), uint64(10), zstdFive), want(zst, 10), "zstd payload"},
		{"s2 no length", raw(v, s2c, int64(1), uint64(1), uint64(0), uint64(0), int64(0), uint64(5), overlong), want(s2c, 5), "s2 payload has no valid length"},
		{"s2 shorter than claimed", raw(v, s2c, int64(1), uint64(1), uint64(0), uint64(0), int64(0), uint64(10), s2Five), want(s2c, 10), "s2 payload decodes to 5 bytes, want 10"},
		{"s2 corrupt body", raw(v, s2c, int64(1), uint64(1), uint64(0), uint64(0), int64(0), uint64(10), s2Corrupt), want(s2c, 10), "s2 payload does not decode"},
	}
	dec := newDecoder(t, DecoderOptions{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := c.want
			section := reseal(c.body, &w)
			w.Length = int64(len(section))
			w.Checksum = getUint64(section[len(section)-checksumSize:])
			_, err := dec.DecodeSection(nil, section, w)
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, c.reason)
		})
	}

	// The same well-formed section decodes, so the cases above fail for
	// the reason they name.
	w := want(zst, 5)
	section := reseal(raw(v, zst, int64(1), uint64(1), uint64(0), uint64(0), int64(0), uint64(5), zstdFive), &w)
	w.Length, w.Checksum = int64(len(section)), getUint64(section[len(section)-checksumSize:])
	got, err := dec.DecodeSection(nil, section, w)
	require.NoError(t, err)
	require.Equal(t, []storage.Batch{{Epoch: 1, Data: five}}, got)
}

// sealObject builds an object around a hand-made footer: a valid header,
// sectionBytes bytes of sections (zeros: ReadFooter does not read them),
// the footer and a trailer whose checksum matches.
func sealObject(footer []byte, count uint32, sectionBytes int) []byte {
	obj := raw([]byte(magic), byte(FormatVersion), byte(0), byte(0), byte(0))
	obj = append(obj, make([]byte, sectionBytes)...)
	pos := len(obj)
	obj = append(obj, footer...)
	t := len(obj)
	obj = binary.LittleEndian.AppendUint64(obj, uint64(pos))
	obj = binary.LittleEndian.AppendUint32(obj, uint32(len(footer)))
	obj = binary.LittleEndian.AppendUint32(obj, count)
	obj = binary.LittleEndian.AppendUint64(obj, footerChecksum(obj[pos:t], obj[t:t+16]))
	obj = binary.LittleEndian.AppendUint16(obj, FormatVersion)
	obj = binary.LittleEndian.AppendUint16(obj, 0)
	return append(obj, magic...)
}

func TestReadFooterMalformed(t *testing.T) {
	sum := make([]byte, checksumSize)
	// entry is one footer entry; the defaults describe a raw 40-byte
	// section of one batch of 20 bytes.
	type entry struct {
		topic, partition uint64
		epoch            int64
		first, span      uint64
		ts               int64
		batches, length  uint64
		codec            byte
		size             uint64
		noChecksum       bool
	}
	def := func() entry { return entry{batches: 1, length: 40, size: 20} }
	enc := func(e entry) []byte {
		b := raw(e.topic, e.partition, e.epoch, e.first, e.span, e.ts, e.batches, e.length, e.codec, e.size)
		if !e.noChecksum {
			b = append(b, sum...)
		}
		return b
	}
	topic := raw(uint64(1), byte(0), "orders")
	with := func(f func(*entry)) []byte {
		e := def()
		f(&e)
		return append(append([]byte{}, topic...), enc(e)...)
	}
	cases := []struct {
		name     string
		footer   []byte
		count    uint32
		sections int
		reason   string
	}{
		{"valid", with(func(*entry) {}), 1, 40, ""},
		{"no topics", append(raw(uint64(0)), enc(def())...), 1, 40, "topic count 0"},
		{"more topics than sections", append(raw(uint64(2), byte(0), "a", byte(0), "b"), enc(def())...), 1, 40, "topic count 2 for 1 sections"},
		{"topic flags", append(raw(uint64(1), byte(2), "orders"), enc(def())...), 1, 40, "topic 0 has unknown flags 0x02"},
		{"nameless topic", append(raw(uint64(1), byte(0), ""), enc(def())...), 1, 40, "neither topic name nor topic ID"},
		{"topic by ID only", append(raw(uint64(1), byte(topicHasID), make([]byte, 15), byte(1), ""), enc(def())...), 1, 40, ""},
		{"topic name too long", append(raw(uint64(1), byte(0), uint64(500)), enc(def())...), 1, 40, "truncated topic name"},
		{"topic index", with(func(e *entry) { e.topic = 1 }), 1, 40, "topic index 1, table has 1 topics"},
		{"partition", with(func(e *entry) { e.partition = math.MaxInt32 + 1 }), 1, 40, "partition 2147483648 out of range"},
		{"span overflows", with(func(e *entry) { e.first, e.span = math.MaxInt64, 1 }), 1, 40, "offset span 1 from 9223372036854775807 overflows"},
		{"no batches", with(func(e *entry) { e.batches = 0 }), 1, 40, "batch count 0"},
		{"more batches than offsets", with(func(e *entry) { e.batches = 3 }), 1, 40, "batch count 3 for 1 offsets"},
		{"section too short", append(with(func(e *entry) { e.length = 5; e.size = 2 }), enc(def())...), 2, 45, "length 5 at position 8"},
		{"section beyond footer", with(func(e *entry) { e.length = 41 }), 1, 40, "length 41 at position 8 does not fit before the footer at 48"},
		{"codec", with(func(e *entry) { e.codec = 9 }), 1, 40, "unknown codec 9"},
		{"size below batches", with(func(e *entry) { e.batches, e.span, e.size = 2, 1, 1 }), 1, 40, "uncompressed size 1 for 2 batches"},
		{"raw size beyond length", with(func(e *entry) { e.size = 40 }), 1, 40, "exceeds length 40 without compression"},
		{"sections end early", with(func(*entry) {}), 1, 41, "sections end at 48, footer starts at 49"},
		{"bytes after entries", append(with(func(*entry) {}), 0), 1, 40, "1 bytes after the last entry"},
		{"truncated entry", append(append([]byte{}, topic...), enc(entry{batches: 1, length: 40, size: 20, noChecksum: true})...), 1, 40, "truncated checksum"},
		{"count beyond footer", with(func(*entry) {}), 3, 40, "section count 3 does not fit"},
		{"no sections", with(func(*entry) {}), 0, 40, "section count 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obj := sealObject(c.footer, c.count, c.sections)
			infos, err := ReadFooter(obj, int64(len(obj)))
			if c.reason == "" {
				require.NoError(t, err)
				require.Len(t, infos, 1)
				return
			}
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, c.reason)
		})
	}
}

func TestTrailerMalformed(t *testing.T) {
	obj, _ := encode(t, newEncoder(t, EncoderOptions{}), sampleSections(8))
	cases := []struct {
		name   string
		mutate func(trailer []byte)
		reason string
	}{
		{"magic", func(tr []byte) { tr[31] = 'X' }, `magic "ATCX"`},
		{"flags", func(tr []byte) { tr[26] = 1 }, "unknown flags 0x0001"},
		{"position beyond int64", func(tr []byte) { binary.LittleEndian.PutUint64(tr, math.MaxUint64) }, "do not end"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mut := append([]byte{}, obj...)
			c.mutate(mut[len(mut)-TrailerSize:])
			_, err := ReadFooter(mut, int64(len(mut)))
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, c.reason)
		})
	}
}

// TestVerifyRejectsSectionsOutOfOrder builds an object whose two sections of
// one partition go back in offsets and epochs, which Encode refuses to
// write, from two well-formed sections in swapped order and a matching
// footer.
func TestVerifyRejectsSectionsOutOfOrder(t *testing.T) {
	p := metadata.TopicPartition{Topic: "orders"}
	enc := newEncoder(t, EncoderOptions{})
	sections := []SectionInput{
		{Partition: p, Batches: []storage.Batch{rawBatch(1, 0, 9, 30)}},
		{Partition: p, Batches: []storage.Batch{rawBatch(2, 10, 19, 30)}},
	}
	obj, infos := encode(t, enc, sections)
	footer := raw(uint64(1), byte(0), "orders")
	for _, s := range []SectionInfo{infos[1], infos[0]} {
		footer = append(footer, raw(uint64(0), uint64(0), int64(s.Epoch), uint64(s.FirstOffset), uint64(s.LastOffset-s.FirstOffset),
			s.MaxTimestamp, uint64(s.Batches), uint64(s.Length), byte(s.Codec), uint64(s.UncompressedSize))...)
		footer = binary.LittleEndian.AppendUint64(footer, s.Checksum)
	}
	bad := sealObject(footer, 2, int(infos[0].Length+infos[1].Length))
	at := HeaderSize
	for _, s := range []SectionInfo{infos[1], infos[0]} {
		at += copy(bad[at:], obj[s.Position:s.Position+s.Length])
	}

	_, err := newDecoder(t, DecoderOptions{}).Verify(bad)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "epoch 1 from offset 0 follows an earlier section of the partition with epoch 2 up to offset 19")
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, 1, ce.Section)
}
