package combiner

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

// The seed corpora under testdata/fuzz are written by
//
//	go test ./combiner -run TestFuzzCorpus -write-corpus
//
// and checked in. Without the flag, TestFuzzCorpus checks that the valid
// objects among them still verify and decode: they are objects written by
// earlier builds, so the test guards format compatibility.
var writeCorpus = flag.Bool("write-corpus", false, "rewrite the checked-in fuzz seed corpora")

// fuzzDecoder bounds decompression at 1 MiB so that fuzzing stays fast; the
// limit is part of what is being tested.
func fuzzDecoder(f *testing.F) *Decoder {
	d, err := NewDecoder(DecoderOptions{MaxUncompressedSize: 1 << 20, Concurrency: 1})
	require.NoError(f, err)
	f.Cleanup(func() { _ = d.Close() })
	return d
}

// corpusObjects returns small valid objects, one per codec, each with
// compressed and raw sections.
func corpusObjects(t testing.TB) map[string][]byte {
	objs := map[string][]byte{}
	for _, codec := range codecs {
		e, err := NewEncoder(EncoderOptions{Codec: codec, MinCompressBytes: 64})
		require.NoError(t, err)
		obj, _, err := e.Encode(nil, sampleSections(42))
		require.NoError(t, err)
		require.NoError(t, e.Close())
		objs["valid-"+codec.String()] = obj
	}
	return objs
}

type sectionSeed struct {
	section []byte
	reseal  bool
	want    SectionInfo
}

// sectionSeeds are the sections of the corpus objects, and of the
// checked-in objects of format version 1, whole, truncated and resealed.
func sectionSeeds(t testing.TB) map[string]sectionSeed {
	seeds := map[string]sectionSeed{}
	objects := corpusObjects(t)
	for _, codec := range codecs {
		name := "v1-valid-" + codec.String()
		objects[name] = readCorpusBytes(t, filepath.Join("testdata", "fuzz", "FuzzVerify", name))
	}
	for name, obj := range objects {
		infos, err := ReadFooter(obj, int64(len(obj)))
		require.NoError(t, err)
		for i, s := range infos {
			sec := obj[s.Position : s.Position+s.Length]
			seeds[fmt.Sprintf("%s-section%d", name, i)] = sectionSeed{sec, false, s}
			seeds[fmt.Sprintf("%s-section%d-truncated", name, i)] = sectionSeed{sec[:len(sec)/2], true, s}
			seeds[fmt.Sprintf("%s-section%d-resealed", name, i)] = sectionSeed{sec, true, s}
		}
	}
	return seeds
}

