package combiner

import (
	"encoding/binary"
	"math"
	"strconv"
)

// The fixed parts of the object format. doc.go describes every byte.
const (
	// FormatVersion is the object format version this package writes. It
	// also reads version 1, whose section checksums do not cover the
	// section's identity (see the package documentation).
	FormatVersion = 2
	// HeaderSize is the size of the object header: magic, version, flags.
	HeaderSize = 8
	// TrailerSize is the size of the fixed trailer at the end of every
	// object.
	TrailerSize = 32
	// DefaultTailSize is a tail length that holds the footer and trailer of
	// objects of up to about a thousand sections, so one range GET of the
	// last DefaultTailSize bytes (or the whole object, if smaller) is
	// usually enough for ReadFooter.
	DefaultTailSize = 64 << 10
)

const (
	// magic starts and ends every object: "ATCO", activetier combined object.
	magic = "ATCO"
	// formatVersion1 is the first object format, still read: its section
	// checksums cover the section's bytes only.
	formatVersion1 = 1
	// sectionVersion is the first byte of every section, so a reader that
	// fetched only a section's range knows how to verify and parse it. It
	// equals the version of the object the section is in.
	sectionVersion = FormatVersion
	checksumSize   = 8
	// minSectionSize: version, codec, epoch, batch count, one batch
	// descriptor of four one-byte varints, one payload byte, checksum.
	minSectionSize = 1 + 1 + 1 + 1 + 4 + 1 + checksumSize
	// minBatchDescriptor is the smallest encoding of one batch descriptor.
	minBatchDescriptor = 4
	// minEntrySize is the smallest footer entry: nine one-byte varints, the
	// codec byte and the checksum.
	minEntrySize = 9 + 1 + checksumSize
	// minTopicSize is the smallest topic table entry: flags, name length,
	// a one-byte name.
	minTopicSize = 3
	// minFooterSize: topic count, one topic, one entry.
	minFooterSize = 1 + minTopicSize + minEntrySize
	// minObjectSize: header, one section, the smallest footer, trailer.
	minObjectSize = HeaderSize + minSectionSize + minFooterSize + TrailerSize
	// topicHasID is the topic flag saying a 16-byte topic ID follows.
	topicHasID = 1
)

// reader reads, with bounds checks, the varints and fixed fields the format
// is made of. The first failure sticks: later reads return zero, and
// err holds the field that failed, so parsers check once at the end of a
// group of fields.
type reader struct {
	b   []byte
	off int
	err string
}

func (d *reader) fail(field, what string) {
	if d.err == "" {
		d.err = what + " " + field + " at byte " + strconv.Itoa(d.off)
	}
	d.off = len(d.b)
}

func (d *reader) remaining() int { return len(d.b) - d.off }

func (d *reader) byte1(field string) byte {
	if d.off >= len(d.b) {
		d.fail(field, "truncated")
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *reader) bytes(n int, field string) []byte {
	if n < 0 || n > d.remaining() {
		d.fail(field, "truncated")
		return nil
	}
	v := d.b[d.off : d.off+n]
	d.off += n
	return v
}

func (d *reader) uvarint(field string) uint64 {
	if d.err != "" {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		if n == 0 {
			d.fail(field, "truncated")
		} else {
			d.fail(field, "overlong varint")
		}
		return 0
	}
	d.off += n
	return v
}

func (d *reader) varint(field string) int64 {
	if d.err != "" {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		if n == 0 {
			d.fail(field, "truncated")
		} else {
			d.fail(field, "overlong varint")
		}
		return 0
	}
	d.off += n
	return v
}

// int64v reads a uvarint that must fit an int64 (sizes and offsets).
func (d *reader) int64v(field string) int64 {
	v := d.uvarint(field)
	if v > math.MaxInt64 {
		d.fail(field, "out of range")
		return 0
	}
	return int64(v)
}

// int32v reads a zigzag varint that must fit an int32 (epochs).
func (d *reader) int32v(field string) int32 {
	v := d.varint(field)
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail(field, "out of range")
		return 0
	}
	return int32(v)
}
