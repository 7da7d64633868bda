package metadata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"slices"
)

// messageVersion is the first byte of every encoded Message. A decoder
// rejects versions it does not know with ErrUnsupportedVersion rather than
// guessing, so a format change is a new version, never a reinterpretation.
// Version 2 is version 1 with a checksum appended; version 3 is version 2
// with a commits section, written only for a message that has commits;
// version 4 is version 3 with the commit count always present and its
// markers in columns (see appendMarkers), a byte or two each instead of
// five or more, written only for a message that has markers; version 5 is
// version 4 with the entries' digests (a digestFrom column and a digests
// block after the checksums) and markers optional, written only for a
// message with an entry that has a Digest. All five are read. Writing each
// version only where it is needed keeps the messages that carry none of
// these readable by brokers of earlier releases.
const (
	messageVersion  = 5
	messageVersion1 = 1
	messageVersion2 = 2
	messageVersion3 = 3
	messageVersion4 = 4
)

// checksumSize is the size of the trailing CRC-32C of a message of
// version 2 or later.
const checksumSize = 4

// crc32c returns the CRC-32C (Castagnoli) of b. MakeTable returns the
// standard library's one shared table for it, built once.
func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// Errors returned by DecodeMessage, to be tested with errors.Is.
var (
	// ErrCorrupt is matched by every error DecodeMessage returns: the input
	// is not a message this package wrote. The error is a *DecodeError
	// saying where and what.
	ErrCorrupt = errors.New("metadata: corrupt message")
	// ErrUnsupportedVersion is matched, besides ErrCorrupt, when the
	// input starts with a version this build does not know, typically
	// written by a newer release during a rolling upgrade.
	ErrUnsupportedVersion = errors.New("metadata: unsupported message version")
	// ErrChecksum is matched, besides ErrCorrupt, when a message's bytes
	// do not match its checksum: they changed after they were encoded.
	ErrChecksum = errors.New("metadata: message checksum mismatch")
)

// DecodeError describes why DecodeMessage rejected its input. It matches
// ErrCorrupt and Err under errors.Is.
type DecodeError struct {
	// Offset is the byte offset in the input of the item being decoded.
	Offset int
	// What names that item, for example "entry count" or "column length".
	What string
	// Err is the reason.
	Err error
}

// Error formats the error with its byte offset and item.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("metadata: corrupt message at byte %d (%s): %v", e.Offset, e.What, e.Err)
}

// Unwrap returns ErrCorrupt and the reason.
func (e *DecodeError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }

// The columns an entry is split into, in the order they are encoded. Each
// holds one value per entry (gap: one per entry after the first;
// others: one per entry). The numbering is part of the
// format.
const (
	colTopic        = iota // index into the topic table
	colPartition           // partition minus the previous entry's
	colFirstOffset         // FirstOffset
	colSpan                // LastOffset - FirstOffset
	colGap                 // Position minus the previous entry's end
	colLength              // Length
	colCodec               // Codec
	colUncompressed        // Length - UncompressedSize
	colRecordEpoch         // RecordEpoch
	colRepublish           // PublisherEpoch - RecordEpoch
	colTimestamp           // MaxTimestamp
	colWriter              // WriterBrokerID minus the message's
	colCustomLen           // len(CustomMetadata)
	colDigestFrom          // FirstOffset - DigestFrom, with a Digest (version 5)
	numColumns
)

// numColumnsV4 is the number of columns before version 5, whose column
// mask has no digestFrom bit.
const numColumnsV4 = colDigestFrom

// columnNames name the columns in decode errors.
var columnNames = [numColumns]string{
	"column topic", "column partition", "column firstOffset", "column span",
	"column gap", "column length", "column codec", "column uncompressed",
	"column recordEpoch", "column republish", "column timestamp",
	"column writer", "column customLen", "column digestFrom",
}

// columnRange bounds each column's values as encoded, so that the decoder
// rejects out-of-range values once per column instead of once per entry.
// The topic column's upper bound depends on the message.
var columnRange = [numColumns][2]int64{
	colTopic:        {0, math.MaxInt64},
	colPartition:    {-math.MaxInt32, math.MaxInt32},
	colFirstOffset:  {0, math.MaxInt64},
	colSpan:         {0, math.MaxInt64},
	colGap:          {0, math.MaxInt64},
	colLength:       {1, math.MaxInt64},
	colCodec:        {int64(CodecNone), int64(CodecS2)},
	colUncompressed: {-math.MaxInt64, math.MaxInt64},
	colRecordEpoch:  {0, math.MaxInt32},
	colRepublish:    {0, math.MaxInt32},
	colTimestamp:    {math.MinInt64, math.MaxInt64},
	colWriter:       {-math.MaxInt32, math.MaxInt32},
	colCustomLen:    {0, math.MaxInt64},
	colDigestFrom:   {0, math.MaxInt64},
}

// Topic table kinds: which halves of a topic's identity follow.
const (
	topicHasName = 1 << 0
	topicHasID   = 1 << 1
)

