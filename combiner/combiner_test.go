package combiner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// The package starts no goroutines, and neither may its zstd coders: the
// leak check at the end of the run proves it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var codecs = []metadata.Codec{metadata.CodecNone, metadata.CodecZstd, metadata.CodecS2}

func newEncoder(t testing.TB, opts EncoderOptions) *Encoder {
	t.Helper()
	e, err := NewEncoder(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Close()) })
	return e
}

func newDecoder(t testing.TB, opts DecoderOptions) *Decoder {
	t.Helper()
	d, err := NewDecoder(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return d
}

// sampleSections returns a small object's worth of sections: log-like
// batches that compress, random bytes that do not, a partition named only by
// topic ID, and a partition with two epochs.
func sampleSections(seed uint64) []SectionInput {
	g := newKafkaGen(seed)
	a := metadata.TopicPartition{Topic: "orders", Partition: 0}
	b := metadata.TopicPartition{Topic: "orders", Partition: 1}
	c := metadata.TopicPartition{TopicID: [16]byte{1, 2, 3}, Partition: 7}
	return []SectionInput{
		{Partition: a, Batches: []storage.Batch{g.batch(100, 5, 6), g.batch(106, 5, 4)}},
		{Partition: b, Batches: []storage.Batch{g.randomBatch(7, 3, 300)}},
		{Partition: c, Batches: []storage.Batch{g.batch(0, 0, 3), g.batch(5, 0, 2)}},
		{Partition: a, Batches: []storage.Batch{g.batch(110, 6, 3)}},
	}
}

func encode(t testing.TB, e *Encoder, sections []SectionInput) ([]byte, []SectionInfo) {
	t.Helper()
	obj, infos, err := e.Encode(nil, sections)
	require.NoError(t, err)
	return obj, infos
}

// requireSameBatches checks that decoded batches equal the input's.
func requireSameBatches(t testing.TB, want, got []storage.Batch, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		require.Equal(t, want[i].Epoch, got[i].Epoch, "%s: batch %d epoch", msg, i)
		require.Equal(t, want[i].FirstOffset, got[i].FirstOffset, "%s: batch %d first offset", msg, i)
		require.Equal(t, want[i].LastOffset, got[i].LastOffset, "%s: batch %d last offset", msg, i)
		require.Equal(t, want[i].MaxTimestamp, got[i].MaxTimestamp, "%s: batch %d max timestamp", msg, i)
		require.True(t, bytes.Equal(want[i].Data, got[i].Data), "%s: batch %d data", msg, i)
	}
}

func TestRoundTrip(t *testing.T) {
	cases := []struct {
		partitions, batches, records int
	}{
		{1, 1, 1},
		{1, 50, 4},
		{10, 3, 20},
		{100, 2, 10},
		{1000, 1, 2},
	}
	for _, codec := range codecs {
		for _, c := range cases {
			name := fmt.Sprintf("%s/partitions=%d/batches=%d/records=%d", codec, c.partitions, c.batches, c.records)
			t.Run(name, func(t *testing.T) {
				seed := uint64(c.partitions*1000 + c.batches*10 + c.records)
				sections := newKafkaGen(seed).workload(c.partitions, c.batches, c.records)
				enc := newEncoder(t, EncoderOptions{Codec: codec})
				dec := newDecoder(t, DecoderOptions{})
				obj, infos := encode(t, enc, sections)
				require.Len(t, infos, len(sections))

				verified, err := dec.Verify(obj)
				require.NoError(t, err, "seed %d", seed)
				require.Equal(t, infos, verified)
				verified, err = Verify(obj)
				require.NoError(t, err)
				require.Equal(t, infos, verified)
				listed, err := ReadFooter(obj, int64(len(obj)))
				require.NoError(t, err)
				require.Equal(t, infos, listed)

				compressed := 0
				for i, s := range infos {
					require.Equal(t, sections[i].Partition, s.Partition)
					// The section alone, copied out of the object, decodes.
					section := bytes.Clone(obj[s.Position : s.Position+s.Length])
					got, err := dec.DecodeSection(nil, section, s)
					require.NoError(t, err, "section %d, seed %d", i, seed)
					requireSameBatches(t, sections[i].Batches, got, fmt.Sprintf("section %d seed %d", i, seed))
					// So does it with only what a metadata entry carries.
					got, err = dec.DecodeSection(got[:0], section, SectionOf(s.Entry(metadata.ObjectRef{Key: "k"}, 9, 1)))
					require.NoError(t, err)
					requireSameBatches(t, sections[i].Batches, got, "from entry")
					if s.Codec != metadata.CodecNone {
						compressed++
					}
				}
				if codec != metadata.CodecNone && totalBytes(sections)/len(sections) >= 4*DefaultMinCompressBytes {
					assert.Positive(t, compressed, "log-like sections should compress")
				}
			})
		}
	}
}

