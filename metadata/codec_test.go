package metadata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomized tests (0: derive one from the clock)")

// testSeed returns the seed for a randomized test and logs how to replay it.
func testSeed(t testing.TB) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	return seed
}

func mustEncode(t testing.TB, m *Message) []byte {
	t.Helper()
	b, err := AppendMessage(nil, m)
	require.NoError(t, err)
	return b
}

func TestRoundTripRandomMessages(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range 3000 {
		m := randomMessage(r)
		b, err := AppendMessage(nil, m)
		require.NoError(t, err, "seed %d, message %d", seed, i)
		got, err := DecodeMessage(b)
		require.NoError(t, err, "seed %d, message %d", seed, i)
		require.Equal(t, canonical(m), got, "seed %d, message %d", seed, i)
		again, err := AppendMessage(nil, got)
		require.NoError(t, err, "seed %d, message %d", seed, i)
		require.Equal(t, b, again, "seed %d, message %d: re-encoding the decoded message", seed, i)
	}
}

func TestRoundTripShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for name, m := range map[string]*Message{
		"typical":          typicalMessage(r, 100, 0.5),
		"single entry":     typicalMessage(r, 1, 0),
		"scattered":        scatteredMessage(r, 10, 100),
		"digests":          withDigests(r, typicalMessage(r, 100, 0.5), 0),
		"digests starting": withDigests(r, scatteredMessage(r, 10, 100), 0.3),
		"digests, markers and commits": func() *Message {
			m := withDigests(r, typicalMessage(r, 10, 0), 0.5)
			m.Entries[3].Digest, m.Entries[3].DigestFrom = 0, 0 // one entry without
			m.Markers = []EpochStart{{Partition: m.Entries[2].Partition, Epoch: 7, StartOffset: m.Entries[2].FirstOffset, LeaderBrokerID: 3}}
			m.Commits = []Commit{{Partition: m.Entries[1].Partition, Epoch: 7, Offset: m.Entries[1].FirstOffset}}
			return m
		}(),
		"markers only": {WriterBrokerID: 2, Markers: []EpochStart{
			{Partition: TopicPartition{Topic: "orders", Partition: 3}, Epoch: 6, StartOffset: 151, LeaderBrokerID: 2},
			{Partition: TopicPartition{Topic: "orders", Partition: 1}, Epoch: 6, StartOffset: 90, LeaderBrokerID: 2},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			b := mustEncode(t, m)
			got, err := DecodeMessage(b)
			require.NoError(t, err)
			require.Equal(t, canonical(m), got)
			again, err := AppendMessage(nil, got)
			require.NoError(t, err)
			require.Equal(t, b, again)
		})
	}
}

func TestEncodingIsIndependentOfInputOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m := scatteredMessage(r, 4, 30)
	m.Markers = []EpochStart{
		{Partition: TopicPartition{Topic: "b", Partition: 1}, Epoch: 2, StartOffset: 10},
		{Partition: TopicPartition{Topic: "a", Partition: 9}, Epoch: 2, StartOffset: 10},
		{Partition: TopicPartition{Topic: "a", Partition: 1}, Epoch: 3, StartOffset: 10},
		{Partition: TopicPartition{Topic: "a", Partition: 1}, Epoch: 2, StartOffset: 10},
	}
	want := mustEncode(t, m)
	for range 10 {
		r.Shuffle(len(m.Entries), func(i, j int) { m.Entries[i], m.Entries[j] = m.Entries[j], m.Entries[i] })
		r.Shuffle(len(m.Markers), func(i, j int) { m.Markers[i], m.Markers[j] = m.Markers[j], m.Markers[i] })
		before := canonical(m)
		require.Equal(t, want, mustEncode(t, m))
		require.Equal(t, before, canonical(m), "AppendMessage modified its message")
	}
}

