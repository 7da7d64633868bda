package combiner

import (
	"encoding/binary"
	"math"

	"github.com/activetier/activetier/metadata"
)

// ReadFooter lists the sections of an object of objectSize bytes from tail,
// the object's last len(tail) bytes (the whole object will do). It checks
// the trailer, the footer checksum and that the sections' byte ranges tile
// the object between header and footer, but reads no section.
//
// If tail does not reach back to the start of the footer, ReadFooter
// returns a *ShortTailError saying how many bytes are needed. Fetching
// DefaultTailSize bytes (or the whole object, if smaller) first makes a
// second request rare.
//
// Topic names in the result are shared between sections of the same topic;
// nothing in the result aliases tail.
func ReadFooter(tail []byte, objectSize int64) ([]SectionInfo, error) {
	if objectSize < minObjectSize {
		return nil, corruptf(PartTrailer, "object size %d is below the minimum %d", objectSize, minObjectSize)
	}
	if int64(len(tail)) > objectSize {
		return nil, corruptf(PartTrailer, "tail of %d bytes is longer than the object's %d bytes", len(tail), objectSize)
	}
	if len(tail) < TrailerSize {
		return nil, &ShortTailError{Need: TrailerSize, Have: int64(len(tail))}
	}
	trailer := tail[len(tail)-TrailerSize:]
	if _, err := checkMagic(trailer[28:32], trailer[24:26], trailer[26:28], PartTrailer); err != nil {
		return nil, err
	}
	footerPos := binary.LittleEndian.Uint64(trailer[0:8])
	footerLen := int64(binary.LittleEndian.Uint32(trailer[8:12]))
	count := int64(binary.LittleEndian.Uint32(trailer[12:16]))
	sum := binary.LittleEndian.Uint64(trailer[16:24])
	if footerPos > math.MaxInt64 || int64(footerPos)+footerLen+TrailerSize != objectSize {
		return nil, corruptf(PartTrailer, "footer position %d and length %d do not end %d bytes before the object's end at %d",
			footerPos, footerLen, TrailerSize, objectSize)
	}
	if count == 0 || count > footerLen/minEntrySize || int64(footerPos) < HeaderSize+count*minSectionSize {
		return nil, corruptf(PartTrailer, "section count %d does not fit a footer of %d bytes at position %d", count, footerLen, footerPos)
	}
	need := footerLen + TrailerSize
	if int64(len(tail)) < need {
		return nil, &ShortTailError{Need: need, Have: int64(len(tail))}
	}
	footer := tail[int64(len(tail))-need : len(tail)-TrailerSize]
	if got := footerChecksum(footer, trailer[:16]); got != sum {
		return nil, corruptf(PartFooter, "checksum mismatch: computed %016x, trailer says %016x", got, sum)
	}
	return parseFooter(footer, int(count), int64(footerPos))
}

// CheckHeader checks an object's first HeaderSize bytes, which no checksum
// covers: the magic, a format version this package reads, and zero flags.
// It returns the version. Errors are *CorruptError values (matching
// ErrCorrupt, and ErrUnsupportedVersion for an unknown version). Verify
// checks the header itself; CheckHeader is for readers that verify an
// object range by range.
func CheckHeader(header []byte) (version int, err error) {
	if len(header) < HeaderSize {
		return 0, corruptf(PartHeader, "header of %d bytes, want %d", len(header), HeaderSize)
	}
	v, err := checkMagic(header[0:4], header[4:6], header[6:8], PartHeader)
	return int(v), err
}

// checkMagic checks the magic, version and flags fields shared by the
// header and the trailer, and returns the version.
func checkMagic(m, version, flags []byte, part Part) (uint16, error) {
	if string(m) != magic {
		return 0, corruptf(part, "magic %q, want %q", m, magic)
	}
	v := binary.LittleEndian.Uint16(version)
	if v != FormatVersion && v != formatVersion1 {
		e := corruptf(part, "format version %d, this reader knows %d and %d", v, formatVersion1, FormatVersion)
		e.Err = ErrUnsupportedVersion
		return 0, e
	}
	if f := binary.LittleEndian.Uint16(flags); f != 0 {
		return 0, corruptf(part, "unknown flags %#04x", f)
	}
	return v, nil
}

