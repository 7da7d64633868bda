package combiner

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

// identity is what a section's checksum binds it to.
type identity struct {
	partition   metadata.TopicPartition
	epoch       int32
	first, last int64
}

func identityOf(s SectionInfo) identity {
	return identity{s.Partition, s.Epoch, s.FirstOffset, s.LastOffset}
}

// withIdentity returns s claiming id, as an entry that names s's byte
// range, length and checksum under another section's name would.
func withIdentity(s SectionInfo, id identity) SectionInfo {
	s.Partition, s.Epoch, s.FirstOffset, s.LastOffset = id.partition, id.epoch, id.first, id.last
	return s
}

// otherIdentities returns want with each identity field changed in turn,
// by one and by a high bit: what a damaged or misattributed entry would
// claim.
func otherIdentities(want SectionInfo) []SectionInfo {
	var out []SectionInfo
	add := func(f func(*SectionInfo)) {
		w := want
		f(&w)
		out = append(out, w)
	}
	add(func(w *SectionInfo) { w.Partition.Topic += "x" })
	add(func(w *SectionInfo) { w.Partition.TopicID[0] ^= 1 })
	add(func(w *SectionInfo) { w.Partition.TopicID[15] ^= 0x80 })
	add(func(w *SectionInfo) { w.Partition.Partition ^= 1 })
	add(func(w *SectionInfo) { w.Partition.Partition ^= 1 << 30 })
	add(func(w *SectionInfo) { w.Epoch ^= 1 })
	add(func(w *SectionInfo) { w.FirstOffset ^= 1 })
	add(func(w *SectionInfo) { w.FirstOffset ^= 1 << 62 })
	add(func(w *SectionInfo) { w.LastOffset ^= 1 })
	add(func(w *SectionInfo) { w.FirstOffset, w.LastOffset = w.FirstOffset+1, w.LastOffset+1 })
	return out
}

// TestSectionVerifiesOnlyUnderItsOwnEntry is the partition swap: a leader
// republishes partition A's real entry with its partition set to B. The
// follower of B fetches A's range, whose bytes are intact, and must reject
// them rather than append A's records to B's log. The same holds for every
// other identity field, alone or all together (B's identity on A's range).
func TestSectionVerifiesOnlyUnderItsOwnEntry(t *testing.T) {
	for _, codec := range codecs {
		t.Run(codec.String(), func(t *testing.T) {
			obj, infos := encode(t, newEncoder(t, EncoderOptions{Codec: codec, MinCompressBytes: 64}), sampleSections(11))
			dec := newDecoder(t, DecoderOptions{})
			ref := metadata.ObjectRef{Bucket: "b", Key: "k"}
			a, b := infos[0], infos[1]
			require.Equal(t, "orders", a.Partition.Topic)
			require.Equal(t, a.Partition.Topic, b.Partition.Topic)
			require.NotEqual(t, a.Partition.Partition, b.Partition.Partition)
			fetchedA := bytes.Clone(obj[a.Position : a.Position+a.Length])

			entry := a.Entry(ref, 5, 1)
			_, err := dec.DecodeSection(nil, fetchedA, SectionOf(entry))
			require.NoError(t, err, "A's own entry")

			swapped := entry
			swapped.Partition = b.Partition
			got, err := dec.DecodeSection(nil, fetchedA, SectionOf(swapped))
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, "not that section")
			require.ErrorContains(t, err, b.Partition.String())
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, b.Partition, ce.Partition, "the error names the partition the entry claimed")
			require.Empty(t, got)

			for i, s := range infos {
				section := obj[s.Position : s.Position+s.Length]
				for j, other := range infos {
					if identityOf(other) == identityOf(s) {
						continue
					}
					_, err := dec.DecodeSection(nil, section, withIdentity(s, identityOf(other)))
					require.ErrorIs(t, err, ErrCorrupt, "section %d under section %d's identity", i, j)
				}
				for _, w := range otherIdentities(s) {
					_, err := dec.DecodeSection(nil, section, w)
					require.ErrorIs(t, err, ErrCorrupt, "section %d as %s epoch %d offsets %d-%d", i, w.Partition, w.Epoch, w.FirstOffset, w.LastOffset)
				}
			}
		})
	}
}

