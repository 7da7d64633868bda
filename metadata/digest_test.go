package metadata

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDigestsChooseVersion5: a message is written as version 5 exactly
// when an entry has a Digest, and otherwise byte for byte as it was
// before digests existed (the earliest of versions 2 to 4 it needs), so
// that brokers of the earlier release still read it.
func TestDigestsChooseVersion5(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 5))
	for _, tc := range []struct {
		name    string
		markers bool
		commits bool
		without byte // version without digests
	}{
		{"entries", false, false, messageVersion2},
		{"commits", false, true, messageVersion3},
		{"markers", true, false, messageVersion4},
		{"markers and commits", true, true, messageVersion4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := typicalMessage(r, 20, 0.5)
			if tc.markers {
				m.Markers = []EpochStart{{Partition: m.Entries[4].Partition, Epoch: 7, StartOffset: m.Entries[4].FirstOffset, LeaderBrokerID: 3}}
			}
			if tc.commits {
				m.Commits = []Commit{{Partition: m.Entries[9].Partition, Epoch: 7, Offset: m.Entries[9].FirstOffset}}
			}
			plain := mustEncode(t, m)
			require.Equal(t, tc.without, plain[0], "seed %d", seed)
			old, err := appendMessage(nil, m, tc.without)
			require.NoError(t, err)
			require.Equal(t, old, plain, "seed %d: without digests the encoding is the earlier release's", seed)

			withDigests(r, m, 0.25)
			b := mustEncode(t, m)
			require.Equal(t, byte(messageVersion), b[0], "seed %d", seed)
			got, err := DecodeMessage(b)
			require.NoError(t, err, "seed %d", seed)
			require.Equal(t, canonical(m), got, "seed %d", seed)
			t.Logf("%d entries: %d bytes without digests, %d with", len(m.Entries), len(plain), len(b))
			// Eight bytes an entry, and the digestFrom column's header
			// and at most 64 bits an entry.
			require.LessOrEqual(t, len(b)-len(plain), 16*len(m.Entries)+11)

			_, err = appendMessage(nil, m, messageVersion4)
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, "version 4 messages carry no digests")
		})
	}
}

// TestDecodeNonCanonicalDigests builds version 5 encodings by hand that
// differ from what AppendMessage writes and checks each is refused: no
// digests where version 5 promises some, a chain start without a digest,
// and the generic column rules applied to the digestFrom column.
func TestDecodeNonCanonicalDigests(t *testing.T) {
	// One entry: version 5, writer 1, 1 entry, 0 markers, 0 commits, 1
	// topic "t", object "" "b" "k", first position 0, then the column
	// mask, the columns, the checksum and the digest.
	head := []byte{messageVersion, 1, 1, 0, 0, 1, topicHasName, 1, 't', 0, 1, 'b', 1, 'k', 0}
	seal := func(b []byte) []byte { return binary.LittleEndian.AppendUint32(b, crc32c(b)) }
	build := func(mask uint64, digest uint64, cols ...byte) []byte {
		b := binary.AppendUvarint(bytes.Clone(head), mask)
		b = append(b, cols...)
		b = binary.LittleEndian.AppendUint64(b, 0x1234) // checksum
		return seal(binary.LittleEndian.AppendUint64(b, digest))
	}
	lengthOnly := uint64(1) << colLength
	// With the first offset 10 (zigzag 20, width 0) and a chain begun 3
	// back (zigzag 6, width 0).
	from := lengthOnly | 1<<colFirstOffset | 1<<colDigestFrom
	// The canonical forms: length column (zigzag 2 = 1, width 0), with
	// the chain begun at the entry (no digestFrom column), and begun
	// before it.
	m, err := DecodeMessage(build(lengthOnly, 7, 2, 0))
	require.NoError(t, err)
	require.Equal(t, uint64(7), m.Entries[0].Digest)
	require.Equal(t, m.Entries[0].FirstOffset, m.Entries[0].DigestFrom)
	m, err = DecodeMessage(build(from, 7, 20, 0, 2, 0, 6, 0))
	require.NoError(t, err)
	require.Equal(t, int64(10), m.Entries[0].FirstOffset)
	require.Equal(t, int64(7), m.Entries[0].DigestFrom)
	require.Equal(t, build(from, 7, 20, 0, 2, 0, 6, 0), mustEncode(t, m))

	for _, tc := range []struct {
		name   string
		in     []byte
		what   string
		reason string
	}{
		{"no digest", build(lengthOnly, 0, 2, 0), "digests", "version 5 message has no nonzero digest"},
		{"chain start without digest", build(from, 0, 20, 0, 2, 0, 6, 0), "column digestFrom", "entry 0 has a digest chain's start but no digest"},
		{"chain begun below offset 0", build(from, 7, 20, 0, 2, 0, 22, 0), "column digestFrom", "entry 0's digest chain begins 11 below its first offset 10"},
		{"digestFrom zeros encoded", build(from, 7, 20, 0, 2, 0, 0, 0), "column digestFrom", "column of zeros is encoded instead of omitted"},
		{"digestFrom negative", build(from, 7, 20, 0, 2, 0, 1, 0), "column digestFrom", "outside [0,"},
		{"unknown column bit", build(1<<numColumns, 7), "column mask", "exceeds 16383"},
		{"truncated digest", seal(build(lengthOnly, 7, 2, 0)[:len(head)+3+8+7]), "digests", "8 bytes needed, 7 left"},
		{"no entries", seal([]byte{messageVersion, 0, 0, 1, 0, 1, topicHasName, 1, 't', 0, 0}), "entry count", "version 5 message has no entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			de := decodeErr(t, tc.in)
			assert.Equal(t, tc.what, de.What, "error: %v", de)
			assert.ErrorContains(t, de, tc.reason)
			assert.NotErrorIs(t, de, ErrChecksum)
		})
	}
}

// TestBrokenDigestSeeds: the fuzz corpus's broken version 5 seeds fail for
// the reason they were built for, not an earlier one.
func TestBrokenDigestSeeds(t *testing.T) {
	seeds := fuzzSeeds(t)
	for name, reason := range map[string]string{
		"broken-digests-zero":             "version 5 message has no nonzero digest",
		"broken-digest-start-without-one": "entry 0 has a digest chain's start but no digest",
	} {
		assert.ErrorContains(t, decodeErr(t, seeds[name]), reason, name)
	}
}