func FuzzDecodeSection(f *testing.F) {
	for _, s := range sectionSeeds(f) {
		w := s.want
		f.Add(s.section, s.reseal, w.Partition.TopicID[:], w.Partition.Topic, w.Partition.Partition, uint8(w.Codec), w.Epoch, w.FirstOffset, w.LastOffset, w.MaxTimestamp, w.UncompressedSize, w.Batches)
	}
	dec := fuzzDecoder(f)
	f.Fuzz(func(t *testing.T, section []byte, resealIt bool, topicID []byte, topic string, partition int32, codec uint8, epoch int32, first, last, maxTS, size int64, batches int) {
		want := SectionInfo{
			Partition: metadata.TopicPartition{Topic: topic, Partition: partition}, Codec: metadata.Codec(codec), Epoch: epoch,
			FirstOffset: first, LastOffset: last, MaxTimestamp: maxTS, UncompressedSize: size, Batches: batches,
			Length: int64(len(section)),
		}
		copy(want.Partition.TopicID[:], topicID)
		if resealIt && len(section) >= checksumSize {
			// Fix the checksum, for want's identity, so the parser and
			// decompressors see the mutated bytes.
			section = reseal(bytes.Clone(section[:len(section)-checksumSize]), &want)
		}
		if len(section) >= checksumSize {
			want.Checksum = getUint64(section[len(section)-checksumSize:])
		}
		got, err := dec.DecodeSection(nil, section, want)
		// DecodeSectionInto, given a buffer of exactly the claimed size,
		// decodes alike and writes nothing past the buffer's capacity.
		if size >= 0 && size <= 1<<20 {
			backing := bytes.Repeat([]byte{0xa5}, int(size)+64)
			into, intoErr := dec.DecodeSectionInto(nil, section, want, backing[:0:size])
			if (err == nil) != (intoErr == nil) || err == nil && !reflect.DeepEqual(got, into) {
				t.Fatalf("DecodeSectionInto: %v, %d batches; DecodeSection: %v, %d batches", intoErr, len(into), err, len(got))
			}
			if !bytes.Equal(backing[size:], bytes.Repeat([]byte{0xa5}, 64)) {
				t.Fatalf("DecodeSectionInto wrote past the %d bytes it was given", size)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		// A section of the current version that decodes under want's
		// identity decodes under no other.
		if section[0] == sectionVersion {
			for _, other := range otherIdentities(want) {
				if _, err := dec.DecodeSection(nil, section, other); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("section of %s epoch %d offsets %d-%d also decodes as %s epoch %d offsets %d-%d: %v",
						want.Partition, want.Epoch, want.FirstOffset, want.LastOffset, other.Partition, other.Epoch, other.FirstOffset, other.LastOffset, err)
				}
			}
		}
		// A section that decodes agrees with what the index said.
		if len(got) == 0 || (batches != 0 && len(got) != batches) {
			t.Fatalf("%d batches, want %d", len(got), batches)
		}
		var total int64
		for i, b := range got {
			if b.Epoch != epoch || len(b.Data) == 0 || b.LastOffset < b.FirstOffset || (i > 0 && b.FirstOffset <= got[i-1].LastOffset) {
				t.Fatalf("batch %d inconsistent: %+v", i, b)
			}
			total += int64(len(b.Data))
		}
		if got[0].FirstOffset != first || got[len(got)-1].LastOffset != last || total != size {
			t.Fatalf("offsets %d-%d size %d, want %d-%d size %d", got[0].FirstOffset, got[len(got)-1].LastOffset, total, first, last, size)
		}
	})
}

// resealFooter recomputes the trailer's footer checksum, if the trailer's
// footer length fits in object.
func resealFooter(object []byte) []byte {
	if len(object) < TrailerSize {
		return object
	}
	object = bytes.Clone(object)
	trailer := object[len(object)-TrailerSize:]
	n := int(binary.LittleEndian.Uint32(trailer[8:12]))
	if n > len(object)-TrailerSize {
		return object
	}
	footer := object[len(object)-TrailerSize-n : len(object)-TrailerSize]
	binary.LittleEndian.PutUint64(trailer[16:24], footerChecksum(footer, trailer[:16]))
	return object
}

type footerSeed struct {
	tail   []byte
	size   int64
	reseal bool
}

func footerSeeds(t testing.TB) map[string]footerSeed {
	seeds := map[string]footerSeed{}
	for name, obj := range corpusObjects(t) {
		size := int64(len(obj))
		need := int64(binary.LittleEndian.Uint32(obj[len(obj)-TrailerSize+8:])) + TrailerSize
		seeds[name+"-whole"] = footerSeed{obj, size, false}
		seeds[name+"-exact-tail"] = footerSeed{obj[size-need:], size, false}
		seeds[name+"-short-tail"] = footerSeed{obj[size-need+1:], size, false}
		seeds[name+"-trailer-only"] = footerSeed{obj[size-TrailerSize:], size, false}
		seeds[name+"-resealed"] = footerSeed{obj[size-need:], size, true}
		seeds[name+"-wrong-size"] = footerSeed{obj, size + 7, false}
	}
	return seeds
}

func FuzzReadFooter(f *testing.F) {
	for _, s := range footerSeeds(f) {
		f.Add(s.tail, s.size, s.reseal)
	}
	f.Fuzz(func(t *testing.T, tail []byte, size int64, resealIt bool) {
		if resealIt {
			tail = resealFooter(tail)
		}
		infos, err := ReadFooter(tail, size)
		if err != nil {
			var short *ShortTailError
			if errors.As(err, &short) {
				if short.Need <= int64(len(tail)) || short.Need > size {
					t.Fatalf("ShortTailError needs %d with %d of %d bytes", short.Need, len(tail), size)
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		// The sections tile the object from the header on.
		pos := int64(HeaderSize)
		for i, s := range infos {
			if s.Position != pos || s.Length < minSectionSize || s.LastOffset < s.FirstOffset || s.Batches < 1 || !s.Codec.Valid() {
				t.Fatalf("section %d inconsistent: %+v", i, s)
			}
			pos += s.Length
		}
		if pos > size-TrailerSize {
			t.Fatalf("sections end at %d in an object of %d", pos, size)
		}
	})
}

func verifySeeds(t testing.TB) map[string]footerSeed {
	seeds := map[string]footerSeed{}
	for name, obj := range corpusObjects(t) {
		seeds[name] = footerSeed{tail: obj}
		seeds[name+"-half"] = footerSeed{tail: obj[:len(obj)/2]}
		seeds[name+"-no-last-byte"] = footerSeed{tail: obj[:len(obj)-1]}
		seeds[name+"-no-header"] = footerSeed{tail: obj[HeaderSize:]}
		mut := bytes.Clone(obj)
		mut[len(mut)/2] ^= 0xFF
		seeds[name+"-flipped"] = footerSeed{tail: mut}
		seeds[name+"-resealed"] = footerSeed{tail: obj, reseal: true}
	}
	return seeds
}

func FuzzVerify(f *testing.F) {
	for _, s := range verifySeeds(f) {
		f.Add(s.tail, s.reseal)
	}
	dec := fuzzDecoder(f)
	enc, err := NewEncoder(EncoderOptions{})
	require.NoError(f, err)
	f.Cleanup(func() { _ = enc.Close() })
	f.Fuzz(func(t *testing.T, object []byte, resealIt bool) {
		if resealIt {
			object = resealFooter(object)
		}
		infos, err := dec.Verify(object)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		// A verified object's batches re-encode into an object with the
		// same index (but for codecs, and so lengths and checksums).
		sections := make([]SectionInput, len(infos))
		for i, s := range infos {
			b, err := dec.DecodeSection(nil, object[s.Position:s.Position+s.Length], s)
			if err != nil {
				t.Fatalf("section %d verified but does not decode: %v", i, err)
			}
			sections[i] = SectionInput{Partition: s.Partition, Batches: b}
		}
		again, infos2, err := enc.Encode(nil, sections)
		if err != nil {
			t.Fatalf("verified object does not re-encode: %v", err)
		}
		if _, err := dec.Verify(again); err != nil {
			t.Fatalf("re-encoded object does not verify: %v", err)
		}
		for i := range infos {
			a, b := infos[i], infos2[i]
			if a.Partition != b.Partition || a.Epoch != b.Epoch || a.FirstOffset != b.FirstOffset || a.LastOffset != b.LastOffset ||
				a.MaxTimestamp != b.MaxTimestamp || a.UncompressedSize != b.UncompressedSize || a.Batches != b.Batches {
				t.Fatalf("section %d: %+v re-encoded as %+v", i, a, b)
			}
		}
	})
}

// corpusValue formats one value in the "go test fuzz v1" file format.
func corpusValue(v any) string {
	switch v := v.(type) {
	case []byte:
		return fmt.Sprintf("[]byte(%q)", v)
	case string:
		return fmt.Sprintf("string(%q)", v)
	default:
		return fmt.Sprintf("%T(%v)", v, v)
	}
}

func writeCorpusFile(t *testing.T, target, name string, values ...any) {
	dir := filepath.Join("testdata", "fuzz", target)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range values {
		b.WriteString(corpusValue(v))
		b.WriteString("\n")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644))
}

// readCorpusBytes returns the first value of a corpus file, a []byte.
func readCorpusBytes(t testing.TB, path string) []byte {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	require.True(t, sc.Scan())
	require.Equal(t, "go test fuzz v1", sc.Text())
	require.True(t, sc.Scan())
	line := sc.Text()
	require.True(t, strings.HasPrefix(line, "[]byte(") && strings.HasSuffix(line, ")"), path)
	s, err := strconv.Unquote(line[len("[]byte(") : len(line)-1])
	require.NoError(t, err, path)
	return []byte(s)
}

func TestFuzzCorpus(t *testing.T) {
	if *writeCorpus {
		for name, s := range sectionSeeds(t) {
			w := s.want
			writeCorpusFile(t, "FuzzDecodeSection", name, s.section, s.reseal, w.Partition.TopicID[:], w.Partition.Topic, w.Partition.Partition, uint8(w.Codec), w.Epoch, w.FirstOffset, w.LastOffset, w.MaxTimestamp, w.UncompressedSize, w.Batches)
		}
		for name, s := range footerSeeds(t) {
			writeCorpusFile(t, "FuzzReadFooter", name, s.tail, s.size, s.reseal)
		}
		for name, s := range verifySeeds(t) {
			writeCorpusFile(t, "FuzzVerify", name, s.tail, s.reseal)
		}
	}
	// The checked-in valid objects, written by earlier builds, still
	// verify and hold the sample batches: v1-valid-* in format version 1,
	// valid-* in the current version, which is also what this build
	// writes, byte for byte.
	dec := newDecoder(t, DecoderOptions{})
	current := corpusObjects(t)
	for _, codec := range codecs {
		for version, name := range map[uint16]string{formatVersion1: "v1-valid-" + codec.String(), FormatVersion: "valid-" + codec.String()} {
			path := filepath.Join("testdata", "fuzz", "FuzzVerify", name)
			obj := readCorpusBytes(t, path)
			require.Equal(t, version, binary.LittleEndian.Uint16(obj[4:]), path)
			if version == FormatVersion {
				require.Equal(t, current[name], obj, "%s differs from what this build writes; a format change needs a new version", path)
			}
			infos, err := dec.Verify(obj)
			require.NoError(t, err, path)
			want := sampleSections(42)
			require.Len(t, infos, len(want))
			for i, s := range infos {
				got, err := dec.DecodeSection(nil, obj[s.Position:s.Position+s.Length], s)
				require.NoError(t, err)
				require.Equal(t, want[i].Partition, s.Partition)
				requireSameBatches(t, want[i].Batches, got, fmt.Sprintf("%s section %d", path, i))
			}
		}
	}
}