func TestDecodeDoesNotAliasInput(t *testing.T) {
	m := typicalMessage(rand.New(rand.NewPCG(5, 6)), 3, 0)
	m.Entries[1].CustomMetadata = []byte("opaque")
	b := mustEncode(t, m)
	got, err := DecodeMessage(b)
	require.NoError(t, err)
	for i := range b {
		b[i] = 0xAA
	}
	require.Equal(t, canonical(m), got)
	// Appending to one entry's custom metadata must not overwrite the next.
	_ = append(got.Entries[1].CustomMetadata, 'x')
	require.Nil(t, got.Entries[2].CustomMetadata)
}

func TestAppendMessageKeepsPrefixAndFailsCleanly(t *testing.T) {
	m := typicalMessage(rand.New(rand.NewPCG(7, 8)), 5, 0.5)
	prefix := []byte("prefix")
	b, err := AppendMessage(prefix, m)
	require.NoError(t, err)
	require.Equal(t, prefix, b[:len(prefix)])
	got, err := DecodeMessage(b[len(prefix):])
	require.NoError(t, err)
	require.Equal(t, canonical(m), got)

	m.Entries[2].Length = 0
	out, err := AppendMessage(prefix, m)
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, prefix, out)
}

func TestAppendMessageRejectsInvalid(t *testing.T) {
	tp := TopicPartition{Topic: "orders", Partition: 4}
	valid := func() *Message {
		return &Message{Object: testObject, WriterBrokerID: 1, Entries: []Entry{
			{Partition: tp, RecordEpoch: 3, PublisherEpoch: 3, FirstOffset: 10, LastOffset: 19, Object: testObject,
				Position: 16, Length: 100, UncompressedSize: 100, WriterBrokerID: 1},
			{Partition: TopicPartition{Topic: "orders", Partition: 5}, RecordEpoch: 3, PublisherEpoch: 3, FirstOffset: 10, LastOffset: 19, Object: testObject,
				Position: 116, Length: 100, Codec: CodecZstd, UncompressedSize: 300, WriterBrokerID: 1},
		}}
	}
	_, err := AppendMessage(nil, valid())
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		mutate func(m *Message)
		want   string
	}{
		{"no topic", func(m *Message) { m.Entries[0].Partition.Topic = "" }, "entries[0] (-4): Partition has neither a topic name nor a topic id"},
		{"negative partition", func(m *Message) { m.Entries[1].Partition.Partition = -1 }, "entries[1] (orders--1): Partition.Partition -1 is negative"},
		{"negative record epoch", func(m *Message) { m.Entries[0].RecordEpoch = -1 }, "entries[0] (orders-4): RecordEpoch -1 is negative"},
		{"publisher below record", func(m *Message) { m.Entries[0].PublisherEpoch = 2 }, "PublisherEpoch 2 is below RecordEpoch 3"},
		{"negative first offset", func(m *Message) { m.Entries[0].FirstOffset = -1 }, "FirstOffset -1 is negative"},
		{"last below first", func(m *Message) { m.Entries[1].LastOffset = 9 }, "entries[1] (orders-5): LastOffset 9 is below FirstOffset 10"},
		{"negative position", func(m *Message) { m.Entries[0].Position = -1 }, "Position -1 is negative"},
		{"zero length", func(m *Message) { m.Entries[0].Length = 0 }, "Length 0 is not positive"},
		{"range overflow", func(m *Message) { m.Entries[1].Position = math.MaxInt64 - 10 }, "overflows int64"},
		{"bad codec", func(m *Message) { m.Entries[1].Codec = 9 }, "Codec codec(9) is not defined"},
		{"zero uncompressed size", func(m *Message) { m.Entries[1].UncompressedSize = 0 }, "entries[1] (orders-5): UncompressedSize 0 is not positive"},
		{"negative entry writer", func(m *Message) { m.Entries[1].WriterBrokerID = -2 }, "WriterBrokerID -2 is negative"},
		{"negative message writer", func(m *Message) { m.WriterBrokerID = -1 }, "message WriterBrokerID -1 is negative"},
		{"entry in another object", func(m *Message) { m.Entries[1].Object.Key = "other" }, "entries[1] (orders-5): Object wal--use1-az4--x-s3/other is not the message's object"},
		{"no bucket", func(m *Message) {
			m.Object.Bucket = ""
			for i := range m.Entries {
				m.Entries[i].Object = m.Object
			}
		}, "lacks a bucket or key"},
		{"overlapping ranges", func(m *Message) { m.Entries[1].Position = 115 }, "entries (orders-4) at [16, 116) and (orders-5) at [115, 215) overlap"},
		{"empty", func(m *Message) { m.Entries = nil; m.Object = ObjectRef{} }, "message has no entries and no markers"},
		{"markers-only with object", func(m *Message) {
			m.Entries = nil
			m.Markers = []EpochStart{{Partition: tp, Epoch: 1}}
		}, "markers-only message names object"},
		{"negative marker epoch", func(m *Message) { m.Markers = []EpochStart{{Partition: tp, Epoch: -1}} }, "markers[0] (orders-4): Epoch -1 is negative"},
		{"negative marker start", func(m *Message) { m.Markers = []EpochStart{{Partition: tp, StartOffset: -5}} }, "StartOffset -5 is negative"},
		{"negative marker leader", func(m *Message) { m.Markers = []EpochStart{{Partition: tp, LeaderBrokerID: -1}} }, "LeaderBrokerID -1 is negative"},
		{"marker without topic", func(m *Message) { m.Markers = []EpochStart{{}} }, "markers[0] (-0): Partition has neither"},
		{"digest chain without digest", func(m *Message) { m.Entries[1].DigestFrom = 1 }, "entries[1] (orders-5): DigestFrom 1 is set but Digest is 0"},
		{"digest chain beyond the entry", func(m *Message) { m.Entries[1].Digest, m.Entries[1].DigestFrom = 7, m.Entries[1].FirstOffset+1 },
			"entries[1] (orders-5): DigestFrom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := valid()
			tc.mutate(m)
			_, err := AppendMessage(nil, m)
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, tc.want)
			require.ErrorIs(t, m.Validate(), ErrInvalid)
		})
	}
	_, err = AppendMessage(nil, nil)
	require.ErrorIs(t, err, ErrInvalid)
}