func TestEncodeAppendsToDst(t *testing.T) {
	sections := sampleSections(1)
	enc := newEncoder(t, EncoderOptions{Codec: metadata.CodecZstd})
	alone, infos := encode(t, enc, sections)

	prefix := []byte("some earlier bytes")
	out, infos2, err := enc.Encode(bytes.Clone(prefix), sections)
	require.NoError(t, err)
	require.Equal(t, prefix, out[:len(prefix)])
	require.Equal(t, alone, out[len(prefix):], "the object must not depend on what precedes it in dst")
	require.Equal(t, infos, infos2, "positions are relative to the object")

	// Reusing the encoder gives the same bytes again.
	again, _ := encode(t, enc, sections)
	require.Equal(t, alone, again)
}

func TestCompressionSkip(t *testing.T) {
	g := newKafkaGen(7)
	logLike := metadata.TopicPartition{Topic: "logs", Partition: 0}
	random := metadata.TopicPartition{Topic: "random", Partition: 0}
	tiny := metadata.TopicPartition{Topic: "tiny", Partition: 0}
	sections := []SectionInput{
		{Partition: logLike, Batches: []storage.Batch{g.batch(0, 1, 50), g.batch(50, 1, 50)}},
		{Partition: random, Batches: []storage.Batch{g.randomBatch(0, 1, 8000), g.randomBatch(1, 1, 8000)}},
		{Partition: tiny, Batches: []storage.Batch{{Epoch: 1, FirstOffset: 0, LastOffset: 0, Data: bytes.Repeat([]byte("a"), 100)}}},
	}
	for _, codec := range []metadata.Codec{metadata.CodecZstd, metadata.CodecS2} {
		t.Run(codec.String(), func(t *testing.T) {
			enc := newEncoder(t, EncoderOptions{Codec: codec})
			obj, infos := encode(t, enc, sections)
			assert.Equal(t, codec, infos[0].Codec, "log-like data compresses")
			assert.Less(t, infos[0].Length, infos[0].UncompressedSize/2)
			assert.Equal(t, metadata.CodecNone, infos[1].Codec, "random data does not pay")
			assert.Equal(t, metadata.CodecNone, infos[2].Codec, "below MinCompressBytes, even though it compresses")
			_, err := newDecoder(t, DecoderOptions{}).Verify(obj)
			require.NoError(t, err)

			// A demand for 99% savings stores everything raw; a minimum
			// size of 64 compresses the tiny section too.
			_, infos = encode(t, newEncoder(t, EncoderOptions{Codec: codec, MinSavingRatio: 0.99}), sections)
			for _, s := range infos {
				assert.Equal(t, metadata.CodecNone, s.Codec, s.Partition.String())
			}
			_, infos = encode(t, newEncoder(t, EncoderOptions{Codec: codec, MinCompressBytes: 64}), sections)
			assert.Equal(t, codec, infos[2].Codec)
		})
	}
}