// parseFooter parses a footer already checked against its checksum; the
// checks below are for consistency, and for footers built to mislead.
func parseFooter(footer []byte, count int, footerPos int64) ([]SectionInfo, error) {
	d := reader{b: footer}
	nTopics := d.uvarint("topic count")
	if d.err == "" && (nTopics == 0 || nTopics > uint64(count) || nTopics > uint64(len(footer)/minTopicSize)) {
		return nil, corruptf(PartFooter, "topic count %d for %d sections", nTopics, count)
	}
	topics := make([]metadata.TopicPartition, nTopics)
	for i := range topics {
		flags := d.byte1("topic flags")
		if flags&^topicHasID != 0 {
			return nil, corruptf(PartFooter, "topic %d has unknown flags %#02x", i, flags)
		}
		if flags&topicHasID != 0 {
			copy(topics[i].TopicID[:], d.bytes(16, "topic ID"))
		}
		n := d.uvarint("topic name length")
		if n > uint64(d.remaining()) {
			d.fail("topic name", "truncated")
		}
		topics[i].Topic = string(d.bytes(int(n), "topic name"))
		if d.err != "" {
			return nil, corruptf(PartFooter, "topic %d: %s", i, d.err)
		}
		if why := validPartition(topics[i]); why != "" {
			return nil, corruptf(PartFooter, "topic %d %s", i, why)
		}
	}

	infos := make([]SectionInfo, count)
	pos := int64(HeaderSize)
	for i := range infos {
		s := &infos[i]
		t := d.uvarint("topic index")
		p := d.uvarint("partition")
		s.Epoch = d.int32v("epoch")
		s.FirstOffset = d.int64v("first offset")
		span := d.int64v("offset span")
		s.MaxTimestamp = d.varint("max timestamp")
		batches := d.int64v("batch count")
		s.Length = d.int64v("length")
		s.Codec = metadata.Codec(d.byte1("codec"))
		s.UncompressedSize = d.int64v("uncompressed size")
		if sum := d.bytes(checksumSize, "checksum"); sum != nil {
			s.Checksum = binary.LittleEndian.Uint64(sum)
		}
		if d.err != "" {
			return nil, &CorruptError{Part: PartFooter, Section: i, FirstOffset: -1, Reason: d.err}
		}
		bad := func(format string, args ...any) error {
			e := corruptf(PartFooter, format, args...)
			e.Section = i
			if t < nTopics {
				e.Partition = topics[t]
				e.Partition.Partition = int32(min(p, math.MaxInt32))
				e.FirstOffset = s.FirstOffset
			}
			return e
		}
		switch {
		case t >= nTopics:
			return nil, bad("topic index %d, table has %d topics", t, nTopics)
		case p > math.MaxInt32:
			return nil, bad("partition %d out of range", p)
		case span > math.MaxInt64-s.FirstOffset:
			return nil, bad("offset span %d from %d overflows", span, s.FirstOffset)
		case batches == 0 || batches > s.Length/minBatchDescriptor || batches-1 > span:
			return nil, bad("batch count %d for %d offsets in %d bytes", batches, span+1, s.Length)
		case s.Length < minSectionSize || s.Length > footerPos-pos:
			return nil, bad("length %d at position %d does not fit before the footer at %d", s.Length, pos, footerPos)
		case !s.Codec.Valid():
			return nil, bad("unknown codec %d", s.Codec)
		case s.UncompressedSize < batches:
			return nil, bad("uncompressed size %d for %d batches", s.UncompressedSize, batches)
		case s.Codec == metadata.CodecNone && s.UncompressedSize >= s.Length:
			return nil, bad("uncompressed size %d exceeds length %d without compression", s.UncompressedSize, s.Length)
		}
		s.Partition = topics[t]
		s.Partition.Partition = int32(p)
		s.LastOffset = s.FirstOffset + span
		s.Batches = int(batches)
		s.Position = pos
		pos += s.Length
	}
	if d.remaining() != 0 {
		return nil, corruptf(PartFooter, "%d bytes after the last entry", d.remaining())
	}
	if pos != footerPos {
		return nil, corruptf(PartFooter, "sections end at %d, footer starts at %d", pos, footerPos)
	}
	return infos, nil
}