func TestEntryAndMarkerValidate(t *testing.T) {
	e := Entry{Partition: TopicPartition{TopicID: [16]byte{1}}, Length: 1, UncompressedSize: 1}
	require.NoError(t, e.Validate())
	e.LastOffset = -1
	err := e.Validate()
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "LastOffset -1 is below FirstOffset 0")

	s := EpochStart{Partition: TopicPartition{Topic: "t"}}
	require.NoError(t, s.Validate())
	s.Epoch = -3
	require.ErrorContains(t, s.Validate(), "epoch start t-0: Epoch -3 is negative")
}

// decodeErr decodes b, requires a *DecodeError and returns it.
func decodeErr(t *testing.T, b []byte) *DecodeError {
	t.Helper()
	m, err := DecodeMessage(b)
	require.Nil(t, m)
	require.ErrorIs(t, err, ErrCorrupt)
	var de *DecodeError
	require.ErrorAs(t, err, &de)
	return de
}

// TestDecodeRejects edits version 1 encodings, which have no checksum, and
// checks that each is rejected for what it is, both as it is and sealed
// with a checksum as version 2 (which differs only in the version byte and
// the checksum, so offsets are the same).
func TestDecodeRejects(t *testing.T) {
	valid := asVersion1(mustEncode(t, typicalMessage(rand.New(rand.NewPCG(9, 10)), 4, 0.5)))
	encoded := asVersion2(mustEncode(t, &Message{Markers: []EpochStart{{Partition: TopicPartition{Topic: "t"}, Epoch: 1}}}))
	markers := asVersion1(encoded)
	// markers is: version 1, writer 0, 0 entries, 1 marker, 1 topic,
	// kind name, name "t", then topic 0, partition 0, epoch 1, start 0,
	// leader 0. Version 2 is version 2, the same, and the CRC-32C.
	require.Equal(t, []byte{1, 0, 0, 1, 1, topicHasName, 1, 't', 0, 0, 1, 0, 0}, markers)
	require.Equal(t, []byte{2, 0, 0, 1, 1, topicHasName, 1, 't', 0, 0, 1, 0, 0}, encoded[:len(encoded)-checksumSize])
	require.Equal(t, crc32c(encoded[:len(encoded)-checksumSize]), binary.LittleEndian.Uint32(encoded[len(encoded)-checksumSize:]))
	with := func(b []byte, at int, v ...byte) []byte {
		out := bytes.Clone(b)
		return append(out[:at], append(v, out[at+1:]...)...)
	}

	for _, tc := range []struct {
		name   string
		in     []byte
		offset int
		what   string
		reason string
	}{
		{"empty", nil, 0, "version", "empty input"},
		{"trailing byte", append(bytes.Clone(valid), 0), len(valid), "end of message", "1 trailing bytes"},
		{"huge entry count", []byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, 2, "entry count", "exceeds 0"},
		{"huge marker count", with(markers, 3, 0xff, 0xff, 0xff, 0x7f), 3, "marker count", "exceeds"},
		{"no entries or markers", with(markers, 3, 0), 2, "entry and marker counts", "no entries and no markers"},
		{"overlong varint", with(markers, 1, 0x80, 0x00), 1, "writer broker id", "not minimally encoded"},
		{"writer out of range", with(markers, 1, 0x80, 0x80, 0x80, 0x80, 0x08), 1, "writer broker id", "exceeds 2147483647"},
		{"bad topic kind", with(markers, 5, 4), 5, "topic kind", "kind 0x4"},
		{"empty topic name", with(markers, 6, 0), 6, "topic name", "empty name"},
		{"topic name too long", with(markers, 6, 100), 6, "topic name", "exceeds"},
		{"topic name not Kafka's", with(markers, 7, 0xff), 6, "topic name", "Kafka allows [a-zA-Z0-9._-]"},
		{"marker topic out of range", with(markers, 8, 1), 8, "marker topic", "exceeds 0"},
		{"truncated marker", markers[:len(markers)-1], len(markers) - 1, "marker leader", "truncated varint"},
		{"two topics, one unused", []byte{1, 0, 0, 1, 2, topicHasName, 1, 'a', topicHasName, 1, 'b', 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}, 4, "topic count", "exceeds 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			versions := [][]byte{tc.in}
			if len(tc.in) > 0 {
				versions = append(versions, asVersion2(tc.in))
			}
			for _, in := range versions {
				de := decodeErr(t, in)
				assert.Equal(t, tc.offset, de.Offset, "offset; error: %v", de)
				assert.Equal(t, tc.what, de.What, "item; error: %v", de)
				assert.ErrorContains(t, de, tc.reason)
				assert.NotErrorIs(t, de, ErrChecksum)
			}
		})
	}
}