func TestEncodeInvalidInput(t *testing.T) {
	tp := metadata.TopicPartition{Topic: "t", Partition: 3}
	b := func(epoch int32, first, last int64) storage.Batch {
		return storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, Data: []byte("x")}
	}
	cases := []struct {
		name     string
		sections []SectionInput
		want     string
	}{
		{"no sections", nil, "no sections"},
		{"no batches", []SectionInput{{Partition: tp}}, "section 0 (t-3) has no batches"},
		{"no partition", []SectionInput{{Batches: []storage.Batch{b(1, 0, 0)}}}, "neither topic name nor topic ID"},
		{"negative partition", []SectionInput{{Partition: metadata.TopicPartition{Topic: "t", Partition: -1}, Batches: []storage.Batch{b(1, 0, 0)}}}, "negative partition"},
		{"empty data", []SectionInput{{Partition: tp, Batches: []storage.Batch{{FirstOffset: 1, LastOffset: 1}}}}, "batch 0 (offsets 1-1): no data"},
		{"negative offset", []SectionInput{{Partition: tp, Batches: []storage.Batch{b(1, -2, 0)}}}, "negative first offset"},
		{"last below first", []SectionInput{{Partition: tp, Batches: []storage.Batch{b(1, 5, 4)}}}, "batch 0 (offsets 5-4): last offset below first"},
		{"overlap", []SectionInput{{Partition: tp, Batches: []storage.Batch{b(1, 0, 4), b(1, 4, 6)}}}, "section 0 (t-3) batch 1 (offsets 4-6): first offset not above the previous batch's last offset 4"},
		{"mixed epochs", []SectionInput{{Partition: tp, Batches: []storage.Batch{b(1, 0, 4), b(2, 5, 6)}}}, "batch 1 (offsets 5-6): epoch 2 differs from the section's epoch 1"},
		{"partition goes back", []SectionInput{
			{Partition: tp, Batches: []storage.Batch{b(1, 10, 14)}},
			{Partition: tp, Batches: []storage.Batch{b(2, 14, 20)}},
		}, "section 1 (t-3, epoch 2, offsets from 14) does not follow section 0"},
		{"epoch goes back", []SectionInput{
			{Partition: tp, Batches: []storage.Batch{b(2, 10, 14)}},
			{Partition: tp, Batches: []storage.Batch{b(1, 15, 20)}},
		}, "section 1 (t-3, epoch 1"},
	}
	enc := newEncoder(t, EncoderOptions{Codec: metadata.CodecZstd})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := []byte("keep")
			out, infos, err := enc.Encode(dst, c.sections)
			require.ErrorIs(t, err, ErrInvalidInput)
			require.ErrorContains(t, err, c.want)
			require.Nil(t, infos)
			require.Equal(t, "keep", string(out))
		})
	}
	// A partition may come back in a later section of the same object with
	// a newer epoch, as after an epoch change.
	_, _, err := enc.Encode(nil, []SectionInput{
		{Partition: tp, Batches: []storage.Batch{b(1, 10, 14)}},
		{Partition: metadata.TopicPartition{Topic: "u"}, Batches: []storage.Batch{b(1, 0, 0)}},
		{Partition: tp, Batches: []storage.Batch{b(2, 15, 20)}},
	})
	require.NoError(t, err)
}