// Smallest encodings, used to bound counts read from the input before
// anything is allocated for them.
const (
	minEntryBytes = 8 // its checksum
	// minEntryBytesV5 is a version 5 entry's checksum and digest.
	minEntryBytesV5 = 16
	minMarkerBytes  = 5 // five one-byte varints (versions 1 to 3)
	// minMarkerBytesV4 is a version 4 marker's partition varint; its other
	// fields may take no bits at all.
	minMarkerBytesV4 = 1
	minCommitBytes   = 4 // four one-byte varints
	minTopicBytes    = 2 // kind and a one-byte name
)

// AppendMessage validates m (see Message.Validate), appends its encoding to
// dst and returns the extended slice. On error dst is returned unchanged in
// length. The encoding ends with a CRC-32C of everything before it, which
// DecodeMessage verifies before it parses anything.
//
// The encoding is canonical: entries are written in the order of their byte
// ranges in the object and markers sorted by topic, partition, epoch, start
// offset and leader, whatever their order in m, so one message has one
// encoding. DecodeMessage returns them in that order. An empty
// CustomMetadata is encoded as absent and decodes as nil.
//
// m is not modified. Encoding a message whose entries are already in
// canonical order, with at most eight distinct topics, allocates nothing
// beyond growing dst.
func AppendMessage(dst []byte, m *Message) ([]byte, error) {
	return appendMessage(dst, m, messageVersion)
}

// appendMessage encodes m in version, or in the earliest version at or
// below it that m needs: version 5 only for digests, 4 only for markers,
// 3 only for commits.
// AppendMessage asks for the latest; tests ask for earlier ones, to check
// that this build still reads what earlier releases wrote.
func appendMessage(dst []byte, m *Message, version byte) ([]byte, error) {
	if m == nil {
		return dst, fmt.Errorf("%w: nil message", ErrInvalid)
	}
	var topicBuf [8]topicKey
	p, err := m.plan(topicBuf[:])
	if err != nil {
		return dst, err
	}
	n, k, nc := len(m.Entries), len(m.Markers), len(m.Commits)
	switch {
	case version < messageVersion && p.digests:
		return dst, fmt.Errorf("%w: version %d messages carry no digests", ErrInvalid, version)
	case version >= messageVersion && !p.digests:
		version = messageVersion4
	}
	if version == messageVersion4 && k == 0 {
		version = messageVersion3
	}
	switch {
	case version == messageVersion3 && nc == 0:
		version = messageVersion2
	case version < messageVersion3 && nc > 0:
		return dst, fmt.Errorf("%w: version %d messages carry no commits", ErrInvalid, version)
	}

	start := len(dst)
	dst = append(dst, version)
	dst = binary.AppendUvarint(dst, uint64(m.WriterBrokerID))
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = binary.AppendUvarint(dst, uint64(k))
	if version >= messageVersion3 {
		dst = binary.AppendUvarint(dst, uint64(nc))
	}
	dst = binary.AppendUvarint(dst, uint64(len(p.topics)))
	for _, t := range p.topics {
		var kind byte
		if t.name != "" {
			kind |= topicHasName
		}
		if t.id != ([16]byte{}) {
			kind |= topicHasID
		}
		dst = append(dst, kind)
		if kind&topicHasID != 0 {
			dst = append(dst, t.id[:]...)
		}
		if kind&topicHasName != 0 {
			dst = appendString(dst, t.name)
		}
	}

	if n > 0 {
		dst = appendString(dst, m.Object.AZ)
		dst = appendString(dst, m.Object.Bucket)
		dst = appendString(dst, m.Object.Key)
		dst = binary.AppendUvarint(dst, uint64(p.entry(0).Position))

		dst = p.appendColumns(dst)
		for i := range n {
			dst = append(dst, p.entry(i).CustomMetadata...)
		}
		for i := range n {
			dst = binary.LittleEndian.AppendUint64(dst, p.entry(i).Checksum)
		}
		if version >= messageVersion {
			for i := range n {
				dst = binary.LittleEndian.AppendUint64(dst, p.entry(i).Digest)
			}
		}
	}

	switch {
	case version >= messageVersion4:
		if k > 0 {
			dst = p.appendMarkers(dst)
		}
	default:
		for i := range k {
			s := p.marker(i)
			dst = binary.AppendUvarint(dst, uint64(p.topicIndex(keyOf(s.Partition))))
			dst = binary.AppendUvarint(dst, uint64(s.Partition.Partition))
			dst = binary.AppendUvarint(dst, uint64(s.Epoch))
			dst = binary.AppendUvarint(dst, uint64(s.StartOffset))
			dst = binary.AppendUvarint(dst, uint64(s.LeaderBrokerID))
		}
	}
	for i := range nc {
		c := p.commit(i)
		dst = binary.AppendUvarint(dst, uint64(p.topicIndex(keyOf(c.Partition))))
		dst = binary.AppendUvarint(dst, uint64(c.Partition.Partition))
		dst = binary.AppendUvarint(dst, uint64(c.Epoch))
		dst = binary.AppendUvarint(dst, uint64(c.Offset))
	}
	if version == messageVersion1 {
		return dst, nil
	}
	return binary.LittleEndian.AppendUint32(dst, crc32c(dst[start:])), nil
}