func TestDecodeUnsupportedVersion(t *testing.T) {
	b := mustEncode(t, typicalMessage(rand.New(rand.NewPCG(11, 12)), 2, 0))
	for _, v := range []byte{0, messageVersion + 1, 0xFF} {
		b[0] = v
		de := decodeErr(t, b)
		require.ErrorIs(t, de, ErrUnsupportedVersion)
		require.Equal(t, 0, de.Offset)
		require.EqualError(t, de, fmt.Sprintf("metadata: corrupt message at byte 0 (version): metadata: unsupported message version %d (this build reads versions 1 to 5)", v))
	}
}

// TestDecodeChecksum: a version 2 message whose bytes changed after
// encoding is rejected with ErrChecksum before anything is parsed, even
// when the change leaves a well-formed message (here: another partition).
func TestDecodeChecksum(t *testing.T) {
	m := typicalMessage(rand.New(rand.NewPCG(17, 18)), 3, 0)
	b := asVersion2(mustEncode(t, m))
	other := canonical(m)
	other.Entries[0].Partition.Partition += 100
	forged := asVersion2(mustEncode(t, other))
	// The forged body with the original checksum: well-formed, wrong.
	forged = append(forged[:len(forged)-checksumSize], b[len(b)-checksumSize:]...)
	_, err := DecodeMessage(asVersion1(forged))
	require.NoError(t, err, "without the checksum the forgery would decode")
	de := decodeErr(t, forged)
	require.ErrorIs(t, de, ErrChecksum)
	require.Equal(t, "checksum", de.What)
	require.Equal(t, len(forged)-checksumSize, de.Offset)
	require.ErrorContains(t, de, "computed")

	// A version byte and less than a checksum.
	for n := range 1 + checksumSize {
		de := decodeErr(t, b[:n])
		require.Equal(t, 0, de.Offset)
		require.NotErrorIs(t, de, ErrChecksum)
	}
	de = decodeErr(t, b[:checksumSize])
	require.ErrorContains(t, de, "message of 4 bytes has no room for its 4-byte checksum")
}