func TestOptionsValidation(t *testing.T) {
	bad := []struct {
		opts  EncoderOptions
		field string
	}{
		{EncoderOptions{Codec: 9}, "EncoderOptions.Codec"},
		{EncoderOptions{MinSavingRatio: -0.1}, "EncoderOptions.MinSavingRatio"},
		{EncoderOptions{MinSavingRatio: 1}, "EncoderOptions.MinSavingRatio"},
		{EncoderOptions{MinCompressBytes: -1}, "EncoderOptions.MinCompressBytes"},
		{EncoderOptions{ZstdLevel: 23}, "EncoderOptions.ZstdLevel"},
		{EncoderOptions{ZstdLevel: -1}, "EncoderOptions.ZstdLevel"},
	}
	for _, c := range bad {
		_, err := NewEncoder(c.opts)
		require.ErrorIs(t, err, ErrInvalidConfig)
		require.ErrorContains(t, err, c.field)
	}
	e := newEncoder(t, EncoderOptions{})
	assert.Equal(t, EncoderOptions{Codec: metadata.CodecNone, MinSavingRatio: DefaultMinSavingRatio,
		MinCompressBytes: DefaultMinCompressBytes, ZstdLevel: DefaultZstdLevel}, e.Options())

	_, err := NewDecoder(DecoderOptions{MaxUncompressedSize: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "DecoderOptions.MaxUncompressedSize")
	_, err = NewDecoder(DecoderOptions{Concurrency: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorContains(t, err, "DecoderOptions.Concurrency")
}

func TestClosed(t *testing.T) {
	enc, err := NewEncoder(EncoderOptions{Codec: metadata.CodecZstd})
	require.NoError(t, err)
	obj, infos := encode(t, enc, sampleSections(1))
	require.NoError(t, enc.Close())
	require.NoError(t, enc.Close())
	_, _, err = enc.Encode(nil, sampleSections(1))
	require.ErrorIs(t, err, ErrClosed)

	dec, err := NewDecoder(DecoderOptions{})
	require.NoError(t, err)
	require.NoError(t, dec.Close())
	require.NoError(t, dec.Close())
	_, err = dec.Verify(obj)
	require.ErrorIs(t, err, ErrClosed)
	_, err = dec.DecodeSection(nil, obj[infos[0].Position:infos[0].Position+infos[0].Length], infos[0])
	require.ErrorIs(t, err, ErrClosed)
}

func TestEntryRoundTrip(t *testing.T) {
	_, infos := encode(t, newEncoder(t, EncoderOptions{Codec: metadata.CodecS2}), sampleSections(2))
	ref := metadata.ObjectRef{AZ: "use1-az4", Bucket: "wal--use1-az4--x-s3", Key: "obj-1"}
	for _, s := range infos {
		e := s.Entry(ref, 11, 3)
		assert.Equal(t, ref, e.Object)
		assert.Equal(t, int32(11), e.PublisherEpoch)
		assert.Equal(t, int32(3), e.WriterBrokerID)
		assert.Equal(t, s.Epoch, e.RecordEpoch)
		back := SectionOf(e)
		want := s
		want.Batches = 0
		assert.Equal(t, want, back)
	}
}

func TestDecodeSectionRejectsMismatchedEntry(t *testing.T) {
	obj, infos := encode(t, newEncoder(t, EncoderOptions{Codec: metadata.CodecZstd}), sampleSections(3))
	dec := newDecoder(t, DecoderOptions{})
	s := infos[0]
	require.Equal(t, metadata.CodecZstd, s.Codec)
	section := obj[s.Position : s.Position+s.Length]
	cases := []struct {
		name   string
		mutate func(*SectionInfo)
		reason string
	}{
		{"checksum", func(w *SectionInfo) { w.Checksum++ }, "index says"},
		{"length", func(w *SectionInfo) { w.Length++ }, "index says"},
		{"codec", func(w *SectionInfo) { w.Codec = metadata.CodecS2 }, "codec zstd, index says s2"},
		{"bad codec", func(w *SectionInfo) { w.Codec = 7 }, "index says codec(7)"},
		// The identity is part of the checksum.
		{"partition", func(w *SectionInfo) { w.Partition.Partition = 1 }, "computed"},
		{"topic", func(w *SectionInfo) { w.Partition.Topic = "payments" }, "for payments-0 epoch 5 offsets 100-109"},
		{"epoch", func(w *SectionInfo) { w.Epoch = 4 }, "for orders-0 epoch 4 offsets 100-109, section says"},
		{"first offset", func(w *SectionInfo) { w.FirstOffset = 99 }, "epoch 5 offsets 99-109, section says"},
		{"last offset", func(w *SectionInfo) { w.LastOffset++ }, "epoch 5 offsets 100-110, section says"},
		{"max timestamp", func(w *SectionInfo) { w.MaxTimestamp-- }, "max timestamp"},
		{"uncompressed size", func(w *SectionInfo) { w.UncompressedSize-- }, "batches hold"},
		{"batches", func(w *SectionInfo) { w.Batches = 3 }, "2 batches, index says 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := s
			c.mutate(&want)
			dst := []storage.Batch{{Data: []byte("keep")}}
			got, err := dec.DecodeSection(dst, section, want)
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, c.reason)
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, PartSection, ce.Part)
			assert.Equal(t, want.Partition, ce.Partition)
			require.Equal(t, dst, got)
		})
	}
}

func TestDecodeSectionLimits(t *testing.T) {
	sections := sampleSections(4)
	small := newDecoder(t, DecoderOptions{MaxUncompressedSize: 100})
	for _, codec := range codecs {
		obj, infos := encode(t, newEncoder(t, EncoderOptions{Codec: codec}), sections)
		s := infos[0]
		_, err := small.DecodeSection(nil, obj[s.Position:s.Position+s.Length], s)
		if s.Codec == metadata.CodecNone {
			require.NoError(t, err, "uncompressed sections decode in place, whatever their size")
		} else {
			require.ErrorIs(t, err, ErrTooLarge)
			require.ErrorContains(t, err, "orders-0")
		}
	}
}

