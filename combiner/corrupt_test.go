package combiner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

// TestEveryByteFlipDetected flips every byte of sample objects with several
// masks and checks that Verify rejects each result, naming the section when
// the flip is inside one, and that DecodeSection alone rejects flips inside
// its section.
func TestEveryByteFlipDetected(t *testing.T) {
	dec := newDecoder(t, DecoderOptions{})
	for _, codec := range codecs {
		t.Run(codec.String(), func(t *testing.T) {
			obj, infos := encode(t, newEncoder(t, EncoderOptions{Codec: codec, MinCompressBytes: 64}), sampleSections(42))
			_, err := dec.Verify(obj)
			require.NoError(t, err)
			// Both the decompressor and the in-place path are covered.
			require.Equal(t, codec, infos[0].Codec)
			require.Equal(t, metadata.CodecNone, infos[1].Codec)
			sectionAt := func(pos int64) int {
				for i, s := range infos {
					if pos >= s.Position && pos < s.Position+s.Length {
						return i
					}
				}
				return -1
			}
			mut := bytes.Clone(obj)
			for pos := range obj {
				for _, mask := range []byte{0xFF, 0x01, 0x80} {
					mut[pos] ^= mask
					_, err := dec.Verify(mut)
					require.Error(t, err, "flip %#02x at byte %d of %d not detected", mask, pos, len(obj))
					require.ErrorIs(t, err, ErrCorrupt, "byte %d", pos)
					if i := sectionAt(int64(pos)); i >= 0 {
						var ce *CorruptError
						require.ErrorAs(t, err, &ce)
						require.Equal(t, i, ce.Section, "byte %d: %v", pos, err)
						require.Equal(t, infos[i].Partition, ce.Partition, "byte %d", pos)
						s := infos[i]
						_, err = dec.DecodeSection(nil, mut[s.Position:s.Position+s.Length], s)
						require.ErrorIs(t, err, ErrCorrupt, "section %d byte %d", i, pos)
					}
					mut[pos] ^= mask
				}
			}
		})
	}
}

// TestTruncationsDetected cuts an object at every length, from either end.
func TestTruncationsDetected(t *testing.T) {
	dec := newDecoder(t, DecoderOptions{})
	obj, _ := encode(t, newEncoder(t, EncoderOptions{Codec: metadata.CodecS2, MinCompressBytes: 64}), sampleSections(5))
	for n := range len(obj) {
		_, err := dec.Verify(obj[:n])
		require.ErrorIs(t, err, ErrCorrupt, "prefix of %d bytes", n)
		_, err = dec.Verify(obj[len(obj)-n:])
		require.ErrorIs(t, err, ErrCorrupt, "suffix of %d bytes", n)
	}
	// And extended by a byte.
	_, err := dec.Verify(append(bytes.Clone(obj), 0))
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestReadFooterFromTails(t *testing.T) {
	for _, partitions := range []int{1, 30, 1000} {
		sections := newKafkaGen(uint64(partitions)).workload(partitions, 1, 1)
		obj, infos := encode(t, newEncoder(t, EncoderOptions{}), sections)
		size := int64(len(obj))
		footerLen := int64(binary.LittleEndian.Uint32(obj[len(obj)-TrailerSize+8:]))
		need := footerLen + TrailerSize
		if partitions <= 1000 {
			require.LessOrEqual(t, need, int64(DefaultTailSize), "DefaultTailSize holds %d sections' footer", partitions)
		}

		for _, n := range []int64{0, 1, TrailerSize - 1} {
			_, err := ReadFooter(obj[size-n:], size)
			var short *ShortTailError
			require.ErrorAs(t, err, &short)
			require.Equal(t, int64(TrailerSize), short.Need)
			require.Equal(t, n, short.Have)
		}
		for _, n := range []int64{TrailerSize, TrailerSize + 1, need - 1} {
			_, err := ReadFooter(obj[size-n:], size)
			var short *ShortTailError
			require.ErrorAs(t, err, &short, "tail of %d", n)
			require.Equal(t, need, short.Need)
			require.ErrorContains(t, err, "need the last")

			// Fetching what the error asks for is enough.
			got, err := ReadFooter(obj[size-short.Need:], size)
			require.NoError(t, err)
			require.Equal(t, infos, got)
		}
		for _, n := range []int64{need, need + 1, min(size, DefaultTailSize), size} {
			got, err := ReadFooter(obj[size-n:], size)
			require.NoError(t, err, "tail of %d", n)
			require.Equal(t, infos, got)
		}
		// The result does not alias the tail.
		tail := bytes.Clone(obj[size-need:])
		got, err := ReadFooter(tail, size)
		require.NoError(t, err)
		clear(tail)
		require.Equal(t, infos, got)
	}
}

func TestReadFooterRejects(t *testing.T) {
	obj, _ := encode(t, newEncoder(t, EncoderOptions{}), sampleSections(6))
	size := int64(len(obj))
	cases := []struct {
		name   string
		tail   []byte
		size   int64
		reason string
	}{
		{"object size too small", obj, 10, "below the minimum"},
		{"negative size", obj, -1, "below the minimum"},
		{"tail longer than object", obj, size - 1, "longer than the object"},
		{"size disagrees with trailer", obj[1:], size - 1, "do not end"},
		{"size larger than trailer says", obj, size + 1, "do not end"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadFooter(c.tail, c.size)
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, c.reason)
		})
	}

	// A version from the future is reported as such.
	future := bytes.Clone(obj)
	binary.LittleEndian.PutUint16(future[len(future)-8:], FormatVersion+1)
	_, err := ReadFooter(future, size)
	require.ErrorIs(t, err, ErrUnsupportedVersion)
	var ce *CorruptError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, PartTrailer, ce.Part)
	binary.LittleEndian.PutUint16(future[4:], FormatVersion+1)
	_, err = newDecoder(t, DecoderOptions{}).Verify(future)
	require.ErrorIs(t, err, ErrUnsupportedVersion)
}