// TestDecodeRejectsEveryTruncation checks that no proper prefix of a valid
// encoding decodes: the format has no optional tail a truncation could pass
// for.
func TestDecodeRejectsEveryTruncation(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, m := range []*Message{typicalMessage(r, 20, 0.5), scatteredMessage(r, 3, 20), randomMessage(r)} {
		b := mustEncode(t, m)
		for _, b := range [][]byte{b, asVersion1(b)} {
			for n := range len(b) {
				decodeErr(t, b[:n])
			}
		}
	}
}

// TestDecodeNonCanonicalRejected builds encodings that differ from what
// AppendMessage writes only in representation and checks each is refused,
// so that one message has exactly one encoding.
func TestDecodeNonCanonicalRejected(t *testing.T) {
	// One entry: version, writer 1, 1 entry, 0 markers, 1 topic "t", object
	// "" "b" "k", first position 0, then the columns.
	head := []byte{1, 1, 1, 0, 1, topicHasName, 1, 't', 0, 1, 'b', 1, 'k', 0}
	sum := make([]byte, 8)
	build := func(mask uint64, cols ...byte) []byte {
		b := append(bytes.Clone(head), byte(mask))
		if mask >= 0x80 {
			b = append(b[:len(b)-1], byte(mask)|0x80, byte(mask>>7))
		}
		return append(append(b, cols...), sum...)
	}
	// The canonical form: length column (zigzag 2 = 1, width 0) only.
	lengthOnly := uint64(1) << colLength
	m, err := DecodeMessage(build(lengthOnly, 2, 0))
	require.NoError(t, err)
	require.Equal(t, int64(1), m.Entries[0].Length)
	require.Equal(t, int64(1), m.Entries[0].UncompressedSize)

	for _, tc := range []struct {
		name   string
		in     []byte
		reason string
	}{
		{"zero column encoded", build(lengthOnly|1<<colSpan, 0, 0, 2, 0), "column of zeros is encoded instead of omitted"},
		{"width wider than needed", build(lengthOnly, 2, 1, 0), "bit width 1 is wider than the values need"},
		{"minimum not attained", build(lengthOnly, 0, 1, 1), "minimum 0 is not attained"},
		{"nonzero padding", build(lengthOnly, 0, 1, 0x03), "non-zero padding bits"},
		{"absent length column", build(0), "column is absent (all zero) but values must be at least 1"},
		{"gap column for one entry", build(lengthOnly|1<<colGap, 2, 0, 2, 0), "column is present but has no values"},
		{"codec out of range", build(lengthOnly|1<<colCodec, 2, 0, 6, 0), "values [3, 3] outside [0, 2]"},
		{"digestStarts column before version 5", build(1 << colDigestFrom), "exceeds 8191"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorContains(t, decodeErr(t, tc.in), tc.reason)
			assert.ErrorContains(t, decodeErr(t, asVersion2(tc.in)), tc.reason)
		})
	}
}