// sealSection builds a section by hand, with a valid checksum, so that
// tests can feed the parser and decompressors bytes no Encoder writes.
func sealSection(codec metadata.Codec, epoch int32, descs [][4]int64, payload []byte) ([]byte, SectionInfo) {
	b := []byte{sectionVersion, byte(codec)}
	b = appendVarint(b, int64(epoch))
	b = appendUvarint(b, uint64(len(descs)))
	info := SectionInfo{Epoch: epoch, Codec: codec, Partition: metadata.TopicPartition{Topic: "hand", Partition: 1}}
	for i, d := range descs {
		b = appendUvarint(b, uint64(d[0]))
		b = appendUvarint(b, uint64(d[1]))
		b = appendVarint(b, d[2])
		b = appendUvarint(b, uint64(d[3]))
		if i == 0 {
			info.FirstOffset = d[0]
			info.MaxTimestamp = d[2]
		}
		info.UncompressedSize += d[3]
	}
	info.Batches = len(descs)
	b = append(b, payload...)
	b = reseal(b, &info)
	info.Length = int64(len(b))
	info.Checksum = getUint64(b[len(b)-8:])
	return b, info
}

func TestDecompressionBomb(t *testing.T) {
	// 64 MiB of zeros compress to a few KiB. A section that claims to hold
	// 1000 bytes but carries them must fail without allocating for them.
	z, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	require.NoError(t, err)
	bomb := z.EncodeAll(make([]byte, 64<<20), nil)
	require.NoError(t, z.Close())
	require.Less(t, len(bomb), 64<<10)

	dec := newDecoder(t, DecoderOptions{})
	section, want := sealSection(metadata.CodecZstd, 1, [][4]int64{{0, 0, 5, 1000}}, bomb)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = dec.DecodeSection(nil, section, want)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<20), "decoding must stay near the claimed size")

	// Claiming the real size is refused by the default limit.
	section, want = sealSection(metadata.CodecZstd, 1, [][4]int64{{0, 0, 5, 64 << 20}}, bomb)
	_, err = newDecoder(t, DecoderOptions{MaxUncompressedSize: 32 << 20}).DecodeSection(nil, section, want)
	require.ErrorIs(t, err, ErrTooLarge)
}

func TestCorruptErrorFormat(t *testing.T) {
	e := &CorruptError{Part: PartSection, Section: 2, Partition: metadata.TopicPartition{Topic: "orders", Partition: 4},
		FirstOffset: 100, Reason: "checksum mismatch", Err: ErrUnsupportedVersion}
	assert.Equal(t, "combiner: corrupt section 2 (orders-4 from offset 100): checksum mismatch: combiner: unsupported format version", e.Error())
	assert.ErrorIs(t, e, ErrCorrupt)
	assert.ErrorIs(t, e, ErrUnsupportedVersion)
	assert.Equal(t, "combiner: corrupt footer: x", (&CorruptError{Part: PartFooter, Section: -1, FirstOffset: -1, Reason: "x"}).Error())
	var wrapped error = fmt.Errorf("fetching obj-1: %w", e)
	var ce *CorruptError
	require.True(t, errors.As(wrapped, &ce))
	assert.Equal(t, 2, ce.Section)
}

func appendVarint(b []byte, v int64) []byte   { return binary.AppendVarint(b, v) }
func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
func getUint64(b []byte) uint64               { return binary.LittleEndian.Uint64(b) }

// reseal appends the checksum of body as the section want describes,
// making it a section that passes the checksum check under want whatever
// its contents. The checksum is of the version body starts with (the
// current one for an empty body).
func reseal(body []byte, want *SectionInfo) []byte {
	version := byte(sectionVersion)
	if len(body) > 0 {
		version = body[0]
	}
	return binary.LittleEndian.AppendUint64(body, sectionChecksum(version, body, want))
}