// TestIdentityLayout pins the identity a checksum is seeded with to the
// layout the package documentation gives, so that another implementation
// can compute it: 16 bytes of topic ID, partition and epoch as 4 bytes,
// first and last offset as 8 bytes, little-endian, then the topic name.
func TestIdentityLayout(t *testing.T) {
	s := SectionInfo{
		Partition: metadata.TopicPartition{Topic: "orders", TopicID: [16]byte{0xAA, 15: 0xBB}, Partition: 7},
		Epoch:     3, FirstOffset: 100, LastOffset: 109,
	}
	var id []byte
	id = append(id, s.Partition.TopicID[:]...)
	id = binary.LittleEndian.AppendUint32(id, 7)
	id = binary.LittleEndian.AppendUint32(id, 3)
	id = binary.LittleEndian.AppendUint64(id, 100)
	id = binary.LittleEndian.AppendUint64(id, 109)
	id = append(id, "orders"...)
	d := xxhash.NewWithSeed(xxhash.Sum64(id))
	_, _ = d.Write([]byte("body"))
	require.Equal(t, d.Sum64(), sectionChecksum(sectionVersion, []byte("body"), &s))
	require.Equal(t, xxhash.Sum64([]byte("body")), sectionChecksum(formatVersion1, []byte("body"), &s), "version 1 hashes the bytes alone")
}

// TestEveryBitFlipInObject flips every bit of sample objects, one at a
// time. Verify must reject each result. Where the damaged object still
// lists its sections (the flip is inside one; the footer's checksum
// catches the rest), the listing must be the original one, and the
// damaged section must decode neither as itself nor as any other section
// of the object nor as a near miss of its own identity.
func TestEveryBitFlipInObject(t *testing.T) {
	dec := newDecoder(t, DecoderOptions{})
	for _, codec := range codecs {
		t.Run(codec.String(), func(t *testing.T) {
			obj, infos := encode(t, newEncoder(t, EncoderOptions{Codec: codec, MinCompressBytes: 64}), sampleSections(42))
			mut := bytes.Clone(obj)
			var listed, misattributed int
			for bit := range 8 * len(obj) {
				at := int64(bit / 8)
				mut[at] ^= 1 << (bit % 8)
				_, err := dec.Verify(mut)
				require.ErrorIs(t, err, ErrCorrupt, "flip of bit %d not detected", bit)
				if listing, err := ReadFooter(mut, int64(len(mut))); err == nil {
					listed++
					require.Equal(t, infos, listing, "bit %d: the footer verified but lists other sections", bit)
					for _, s := range infos {
						if at < s.Position || at >= s.Position+s.Length {
							continue
						}
						claims := append(otherIdentities(s), s)
						for _, o := range infos {
							claims = append(claims, withIdentity(s, identityOf(o)))
						}
						for _, c := range claims {
							if _, err := dec.DecodeSection(nil, mut[s.Position:s.Position+s.Length], c); err == nil {
								misattributed++
								t.Errorf("bit %d flipped: section at %d, written as %v, decodes as %v", bit, s.Position, identityOf(s), identityOf(c))
							}
						}
					}
				}
				mut[at] ^= 1 << (bit % 8)
			}
			require.Zero(t, misattributed)
			require.Positive(t, listed, "some flips land in sections, where the footer still lists them")
			t.Logf("%d single-bit flips of a %d-byte object: all rejected by Verify; %d left the footer intact, and no damaged section decoded under any identity", 8*len(obj), len(obj), listed)
		})
	}
}