func TestDecodeErrorMatching(t *testing.T) {
	_, err := DecodeMessage([]byte{1})
	require.ErrorIs(t, err, ErrCorrupt)
	require.False(t, errors.Is(err, ErrUnsupportedVersion))
	require.False(t, errors.Is(err, ErrChecksum))
	require.EqualError(t, err, "metadata: corrupt message at byte 1 (writer broker id): truncated varint")
	_, err = DecodeMessage(asVersion2([]byte{1}))
	require.EqualError(t, err, "metadata: corrupt message at byte 1 (writer broker id): truncated varint")
	_, err = DecodeMessage([]byte{2, 0, 0, 0, 0})
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorIs(t, err, ErrChecksum)
	require.EqualError(t, err, "metadata: corrupt message at byte 1 (checksum): metadata: message checksum mismatch: computed b34623a6, message says 00000000")
	// The checksum is CRC-32C: its standard check value.
	require.Equal(t, uint32(0xE3069283), crc32c([]byte("123456789")))
}

func TestAllocations(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	m := typicalMessage(r, 100, 0.5)
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := AppendMessage(buf[:0], m); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "AppendMessage of a message in canonical order into a large enough buffer")
	withDigests(r, m, 0.5)
	allocs = testing.AllocsPerRun(20, func() {
		if _, err := AppendMessage(buf[:0], m); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "AppendMessage of a message with digests")

	// Decoding allocates the message, its entries and its strings,
	// independently of the number of entries.
	for _, tc := range []struct {
		n       int
		digests bool // version 5
	}{{1, false}, {10, false}, {100, false}, {1, true}, {100, true}} {
		n, m := tc.n, typicalMessage(r, tc.n, 0.5)
		if tc.digests {
			withDigests(r, m, 0.5)
		}
		b := mustEncode(t, m)
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := DecodeMessage(b); err != nil {
				t.Fatal(err)
			}
		})
		// Message, entries, AZ, bucket, key, topic name.
		require.Equal(t, 6.0, allocs, "DecodeMessage of %d entries", n)
	}
}

// TestMarkerColumns: a leader announcing many partitions at one epoch
// writes a few bytes a marker in version 4 (a byte where every column but
// the partition is constant; more here, where one marker of another topic
// widens the columns), against five or more in version 2, and both decode
// to the same markers.
func TestMarkerColumns(t *testing.T) {
	for _, tc := range []struct {
		name     string
		start    func(i int) int64
		maxBytes int // per marker, version 4
	}{
		{"empty logs", func(int) int64 { return 0 }, 3},
		{"logs with data", func(i int) int64 { return int64(i*7919) % 1_000_000 }, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Message{WriterBrokerID: 2}
			for i := range 2048 {
				m.Markers = append(m.Markers, EpochStart{Partition: TopicPartition{Topic: "orders", Partition: int32(3*i + 1)}, Epoch: 17, StartOffset: tc.start(i), LeaderBrokerID: 2})
			}
			m.Markers = append(m.Markers, EpochStart{Partition: TopicPartition{Topic: "payments", Partition: 5}, Epoch: 3, StartOffset: 9, LeaderBrokerID: 1})
			v4 := mustEncode(t, m)
			v2, err := appendMessage(nil, m, messageVersion2)
			require.NoError(t, err)
			t.Logf("%d markers: version 4 %d bytes, version 2 %d bytes", len(m.Markers), len(v4), len(v2))
			require.Less(t, len(v4), tc.maxBytes*len(m.Markers)+64)
			require.Greater(t, len(v2), 5*len(m.Markers))
			got4, err := DecodeMessage(v4)
			require.NoError(t, err)
			got2, err := DecodeMessage(v2)
			require.NoError(t, err)
			require.Equal(t, m.Markers, got4.Markers)
			require.Equal(t, got2, got4)
		})
	}
}
