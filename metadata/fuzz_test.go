package metadata

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzDecodeMessage from the current encoder")

const corpusDir = "testdata/fuzz/FuzzDecodeMessage"

// fuzzSeeds are the checked-in starting points for FuzzDecodeMessage:
// valid encodings of each message shape and a few inputs broken in the ways
// a real log could break them.
func fuzzSeeds(t testing.TB) map[string][]byte {
	r := rand.New(rand.NewPCG(20, 25))
	enc := func(m *Message) []byte {
		b, err := AppendMessage(nil, m)
		require.NoError(t, err)
		return b
	}
	typical := enc(typicalMessage(r, 5, 0.5))

	withCustom := typicalMessage(r, 3, 0)
	withCustom.Entries[0].CustomMetadata = []byte(`{"tier":"express"}`)
	withCustom.Entries[2].CustomMetadata = []byte{0, 1, 2}

	republished := typicalMessage(r, 4, 0)
	for i := range republished.Entries {
		republished.Entries[i].PublisherEpoch = 8
		republished.Entries[i].WriterBrokerID = 5
	}
	republished.WriterBrokerID = 5
	republished.Markers = []EpochStart{{Partition: TopicPartition{Topic: "orders", Partition: 2}, Epoch: 8, StartOffset: 5_000_151, LeaderBrokerID: 5}}

	withIDs := scatteredMessage(r, 3, 6)
	withIDs.Entries[0].Partition.Topic = ""
	withIDs.Entries[0].Partition.TopicID = [16]byte{0xfe, 0xed}

	truncated := bytes.Clone(typical[:len(typical)-3])
	trailing := append(bytes.Clone(typical), 0)
	future := bytes.Clone(typical)
	future[0] = messageVersion + 1
	flipped := bytes.Clone(typical)
	flipped[len(flipped)/2] ^= 0x10

	withCommits := typicalMessage(rand.New(rand.NewPCG(20, 26)), 3, 0) // its own source: the other seeds stay as they were
	withCommits.Commits = []Commit{
		{Partition: TopicPartition{Topic: "orders", Partition: 2}, Epoch: 7, Offset: 5_000_120},
		{Partition: TopicPartition{Topic: "orders", Partition: 0}, Epoch: 7, Offset: 4_999_990},
	}
	commitsOnly := &Message{WriterBrokerID: 4, Commits: []Commit{
		{Partition: TopicPartition{Topic: "orders", Partition: 1}, Epoch: 6, Offset: 151},
		{Partition: TopicPartition{TopicID: [16]byte{9}, Partition: 0}, Epoch: 1, Offset: 0},
	}, Markers: []EpochStart{{Partition: TopicPartition{Topic: "orders", Partition: 1}, Epoch: 6, StartOffset: 100, LeaderBrokerID: 4}}}
	// Version 3 with a commit count of zero, resealed: a message without
	// commits was written as version 2, so this one is not canonical.
	noCommits := asVersion(enc(commitsOnly), messageVersion3)
	noCommits = noCommits[:len(noCommits)-checksumSize]
	noCommits[4] = 0
	noCommits = binary.LittleEndian.AppendUint32(noCommits, crc32c(noCommits))

	// A topic name Kafka refuses (a byte that is not UTF-8), resealed:
	// only the name check stands in the way.
	badName := enc(&Message{WriterBrokerID: 2, Markers: []EpochStart{{Partition: TopicPartition{Topic: "orders", Partition: 1}, Epoch: 6, LeaderBrokerID: 2}}})
	badName = bytes.Replace(badName[:len(badName)-checksumSize], []byte("orders"), []byte("ord\xffrs"), 1)
	badName = binary.LittleEndian.AppendUint32(badName, crc32c(badName))

	// Digests (version 5), each from its own source so that the seeds
	// above stay as they were: every entry with one, some starting a
	// chain, with markers and commits; and two broken the ways version 5
	// can be, resealed: the digests block all zero (the message was
	// written in an earlier version) and a chain start whose digest is
	// zero.
	dr := rand.New(rand.NewPCG(20, 27))
	digests := withDigests(dr, typicalMessage(dr, 6, 0.5), 0)
	digestsAll := withDigests(dr, scatteredMessage(dr, 3, 8), 0.5)
	digestsAll.Entries[2].Digest, digestsAll.Entries[2].DigestFrom = 0, 0
	digestsAll.Markers = []EpochStart{{Partition: digestsAll.Entries[1].Partition, Epoch: 9, StartOffset: digestsAll.Entries[1].FirstOffset, LeaderBrokerID: 3}}
	digestsAll.Commits = []Commit{{Partition: digestsAll.Entries[0].Partition, Epoch: 9, Offset: digestsAll.Entries[0].LastOffset + 1}}
	// oneDigest's digest is its last 8 bytes before the checksum. Its
	// chain begins at the entry, so the digestFrom column is absent:
	// zeroed, the digest leaves a version 5 message without one.
	oneDigest := withDigests(dr, typicalMessage(dr, 1, 0), 1)
	zeroed := func(m *Message) []byte {
		b := bytes.Clone(enc(m)[:len(enc(m))-checksumSize])
		clear(b[len(b)-8:])
		return binary.LittleEndian.AppendUint32(b, crc32c(b))
	}
	noDigests := zeroed(oneDigest)
	// Begun one offset back, the column is present: zeroed, the digest
	// leaves a chain's start without one.
	oneDigest.Entries[0].DigestFrom = oneDigest.Entries[0].FirstOffset - 1
	zeroDigest := zeroed(oneDigest)

	seeds := map[string][]byte{
		"valid-digests":                   enc(digests),
		"valid-digests-markers-commits":   enc(digestsAll),
		"broken-digests-zero":             noDigests,
		"broken-digest-start-without-one": zeroDigest,
		"broken-topic-name":               badName,
		"valid-commits":                   enc(withCommits),
		"valid-commits-only":              enc(commitsOnly),
		"broken-zero-commits":             noCommits,
		"valid-typical":                   typical,
		"valid-markers-only":              enc(&Message{WriterBrokerID: 2, Markers: []EpochStart{{Partition: TopicPartition{Topic: "orders", Partition: 1}, Epoch: 6, StartOffset: 151, LeaderBrokerID: 2}, {Partition: TopicPartition{TopicID: [16]byte{9}, Partition: 0}, Epoch: 1, LeaderBrokerID: 2}}}),
		"valid-custom":                    enc(withCustom),
		"valid-republished":               enc(republished),
		"valid-topics":                    enc(scatteredMessage(r, 4, 12)),
		"valid-topic-ids":                 enc(withIDs),
		"broken-truncated":                truncated,
		"broken-trailing":                 trailing,
		"broken-version":                  future,
		"broken-checksum":                 flipped,
		// Version 1 has no checksum, so the count is what fails.
		"broken-huge-count": {messageVersion1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	}
	// Each valid message in the earlier versions, as earlier releases
	// wrote them: this build still reads them. Being unchecksummed, the
	// version 1 seeds also let the fuzzer reach the parser with mutations
	// a checksum would stop. Versions 1 and 2 have no commits section;
	// version 3 wrote a message without commits as version 2.
	for name, b := range seeds {
		switch {
		case !strings.HasPrefix(name, "valid-"):
		case strings.Contains(name, "digests"):
			// Only version 5 carries digests.
		case strings.Contains(name, "commits"):
			seeds["v3-"+name] = asVersion(b, messageVersion3)
		default:
			seeds["v1-"+name] = asVersion(b, messageVersion1)
			seeds["v2-"+name] = asVersion(b, messageVersion2)
		}
	}
	return seeds
}

// asVersion returns b's message encoded in version v. Bytes that do not
// decode are taken to differ from version 1 only in their version byte
// and checksum, and are given v's.
func asVersion(b []byte, v byte) []byte {
	m, err := DecodeMessage(b)
	if err != nil {
		out := append([]byte{v}, b[1:]...)
		if b[0] != messageVersion1 {
			out = out[:len(out)-checksumSize]
		}
		if v == messageVersion1 {
			return out
		}
		return binary.LittleEndian.AppendUint32(out, crc32c(out))
	}
	out, err := appendMessage(nil, m, v)
	if err != nil {
		panic(err)
	}
	return out
}

// asVersion1 returns b's message in version 1, which has no checksum.
func asVersion1(b []byte) []byte { return asVersion(b, messageVersion1) }

// asVersion2 returns b's message in version 2. Tests build messages by
// hand as version 1 and seal them with it.
func asVersion2(b []byte) []byte { return asVersion(b, messageVersion2) }

// TestFuzzSeedCorpus keeps the checked-in corpus equal to what the encoder
// writes today, so the corpus doubles as a golden record of the format: an
// unintended change to the encoding fails here. Run with -update-corpus
// after an intended change (which also needs a new version byte). The
// v1-valid-* seeds were written by the first release's encoder, and
// -update-corpus must leave them unchanged.
func TestFuzzSeedCorpus(t *testing.T) {
	seeds := fuzzSeeds(t)
	if *updateCorpus {
		require.NoError(t, os.MkdirAll(corpusDir, 0o755))
		for name, b := range seeds {
			content := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
			require.NoError(t, os.WriteFile(filepath.Join(corpusDir, name), []byte(content), 0o644))
		}
	}
	for name, want := range seeds {
		content, err := os.ReadFile(filepath.Join(corpusDir, name))
		require.NoError(t, err, "seed %s missing; run go test -run TestFuzzSeedCorpus -update-corpus", name)
		want := "go test fuzz v1\n[]byte(" + strconv.Quote(string(want)) + ")\n"
		require.Equal(t, want, string(content), "seed %s differs from the current encoding", name)
	}
	entries, err := os.ReadDir(corpusDir)
	require.NoError(t, err)
	require.Len(t, entries, len(seeds), "files in %s", corpusDir)
}

// FuzzDecodeMessage checks the decoder's contract on arbitrary input: an
// error matching ErrCorrupt, or a message that re-encodes to exactly the
// input (the encoding is canonical; an input of an earlier version
// re-encodes to itself in that version) and decodes again to itself. A
// message decodes as version 5 exactly when it has a digest.
func FuzzDecodeMessage(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			require.Nil(t, m)
			require.ErrorIs(t, err, ErrCorrupt)
			var de *DecodeError
			require.ErrorAs(t, err, &de)
			require.GreaterOrEqual(t, de.Offset, 0)
			require.LessOrEqual(t, de.Offset, len(b), "error offset past the input: %v", err)
			return
		}
		require.NoError(t, m.Validate(), "decoded message does not validate")
		hasDigest := slices.ContainsFunc(m.Entries, func(e Entry) bool { return e.Digest != 0 })
		require.Equal(t, b[0] == messageVersion, hasDigest, "version %d message with digests: %v", b[0], hasDigest)
		again, err := AppendMessage(nil, m)
		require.NoError(t, err)
		if b[0] != messageVersion {
			// An earlier version: canonical in its own layout, and
			// re-encoded in the current one.
			old, err := appendMessage(nil, m, b[0])
			require.NoError(t, err)
			require.Equal(t, b, old, "re-encoding in version %d differs from the input", b[0])
		} else {
			require.Equal(t, b, again, "re-encoding differs from the input")
		}
		m2, err := DecodeMessage(again)
		require.NoError(t, err)
		require.Equal(t, m, m2, fmt.Sprintf("decode of re-encoding, input %x", b))
	})
}