// TestVersion1Sections: objects written before sections verified their
// identity are still read. Their checksum covers only their bytes, so
// their topic and partition go unchecked; epoch and offsets are still
// checked against the section's own batch table.
func TestVersion1Sections(t *testing.T) {
	dec := newDecoder(t, DecoderOptions{})
	obj := readCorpusBytes(t, "testdata/fuzz/FuzzVerify/v1-valid-zstd")
	infos, err := dec.Verify(obj)
	require.NoError(t, err)
	s := infos[0]
	section := obj[s.Position : s.Position+s.Length]
	require.Equal(t, byte(formatVersion1), section[0])
	other := s
	other.Partition.Partition++
	_, err = dec.DecodeSection(nil, section, other)
	require.NoError(t, err, "version 1 cannot tell partitions apart")
	other = s
	other.FirstOffset++
	_, err = dec.DecodeSection(nil, section, other)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, fmt.Sprintf("first offset %d, index says %d", s.FirstOffset, s.FirstOffset+1))
}

// TestVersionsMustAgree: header, trailer and sections of one object carry
// one format version, so a version-1 section cannot hide in a version-2
// object, where it would escape the identity check.
func TestVersionsMustAgree(t *testing.T) {
	dec := newDecoder(t, DecoderOptions{})
	v1 := readCorpusBytes(t, "testdata/fuzz/FuzzVerify/v1-valid-none")
	v2, _ := encode(t, newEncoder(t, EncoderOptions{}), sampleSections(42))
	setVersion := func(obj []byte, header, trailer uint16) []byte {
		obj = bytes.Clone(obj)
		binary.LittleEndian.PutUint16(obj[4:], header)
		binary.LittleEndian.PutUint16(obj[len(obj)-8:], trailer)
		return obj
	}
	cases := []struct {
		name   string
		obj    []byte
		reason string
	}{
		{"v1 header, v2 trailer", setVersion(v2, 1, 2), "corrupt trailer: format version 2, header says 1"},
		{"v2 header, v1 trailer", setVersion(v2, 2, 1), "corrupt trailer: format version 1, header says 2"},
		{"v1 sections in a v2 object", setVersion(v1, 2, 2), "section format version 1 in an object of version 2"},
		{"v2 sections in a v1 object", setVersion(v2, 1, 1), "section format version 2 in an object of version 1"},
		{"future header", setVersion(v2, 3, 2), "format version 3, this reader knows 1 and 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := dec.Verify(c.obj)
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, c.reason)
		})
	}
	_, err := dec.Verify(setVersion(v2, 3, 3))
	require.ErrorIs(t, err, ErrUnsupportedVersion)
}

func TestCheckHeader(t *testing.T) {
	header := func(magic string, version, flags uint16) []byte {
		h := []byte(magic)
		h = binary.LittleEndian.AppendUint16(h, version)
		return binary.LittleEndian.AppendUint16(h, flags)
	}
	cases := []struct {
		name    string
		in      []byte
		version int
		reason  string
	}{
		{"current", header("ATCO", FormatVersion, 0), FormatVersion, ""},
		{"version 1", header("ATCO", 1, 0), 1, ""},
		{"longer input", append(header("ATCO", 2, 0), "rest of the object"...), 2, ""},
		{"short", []byte("ATCO"), 0, "header of 4 bytes, want 8"},
		{"nil", nil, 0, "header of 0 bytes"},
		{"magic", header("ATCX", 2, 0), 0, `magic "ATCX"`},
		{"version 0", header("ATCO", 0, 0), 0, "format version 0, this reader knows 1 and 2"},
		{"future version", header("ATCO", 3, 0), 0, "format version 3"},
		{"flags", header("ATCO", 2, 1), 0, "unknown flags 0x0001"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := CheckHeader(c.in)
			if c.reason == "" {
				require.NoError(t, err)
				require.Equal(t, c.version, v)
				return
			}
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, c.reason)
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, PartHeader, ce.Part)
		})
	}
	_, err := CheckHeader(header("ATCO", 3, 0))
	require.ErrorIs(t, err, ErrUnsupportedVersion)
}
