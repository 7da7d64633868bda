package combiner

import (
	"errors"
	"fmt"
	"strings"

	"github.com/activetier/activetier/metadata"
)

// Errors of the combiner, to be tested with errors.Is.
var (
	// ErrCorrupt matches every error caused by bytes that are not a valid
	// object, section, footer or trailer: a checksum mismatch, a malformed
	// field, or a disagreement between a section and its index entry. The
	// concrete error is a *CorruptError naming the part involved.
	ErrCorrupt = errors.New("combiner: corrupt data")
	// ErrUnsupportedVersion matches a *CorruptError whose bytes carry a
	// format version this package does not read. It is an ErrCorrupt too:
	// a version field is as likely to be damaged as to be new.
	ErrUnsupportedVersion = errors.New("combiner: unsupported format version")
	// ErrTooLarge is returned when a section claims a decompressed size
	// above the Decoder's MaxUncompressedSize: the bytes may be valid, but
	// decoding them would allocate more than the caller allowed.
	ErrTooLarge = errors.New("combiner: section exceeds the decoder's size limit")
	// ErrInvalidInput is returned by Encoder.Encode and Builder.Add for
	// batches and sections that cannot be encoded (empty data, offsets out
	// of order, mixed epochs...). The message names the section, batch,
	// partition and offsets involved.
	ErrInvalidInput = errors.New("combiner: invalid input")
	// ErrInvalidConfig is returned by the constructors for options outside
	// their documented range. The message names the field.
	ErrInvalidConfig = errors.New("combiner: invalid configuration")
	// ErrClosed is returned by an Encoder, Decoder or Builder after Close.
	ErrClosed = errors.New("combiner: closed")
)

// Part names the part of an object a CorruptError is about.
type Part string

// The parts of an object, in byte order.
const (
	PartHeader  Part = "header"
	PartSection Part = "section"
	PartFooter  Part = "footer"
	PartTrailer Part = "trailer"
)

// CorruptError describes bytes that failed verification or parsing. It
// matches ErrCorrupt under errors.Is, and also Err when Err is set (for
// example ErrUnsupportedVersion, or the decompressor's own error).
type CorruptError struct {
	// Part is the part of the object that is bad.
	Part Part
	// Section is the index of the section in the object's footer, or -1
	// when it is unknown (DecodeSection sees one section without its index)
	// or the error is not about a section.
	Section int
	// Partition and FirstOffset identify the section's records when known:
	// Partition is the zero value and FirstOffset -1 otherwise.
	Partition   metadata.TopicPartition
	FirstOffset int64
	// Reason says what was wrong, with the values involved.
	Reason string
	// Err is the underlying cause, if any.
	Err error
}

// Error formats the error as "combiner: corrupt <part> [n] (<partition> from
// offset <o>): <reason>: <cause>", leaving out what is unknown.
func (e *CorruptError) Error() string {
	var b strings.Builder
	b.WriteString("combiner: corrupt ")
	b.WriteString(string(e.Part))
	if e.Section >= 0 {
		fmt.Fprintf(&b, " %d", e.Section)
	}
	if e.Partition != (metadata.TopicPartition{}) {
		fmt.Fprintf(&b, " (%s", e.Partition)
		if e.FirstOffset >= 0 {
			fmt.Fprintf(&b, " from offset %d", e.FirstOffset)
		}
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap lets errors.Is match ErrCorrupt and the underlying cause.
func (e *CorruptError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCorrupt, e.Err}
	}
	return []error{ErrCorrupt}
}

// ShortTailError is returned by ReadFooter when the tail it was given does
// not reach back to the start of the footer. Need is the number of bytes at
// the end of the object that must be fetched; calling ReadFooter again with
// at least that many succeeds unless the object is corrupt. When the tail
// did not even hold the trailer, Need is TrailerSize, and the next call
// reports the footer's real size.
type ShortTailError struct {
	Need int64
	Have int64
}

// Error says how many tail bytes are needed.
func (e *ShortTailError) Error() string {
	return fmt.Sprintf("combiner: object tail of %d bytes is too short, need the last %d bytes", e.Have, e.Need)
}

func corruptf(part Part, format string, args ...any) *CorruptError {
	return &CorruptError{Part: part, Section: -1, FirstOffset: -1, Reason: fmt.Sprintf(format, args...)}
}

// sectionCorrupt builds a CorruptError for the section want describes.
func sectionCorrupt(want *SectionInfo, cause error, format string, args ...any) *CorruptError {
	return &CorruptError{
		Part:        PartSection,
		Section:     -1,
		Partition:   want.Partition,
		FirstOffset: want.FirstOffset,
		Reason:      fmt.Sprintf(format, args...),
		Err:         cause,
	}
}