// TestAllocationsDoNotGrowWithBatches pins the allocation behaviour the
// benchmarks report: encoding allocates only the returned index, and
// listing and decoding uncompressed sections allocates the index and the
// footer's topic names, however many batches the object holds. (Compressed
// codecs add one buffer per section, and their libraries' pools allocate
// after garbage collections, so they are left to the benchmarks.)
func TestAllocationsDoNotGrowWithBatches(t *testing.T) {
	measure := func(scale int) (encode, decode float64, topics int) {
		sections := newKafkaGen(1).workload(20, 2*scale, 3)
		e := newEncoder(t, EncoderOptions{})
		obj, _, err := e.Encode(nil, sections)
		require.NoError(t, err)
		encode = testing.AllocsPerRun(20, func() { obj, _, _ = e.Encode(obj[:0], sections) })

		d := newDecoder(t, DecoderOptions{})
		batches := make([]storage.Batch, 0, 2*scale)
		decode = testing.AllocsPerRun(20, func() {
			infos, err := ReadFooter(obj, int64(len(obj)))
			require.NoError(t, err)
			for _, s := range infos {
				batches, err = d.DecodeSection(batches[:0], obj[s.Position:s.Position+s.Length], s)
				require.NoError(t, err)
			}
		})
		names := map[metadata.TopicPartition]bool{}
		for _, s := range sections {
			p := s.Partition
			p.Partition = 0
			names[p] = true
		}
		return encode, decode, len(names)
	}
	enc1, dec1, topics := measure(1)
	enc10, dec10, _ := measure(10)
	assert.Equal(t, 1.0, enc1, "Encode allocates the []SectionInfo only")
	assert.Equal(t, enc1, enc10)
	assert.Equal(t, float64(2+topics), dec1, "the index, the topic table and one string per topic")
	assert.Equal(t, dec1, dec10)
}

// TestDecoderConcurrentUse decodes the sections of one object from several
// goroutines at once with one Decoder, more of them than its zstd
// concurrency, as a follower fetching ranges in parallel does.
func TestDecoderConcurrentUse(t *testing.T) {
	sections := newKafkaGen(9).workload(16, 3, 10)
	obj, infos := encode(t, newEncoder(t, EncoderOptions{Codec: metadata.CodecZstd}), sections)
	dec := newDecoder(t, DecoderOptions{Concurrency: 2})
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			for i := range infos {
				s := infos[(i+w)%len(infos)]
				got, err := dec.DecodeSection(nil, obj[s.Position:s.Position+s.Length], s)
				if err == nil && len(got) != len(sections[(i+w)%len(infos)].Batches) {
					err = fmt.Errorf("section %d: %d batches", (i+w)%len(infos), len(got))
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		require.NoError(t, <-errs)
	}
}

// DecodeSectionInto decompresses into the caller's buffer when it is large
// enough, so the batches alias it; a buffer too small is ignored; an
// uncompressed section aliases the section, whatever the buffer.
func TestDecodeSectionInto(t *testing.T) {
	sections := sampleSections(5)
	dec := newDecoder(t, DecoderOptions{})
	for _, codec := range codecs {
		obj, infos := encode(t, newEncoder(t, EncoderOptions{Codec: codec}), sections)
		for i, s := range infos {
			section := obj[s.Position : s.Position+s.Length]
			want, err := dec.DecodeSection(nil, section, s)
			require.NoError(t, err)
			for _, tc := range []struct {
				name    string
				buf     []byte
				aliases bool
			}{
				{"large enough", make([]byte, 3, s.UncompressedSize+10), s.Codec != metadata.CodecNone},
				{"too small", make([]byte, 0, max(s.UncompressedSize-1, 0)), false},
				{"nil", nil, false},
			} {
				got, err := dec.DecodeSectionInto(nil, section, s, tc.buf)
				require.NoError(t, err, "%s section %d %s", codec, i, tc.name)
				require.Equal(t, want, got, "%s section %d %s", codec, i, tc.name)
				inBuf := cap(tc.buf) > 0 && len(got) > 0 && &got[0].Data[:1][0] == &tc.buf[:1][0]
				require.Equal(t, tc.aliases, inBuf, "%s section %d %s: batches alias the buffer", codec, i, tc.name)
			}
		}
	}
}