// The columns of version 4 and 5 markers, in the order they are encoded, one
// value per marker. The numbering is part of the format.
const (
	mcolTopic  = iota // index into the topic table
	mcolEpoch         // Epoch
	mcolStart         // StartOffset
	mcolLeader        // LeaderBrokerID minus the message's WriterBrokerID
	numMarkerColumns
)

var markerColumnNames = [numMarkerColumns]string{
	"marker column topic", "marker column epoch", "marker column startOffset", "marker column leader",
}

var markerColumnRange = [numMarkerColumns][2]int64{
	mcolTopic:  {0, math.MaxInt64},
	mcolEpoch:  {0, math.MaxInt32},
	mcolStart:  {0, math.MaxInt64},
	mcolLeader: {-math.MaxInt32, math.MaxInt32},
}

// markerValues sets v[c] to marker i's value in each marker column.
func (p *plan) markerValues(i int, v *[numMarkerColumns]int64) {
	s := p.marker(i)
	v[mcolTopic] = int64(p.topicIndex(keyOf(s.Partition)))
	v[mcolEpoch] = int64(s.Epoch)
	v[mcolStart] = s.StartOffset
	v[mcolLeader] = int64(s.LeaderBrokerID) - int64(p.m.WriterBrokerID)
}

// appendMarkers writes the markers as version 4 does: the marker column
// mask and every present column, packed as the entry columns are (see
// appendColumns), then each marker's partition as a varint: minus the
// previous marker's when both are of one topic, which markers in
// canonical order make small and never negative. A leader announcing its
// partitions of one topic at one epoch, from empty logs or not, thus
// costs about a byte a partition plus its start offsets' bits.
func (p *plan) appendMarkers(dst []byte) []byte {
	k := len(p.m.Markers)
	var stats [numMarkerColumns]columnStats
	var v [numMarkerColumns]int64
	for i := range k {
		p.markerValues(i, &v)
		for c := range numMarkerColumns {
			stats[c].add(v[c])
		}
	}
	var mask uint64
	for c := range numMarkerColumns {
		if stats[c].present() {
			mask |= 1 << c
		}
	}
	dst = binary.AppendUvarint(dst, mask)
	var start [numMarkerColumns]int
	var width [numMarkerColumns]uint
	for c := range numMarkerColumns {
		if mask&(1<<c) == 0 {
			continue
		}
		dst = binary.AppendVarint(dst, stats[c].min)
		width[c] = stats[c].width()
		dst = append(dst, byte(width[c]))
		start[c] = len(dst)
		if n := int((uint(k)*width[c] + 7) / 8); n > 0 {
			dst = slices.Grow(dst, n)[:len(dst)+n]
			clear(dst[start[c]:])
		}
	}
	for i := range k {
		p.markerValues(i, &v)
		for c := range numMarkerColumns {
			if width[c] > 0 {
				putBits(dst[start[c]:], uint(i)*width[c], uint64(v[c])-uint64(stats[c].min), width[c])
			}
		}
	}
	for i := range k {
		s := p.marker(i)
		part := int64(s.Partition.Partition)
		if i > 0 {
			if prev := p.marker(i - 1); keyOf(prev.Partition) == keyOf(s.Partition) {
				part -= int64(prev.Partition.Partition)
			}
		}
		dst = binary.AppendUvarint(dst, uint64(part))
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// columnStats summarises one column: how many values, their minimum (the
// frame of reference) and maximum.
type columnStats struct {
	count    int
	min, max int64
}

func (s *columnStats) add(v int64) {
	if s.count == 0 || v < s.min {
		s.min = v
	}
	if s.count == 0 || v > s.max {
		s.max = v
	}
	s.count++
}

// present reports whether the column is written: a column of zeros (or of
// no values) is left out and marked absent in the column mask.
func (s *columnStats) present() bool { return s.count > 0 && (s.min != 0 || s.max != 0) }

// width is the number of bits each value minus the minimum needs.
func (s *columnStats) width() uint { return uint(bits.Len64(uint64(s.max) - uint64(s.min))) }

// entryValues sets v[c] to entry i's value in each column c and returns the
// set of columns entry i has a value in (gap: every entry but the first).
// The uncompressed column holds Length - UncompressedSize: for an
// uncompressed section that is its framing (batch table and checksum), a
// small number that packs into a few bits.
func (p *plan) entryValues(i int, v *[numColumns]int64) (has uint32) {
	e := p.entry(i)
	has = 1<<numColumns - 1
	v[colTopic] = 0
	if len(p.topics) > 1 {
		v[colTopic] = int64(p.topicIndex(keyOf(e.Partition)))
	}
	v[colPartition] = int64(e.Partition.Partition)
	if i > 0 {
		prev := p.entry(i - 1)
		v[colPartition] -= int64(prev.Partition.Partition)
		v[colGap] = e.Position - (prev.Position + prev.Length)
	} else {
		has &^= 1 << colGap
	}
	v[colFirstOffset] = e.FirstOffset
	v[colSpan] = e.LastOffset - e.FirstOffset
	v[colLength] = e.Length
	v[colCodec] = int64(e.Codec)
	v[colUncompressed] = e.Length - e.UncompressedSize
	v[colRecordEpoch] = int64(e.RecordEpoch)
	v[colRepublish] = int64(e.PublisherEpoch) - int64(e.RecordEpoch)
	v[colTimestamp] = e.MaxTimestamp
	v[colWriter] = int64(e.WriterBrokerID) - int64(p.m.WriterBrokerID)
	v[colCustomLen] = int64(len(e.CustomMetadata))
	v[colDigestFrom] = 0
	if e.Digest != 0 {
		v[colDigestFrom] = e.FirstOffset - e.DigestFrom
	}
	return has
}

// appendColumns writes the column mask and every present column: its
// minimum as a zigzag varint, the bit width, then each value minus the
// minimum in that many bits, least significant bit first, padded with zero
// bits to a whole byte. One pass over the entries gathers the statistics;
// a second fills every column's bits into space reserved for it.
func (p *plan) appendColumns(dst []byte) []byte {
	n := len(p.m.Entries)
	var stats [numColumns]columnStats
	var v [numColumns]int64
	for i := range n {
		has := p.entryValues(i, &v)
		for c := range numColumns {
			if has&(1<<c) != 0 {
				stats[c].add(v[c])
			}
		}
	}
	var mask uint64
	for c := range numColumns {
		if stats[c].present() {
			mask |= 1 << c
		}
	}
	dst = binary.AppendUvarint(dst, mask)

	// start[c] is the offset in dst of column c's packed bits, pos[c] the
	// next bit to write there.
	var start [numColumns]int
	var pos, width [numColumns]uint
	var packed uint32 // columns with bits to write
	for c := range numColumns {
		if mask&(1<<c) == 0 {
			continue
		}
		dst = binary.AppendVarint(dst, stats[c].min)
		width[c] = stats[c].width()
		dst = append(dst, byte(width[c]))
		start[c] = len(dst)
		if width[c] > 0 {
			packed |= 1 << c
			k := int((uint(stats[c].count)*width[c] + 7) / 8)
			dst = slices.Grow(dst, k)[:len(dst)+k]
			clear(dst[start[c]:])
		}
	}
	if packed == 0 {
		return dst
	}
	for i := range n {
		has := p.entryValues(i, &v) & packed
		for c := range numColumns {
			if has&(1<<c) != 0 {
				putBits(dst[start[c]:], pos[c], uint64(v[c])-uint64(stats[c].min), width[c])
				pos[c] += width[c]
			}
		}
	}
	return dst
}

// putBits ORs the width low bits of v into b starting at bit pos, least
// significant first. The bits of b there are zero.
func putBits(b []byte, pos uint, v uint64, width uint) {
	for width > 0 {
		i, shift := pos>>3, pos&7
		take := min(8-shift, width)
		b[i] |= byte(v&(1<<take-1)) << shift
		v >>= take
		pos += take
		width -= take
	}
}

// readBits returns width bits of data starting at bit pos, least
// significant first. The caller guarantees the bits lie inside data.
func readBits(data []byte, pos, width uint) uint64 {
	if width == 0 {
		return 0
	}
	i, shift := pos>>3, pos&7
	var v uint64
	if i+8 <= uint(len(data)) {
		v = binary.LittleEndian.Uint64(data[i:]) >> shift
		if shift+width > 64 {
			v |= uint64(data[i+8]) << (64 - shift)
		}
	} else {
		for j := uint(0); i+j < uint(len(data)); j++ {
			v |= uint64(data[i+j]) << (8 * j)
		}
		v >>= shift
	}
	if width < 64 {
		v &= 1<<width - 1
	}
	return v
}

// DecodeMessage decodes a message written by AppendMessage. Entries and
// markers come back in canonical order (see AppendMessage), each entry
// carrying the message's Object. The result does not alias b.
//
// Any input yields either a message that encodes to exactly b in b's
// version, or an error matching ErrCorrupt (a *DecodeError): one that
// also matches ErrChecksum when b does not match its checksum,
// ErrUnsupportedVersion when b starts with a version this build does not
// read, and ErrInvalidTopicName when b names a topic whose name Kafka
// would refuse (ValidateTopicName), which AppendMessage never writes: such
// a name may be anything, invalid UTF-8 included, and would reach every
// log line and metric label that names the partition. Messages of earlier
// versions (1, without a checksum; 2; 3, with markers as varints; 4,
// without digests) are still read; AppendMessage encodes what they decode
// to as it encodes any message without digests, in version 2 to 4.
// Counts and lengths in the input are checked against the bytes remaining
// before anything is allocated for them, so a short input cannot make the
// decoder allocate much more than its own size.
func DecodeMessage(b []byte) (*Message, error) {
	d := decoder{b: b}
	return d.message()
}

type decoder struct {
	b   []byte
	off int
}

func (d *decoder) fail(at int, what string, format string, args ...any) error {
	return &DecodeError{Offset: at, What: what, Err: fmt.Errorf(format, args...)}
}

func (d *decoder) remaining() int { return len(d.b) - d.off }

// uvarint reads a minimally encoded unsigned varint no larger than max.
func (d *decoder) uvarint(what string, max uint64) (uint64, error) {
	v, n := binary.Uvarint(d.b[d.off:])
	switch {
	case n == 0:
		return 0, d.fail(d.off, what, "truncated varint")
	case n < 0:
		return 0, d.fail(d.off, what, "varint overflows 64 bits")
	case n > 1 && d.b[d.off+n-1] == 0:
		return 0, d.fail(d.off, what, "varint not minimally encoded")
	case v > max:
		return 0, d.fail(d.off, what, "value %d exceeds %d", v, max)
	}
	d.off += n
	return v, nil
}

func (d *decoder) varint(what string) (int64, error) {
	u, err := d.uvarint(what, math.MaxUint64)
	if err != nil {
		return 0, err
	}
	return int64(u>>1) ^ -int64(u&1), nil
}

func (d *decoder) bytes(what string, n int) ([]byte, error) {
	if n > d.remaining() {
		return nil, d.fail(d.off, what, "%d bytes needed, %d left", n, d.remaining())
	}
	b := d.b[d.off : d.off+n]
	d.off += n
	return b, nil
}

func (d *decoder) string(what string) (string, error) {
	n, err := d.uvarint(what, uint64(d.remaining()))
	if err != nil {
		return "", err
	}
	b, err := d.bytes(what, int(n))
	return string(b), err
}

// decodedTopic is a topic table row and whether any entry or marker used
// it; an unused row would make the encoding non-canonical.
type decodedTopic struct {
	key  topicKey
	used bool
}

// use names partition part of topic ti, and marks the topic used.
func use(topics []decodedTopic, ti int64, part int32) TopicPartition {
	topics[ti].used = true
	return TopicPartition{Topic: topics[ti].key.name, TopicID: topics[ti].key.id, Partition: part}
}

// rowPartition reads a marker's or commit's topic index and partition,
// each a varint, named in errors by topicWhat and partWhat (constants: a
// name built per row cost an allocation per row).
func (d *decoder) rowPartition(topicWhat, partWhat string, topics []decodedTopic) (TopicPartition, error) {
	ti, err := d.uvarint(topicWhat, uint64(len(topics)-1))
	if err != nil {
		return TopicPartition{}, err
	}
	part, err := d.uvarint(partWhat, math.MaxInt32)
	if err != nil {
		return TopicPartition{}, err
	}
	return use(topics, int64(ti), int32(part)), nil
}

func (d *decoder) message() (*Message, error) {
	if len(d.b) == 0 {
		return nil, d.fail(0, "version", "empty input")
	}
	version := d.b[0]
	switch version {
	case messageVersion, messageVersion2, messageVersion3, messageVersion4:
		// Verify before parsing; the body ends where the checksum starts,
		// so offsets in errors stay offsets in the input.
		if len(d.b) < 1+checksumSize {
			return nil, d.fail(0, "checksum", "message of %d bytes has no room for its %d-byte checksum", len(d.b), checksumSize)
		}
		at := len(d.b) - checksumSize
		stored := binary.LittleEndian.Uint32(d.b[at:])
		if sum := crc32c(d.b[:at]); sum != stored {
			return nil, &DecodeError{Offset: at, What: "checksum", Err: fmt.Errorf("%w: computed %08x, message says %08x", ErrChecksum, sum, stored)}
		}
		d.b = d.b[:at]
	case messageVersion1:
	default:
		return nil, &DecodeError{Offset: 0, What: "version", Err: fmt.Errorf("%w %d (this build reads versions %d to %d)", ErrUnsupportedVersion, version, messageVersion1, messageVersion)}
	}
	minMarker, minEntry := minMarkerBytes, uint64(minEntryBytes)
	if version >= messageVersion4 {
		minMarker = minMarkerBytesV4
	}
	if version >= messageVersion {
		minEntry = minEntryBytesV5
	}
	d.off = 1
	writer, err := d.uvarint("writer broker id", math.MaxInt32)
	if err != nil {
		return nil, err
	}
	at := d.off
	n, err := d.uvarint("entry count", uint64(d.remaining())/minEntry)
	if err != nil {
		return nil, err
	}
	k, err := d.uvarint("marker count", uint64(d.remaining()/minMarker))
	if err != nil {
		return nil, err
	}
	var nc uint64
	if version >= messageVersion3 {
		cat := d.off
		if nc, err = d.uvarint("commit count", uint64(d.remaining()/minCommitBytes)); err != nil {
			return nil, err
		}
		if nc == 0 && version == messageVersion3 {
			// A message without commits is written as version 2.
			return nil, d.fail(cat, "commit count", "version %d message has no commits", messageVersion3)
		}
	}
	if version == messageVersion4 && k == 0 {
		// A message without markers is written as version 3 or 2.
		return nil, d.fail(at, "marker count", "version %d message has no markers", version)
	}
	if version == messageVersion && n == 0 {
		// A message without digests is written as version 4 or earlier.
		return nil, d.fail(at, "entry count", "version %d message has no entries, so no digests", version)
	}
	if n*minEntry+k*uint64(minMarker)+nc*minCommitBytes > uint64(d.remaining()) {
		return nil, d.fail(at, "entry and marker counts", "%d entries, %d markers and %d commits cannot fit in %d bytes", n, k, nc, d.remaining())
	}
	if n+k == 0 && nc == 0 {
		return nil, d.fail(at, "entry and marker counts", "message has no entries and no markers")
	}
	at = d.off
	t, err := d.uvarint("topic count", min(n+k+nc, uint64(d.remaining()/minTopicBytes)))
	if err != nil {
		return nil, err
	}
	if t == 0 {
		return nil, d.fail(at, "topic count", "no topics for %d entries and %d markers", n, k)
	}
	var topicBuf [8]decodedTopic
	topics := topicBuf[:0]
	if t > uint64(len(topicBuf)) {
		topics = make([]decodedTopic, 0, t)
	}
	for i := range int(t) {
		tat := d.off
		tk, err := d.topic(i)
		if err != nil {
			return nil, err
		}
		if i > 0 && topics[i-1].key.compare(tk) >= 0 {
			return nil, d.fail(tat, "topic table", "topic %d is not after topic %d in canonical order", i, i-1)
		}
		topics = append(topics, decodedTopic{key: tk})
	}

	m := &Message{WriterBrokerID: int32(writer)}
	if n > 0 {
		if err := d.entries(m, int(n), topics, version >= messageVersion); err != nil {
			return nil, err
		}
	}
	if k > 0 {
		if version >= messageVersion4 {
			err = d.markerColumns(m, int(k), topics)
		} else {
			err = d.markers(m, int(k), topics)
		}
		if err != nil {
			return nil, err
		}
	}
	if nc > 0 {
		if err := d.commits(m, int(nc), topics); err != nil {
			return nil, err
		}
	}
	for i, tp := range topics {
		if !tp.used {
			return nil, d.fail(at, "topic table", "topic %d is not used by any entry or marker", i)
		}
	}
	if d.off != len(d.b) {
		return nil, d.fail(d.off, "end of message", "%d trailing bytes", d.remaining())
	}
	return m, nil
}

func (d *decoder) topic(i int) (topicKey, error) {
	var tk topicKey
	at := d.off
	kind, err := d.bytes("topic kind", 1)
	if err != nil {
		return tk, err
	}
	if kind[0] == 0 || kind[0]&^(topicHasName|topicHasID) != 0 {
		return tk, d.fail(at, "topic kind", "topic %d has kind %#x", i, kind[0])
	}
	if kind[0]&topicHasID != 0 {
		at := d.off
		id, err := d.bytes("topic id", 16)
		if err != nil {
			return tk, err
		}
		copy(tk.id[:], id)
		if tk.id == ([16]byte{}) {
			return tk, d.fail(at, "topic id", "topic %d has an all-zero id", i)
		}
	}
	if kind[0]&topicHasName != 0 {
		at := d.off
		if tk.name, err = d.string("topic name"); err != nil {
			return tk, err
		}
		if err := ValidateTopicName(tk.name); err != nil {
			return tk, &DecodeError{Offset: at, What: "topic name", Err: fmt.Errorf("topic %d: %w", i, err)}
		}
	}
	return tk, nil
}

// column is a decoded column header and its packed values.
type column struct {
	at    int // byte offset of the column, for errors
	min   int64
	max   int64
	width uint
	data  []byte
}

func (c *column) value(i int) int64 {
	return c.min + int64(readBits(c.data, uint(i)*c.width, c.width))
}

// column reads the column named what holding count values, checking that
// it is in the form AppendMessage writes (minimum attained, width minimal,
// zero padding) and that its values lie in [lo, hi].
func (d *decoder) column(what string, count int, present bool, lo, hi int64) (column, error) {
	col := column{at: d.off}
	if !present {
		if count > 0 && lo > 0 {
			return col, d.fail(d.off, what, "column is absent (all zero) but values must be at least %d", lo)
		}
		return col, nil
	}
	if count == 0 {
		return col, d.fail(d.off, what, "column is present but has no values")
	}
	var err error
	if col.min, err = d.varint(what); err != nil {
		return col, err
	}
	w, err := d.bytes(what, 1)
	if err != nil {
		return col, err
	}
	if w[0] > 64 {
		return col, d.fail(d.off-1, what, "bit width %d exceeds 64", w[0])
	}
	col.width = uint(w[0])
	if col.width == 0 && col.min == 0 {
		return col, d.fail(col.at, what, "column of zeros is encoded instead of omitted")
	}
	nbits := uint64(count) * uint64(col.width)
	if col.data, err = d.bytes(what, int((nbits+7)/8)); err != nil {
		return col, err
	}
	if nbits%8 != 0 && col.data[len(col.data)-1]>>(nbits%8) != 0 {
		return col, d.fail(col.at, what, "non-zero padding bits")
	}
	var maxOff uint64
	zero := col.width == 0
	for i := range count {
		off := readBits(col.data, uint(i)*col.width, col.width)
		maxOff = max(maxOff, off)
		zero = zero || off == 0
	}
	switch {
	case !zero:
		return col, d.fail(col.at, what, "minimum %d is not attained", col.min)
	case uint(bits.Len64(maxOff)) != col.width:
		return col, d.fail(col.at, what, "bit width %d is wider than the values need", col.width)
	case maxOff > uint64(math.MaxInt64)-uint64(col.min):
		return col, d.fail(col.at, what, "values overflow int64")
	}
	col.max = col.min + int64(maxOff)
	if col.min < lo || col.max > hi {
		return col, d.fail(col.at, what, "values [%d, %d] outside [%d, %d]", col.min, col.max, lo, hi)
	}
	return col, nil
}

// entries decodes n entries; withDigests (version 5) adds the
// digestFrom column and the digests block.
func (d *decoder) entries(m *Message, n int, topics []decodedTopic, withDigests bool) error {
	var err error
	if m.Object.AZ, err = d.string("object AZ"); err != nil {
		return err
	}
	at := d.off
	if m.Object.Bucket, err = d.string("object bucket"); err != nil {
		return err
	}
	if m.Object.Bucket == "" {
		return d.fail(at, "object bucket", "empty bucket")
	}
	at = d.off
	if m.Object.Key, err = d.string("object key"); err != nil {
		return err
	}
	if m.Object.Key == "" {
		return d.fail(at, "object key", "empty key")
	}
	firstPos, err := d.uvarint("first position", math.MaxInt64)
	if err != nil {
		return err
	}
	columns := numColumnsV4
	if withDigests {
		columns = numColumns
	}
	mask, err := d.uvarint("column mask", 1<<columns-1)
	if err != nil {
		return err
	}

	var cols [numColumns]column
	for c := range numColumns {
		count := n
		switch c {
		case colGap:
			count = n - 1
		}
		lo, hi := columnRange[c][0], columnRange[c][1]
		if c == colTopic {
			hi = int64(len(topics) - 1)
		}
		if cols[c], err = d.column(columnNames[c], count, mask&(1<<c) != 0, lo, hi); err != nil {
			return err
		}
	}

	// Custom metadata: one copy for all entries, so the message does not
	// alias b and costs one allocation however many entries carry some.
	customLen := &cols[colCustomLen]
	var total uint64
	for i := range n {
		total += uint64(customLen.value(i))
		if total > uint64(d.remaining()) {
			return d.fail(customLen.at, "column customLen", "custom metadata of %d+ bytes exceeds the %d bytes left", total, d.remaining())
		}
	}
	custom, err := d.bytes("custom metadata", int(total))
	if err != nil {
		return err
	}
	if total > 0 {
		custom = append([]byte(nil), custom...)
	}
	sums, err := d.bytes("checksums", n*8)
	if err != nil {
		return err
	}
	var digests []byte
	digestsAt, anyDigest := d.off, false
	if withDigests {
		if digests, err = d.bytes("digests", n*8); err != nil {
			return err
		}
	}

	m.Entries = make([]Entry, n)
	var partition, end int64
	for i := range m.Entries {
		e := &m.Entries[i]
		e.Object = m.Object
		ti := cols[colTopic].value(i)
		topics[ti].used = true
		e.Partition.Topic, e.Partition.TopicID = topics[ti].key.name, topics[ti].key.id

		partition += cols[colPartition].value(i)
		if partition < 0 || partition > math.MaxInt32 {
			return d.fail(cols[colPartition].at, "column partition", "entry %d has partition %d", i, partition)
		}
		e.Partition.Partition = int32(partition)

		e.FirstOffset = cols[colFirstOffset].value(i)
		span := cols[colSpan].value(i)
		if e.FirstOffset > math.MaxInt64-span {
			return d.fail(cols[colSpan].at, "column span", "entry %d: LastOffset overflows int64", i)
		}
		e.LastOffset = e.FirstOffset + span

		if i == 0 {
			e.Position = int64(firstPos)
		} else {
			gap := cols[colGap].value(i - 1)
			if end > math.MaxInt64-gap {
				return d.fail(cols[colGap].at, "column gap", "entry %d: Position overflows int64", i)
			}
			e.Position = end + gap
		}
		e.Length = cols[colLength].value(i)
		if e.Position > math.MaxInt64-e.Length {
			return d.fail(cols[colLength].at, "column length", "entry %d: end of byte range overflows int64", i)
		}
		end = e.Position + e.Length

		e.Codec = Codec(cols[colCodec].value(i))
		framing := cols[colUncompressed].value(i)
		if framing >= e.Length || (framing < 0 && e.Length > math.MaxInt64+framing) {
			return d.fail(cols[colUncompressed].at, "column uncompressed", "entry %d: UncompressedSize %d - %d is not a positive int64", i, e.Length, framing)
		}
		e.UncompressedSize = e.Length - framing

		e.RecordEpoch = int32(cols[colRecordEpoch].value(i))
		pub := int64(e.RecordEpoch) + cols[colRepublish].value(i)
		if pub > math.MaxInt32 {
			return d.fail(cols[colRepublish].at, "column republish", "entry %d: PublisherEpoch %d exceeds int32", i, pub)
		}
		e.PublisherEpoch = int32(pub)
		e.MaxTimestamp = cols[colTimestamp].value(i)

		wb := int64(m.WriterBrokerID) + cols[colWriter].value(i)
		if wb < 0 || wb > math.MaxInt32 {
			return d.fail(cols[colWriter].at, "column writer", "entry %d has writer broker id %d", i, wb)
		}
		e.WriterBrokerID = int32(wb)

		if l := cols[colCustomLen].value(i); l > 0 {
			e.CustomMetadata = custom[:l:l]
			custom = custom[l:]
		}
		e.Checksum = binary.LittleEndian.Uint64(sums[i*8:])
		if withDigests {
			e.Digest = binary.LittleEndian.Uint64(digests[i*8:])
			anyDigest = anyDigest || e.Digest != 0
			back := cols[colDigestFrom].value(i)
			switch {
			case e.Digest == 0 && back != 0:
				return d.fail(cols[colDigestFrom].at, "column digestFrom", "entry %d has a digest chain's start but no digest", i)
			case back > e.FirstOffset:
				return d.fail(cols[colDigestFrom].at, "column digestFrom", "entry %d's digest chain begins %d below its first offset %d", i, back, e.FirstOffset)
			case e.Digest != 0:
				e.DigestFrom = e.FirstOffset - back
			}
		}
	}
	if withDigests && !anyDigest {
		// A message without digests is written as version 4 or earlier.
		return d.fail(digestsAt, "digests", "version %d message has no nonzero digest", messageVersion)
	}
	return nil
}

func (d *decoder) markers(m *Message, k int, topics []decodedTopic) error {
	m.Markers = make([]EpochStart, k)
	for i := range m.Markers {
		at := d.off
		s := &m.Markers[i]
		tp, err := d.rowPartition("marker topic", "marker partition", topics)
		if err != nil {
			return err
		}
		epoch, err := d.uvarint("marker epoch", math.MaxInt32)
		if err != nil {
			return err
		}
		start, err := d.uvarint("marker start offset", math.MaxInt64)
		if err != nil {
			return err
		}
		leader, err := d.uvarint("marker leader", math.MaxInt32)
		if err != nil {
			return err
		}
		s.Partition = tp
		s.Epoch, s.StartOffset, s.LeaderBrokerID = int32(epoch), int64(start), int32(leader)
		// The topic table is sorted, so comparing topic keys orders
		// markers as their topic indexes do.
		if i > 0 && compareMarkers(&m.Markers[i-1], s) > 0 {
			return d.fail(at, "marker", "marker %d is out of canonical order", i)
		}
	}
	return nil
}

func (d *decoder) commits(m *Message, n int, topics []decodedTopic) error {
	m.Commits = make([]Commit, n)
	for i := range m.Commits {
		at := d.off
		c := &m.Commits[i]
		tp, err := d.rowPartition("commit topic", "commit partition", topics)
		if err != nil {
			return err
		}
		epoch, err := d.uvarint("commit epoch", math.MaxInt32)
		if err != nil {
			return err
		}
		off, err := d.uvarint("commit offset", math.MaxInt64)
		if err != nil {
			return err
		}
		c.Partition = tp
		c.Epoch, c.Offset = int32(epoch), int64(off)
		if i > 0 && compareCommits(&m.Commits[i-1], c) > 0 {
			return d.fail(at, "commit", "commit %d is out of canonical order", i)
		}
	}
	return nil
}

// markerColumns decodes k version 4 markers (see appendMarkers).
func (d *decoder) markerColumns(m *Message, k int, topics []decodedTopic) error {
	mask, err := d.uvarint("marker column mask", 1<<numMarkerColumns-1)
	if err != nil {
		return err
	}
	var cols [numMarkerColumns]column
	for c := range numMarkerColumns {
		lo, hi := markerColumnRange[c][0], markerColumnRange[c][1]
		if c == mcolTopic {
			hi = int64(len(topics) - 1)
		}
		if cols[c], err = d.column(markerColumnNames[c], k, mask&(1<<c) != 0, lo, hi); err != nil {
			return err
		}
	}
	m.Markers = make([]EpochStart, k)
	for i := range m.Markers {
		at := d.off
		delta, err := d.uvarint("marker partition", math.MaxInt32)
		if err != nil {
			return err
		}
		s := &m.Markers[i]
		ti := cols[mcolTopic].value(i)
		part := int64(delta)
		if i > 0 && ti == cols[mcolTopic].value(i-1) {
			part += int64(m.Markers[i-1].Partition.Partition)
			if part > math.MaxInt32 {
				return d.fail(at, "marker partition", "marker %d has partition %d", i, part)
			}
		}
		s.Partition = use(topics, ti, int32(part))
		s.Epoch = int32(cols[mcolEpoch].value(i))
		s.StartOffset = cols[mcolStart].value(i)
		leader := int64(m.WriterBrokerID) + cols[mcolLeader].value(i)
		if leader < 0 || leader > math.MaxInt32 {
			return d.fail(cols[mcolLeader].at, "marker column leader", "marker %d has leader broker id %d", i, leader)
		}
		s.LeaderBrokerID = int32(leader)
		if i > 0 && compareMarkers(&m.Markers[i-1], s) > 0 {
			return d.fail(at, "marker", "marker %d is out of canonical order", i)
		}
	}
	return nil
}
