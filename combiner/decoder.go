package combiner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// DefaultMaxUncompressedSize is the default limit on a compressed
// section's decompressed size: far above what a section of a default-sized
// object holds, low enough that a hostile entry cannot make a follower
// allocate gigabytes.
const DefaultMaxUncompressedSize = 256 << 20

// DecoderOptions configure a Decoder. A zero field means its documented
// default; a negative one is an error naming the field.
type DecoderOptions struct {
	// MaxUncompressedSize bounds the buffer DecodeSection allocates for a
	// compressed section; zero means DefaultMaxUncompressedSize. Sections
	// stored uncompressed are decoded in place and not subject to it.
	MaxUncompressedSize int64
	// Concurrency is how many zstd sections may be decompressed at the
	// same time; further calls wait. Zero means GOMAXPROCS. It creates
	// decoder state, not goroutines.
	Concurrency int
}

// Decoder reads sections and verifies objects. It is safe for concurrent
// use; Close must not run concurrently with other calls.
type Decoder struct {
	max    int64
	zstd   *zstd.Decoder
	closed bool
}

// NewDecoder returns a Decoder with the given options. Its zstd decoder
// never starts goroutines: it is used only through DecodeAll.
func NewDecoder(opts DecoderOptions) (*Decoder, error) {
	if opts.MaxUncompressedSize < 0 {
		return nil, fmt.Errorf("%w: DecoderOptions.MaxUncompressedSize %d is negative", ErrInvalidConfig, opts.MaxUncompressedSize)
	}
	if opts.MaxUncompressedSize == 0 {
		opts.MaxUncompressedSize = DefaultMaxUncompressedSize
	}
	if opts.Concurrency < 0 {
		return nil, fmt.Errorf("%w: DecoderOptions.Concurrency %d is negative", ErrInvalidConfig, opts.Concurrency)
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = runtime.GOMAXPROCS(0)
	}
	z, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(opts.Concurrency),
		// DecodeAll writes no more than the capacity of the buffer it is
		// given, which DecodeSection sizes to the expected length.
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxMemory(uint64(opts.MaxUncompressedSize)),
	)
	if err != nil {
		return nil, fmt.Errorf("combiner: creating zstd decoder: %w", err)
	}
	return &Decoder{max: opts.MaxUncompressedSize, zstd: z}, nil
}

// Close releases the decompressor. Later calls return ErrClosed. Close is
// idempotent.
func (d *Decoder) Close() error {
	if !d.closed {
		d.closed = true
		d.zstd.Close()
	}
	return nil
}

// DecodeSection verifies section, the bytes of one section fetched by
// itself, against want (its index entry, from ReadFooter, Encode or
// SectionOf) and appends its batches to dst.
//
// The checksum is verified before anything else is parsed or decompressed:
// computed over the section's bytes and want's identity (Partition, Epoch,
// FirstOffset, LastOffset), it must match both the one stored in the
// section and want.Checksum, so a section fetched under another section's
// entry fails like a damaged one. (Sections of format version 1 carry a
// checksum of their bytes alone: for them the partition goes unchecked.) Then
// the section's own header and batch table must agree with want's codec,
// epoch, offsets, max timestamp, uncompressed size, length and (unless
// zero) batch count. A compressed payload is decompressed into a buffer of
// exactly want.UncompressedSize bytes, and only if that is within the
// decoder's MaxUncompressedSize (ErrTooLarge otherwise).
//
// Lifetime: the returned batches' Data alias section when the section is
// stored uncompressed, and a buffer allocated by this call otherwise; the
// Decoder keeps no reference to either, so batches stay valid as long as
// the caller keeps section.
//
// Errors about the bytes are *CorruptError values (matching ErrCorrupt)
// naming want's partition and first offset; dst is returned unchanged.
func (d *Decoder) DecodeSection(dst []storage.Batch, section []byte, want SectionInfo) ([]storage.Batch, error) {
	return d.DecodeSectionInto(dst, section, want, nil)
}

// DecodeSectionInto is DecodeSection, decompressing a compressed payload
// into buf's array when its capacity holds want.UncompressedSize bytes,
// so that a caller can reuse decompression buffers: the returned batches
// then alias buf, and stay valid as long as the caller keeps it. A buf
// too small, or nil, is ignored. The Decoder keeps no reference to buf.
func (d *Decoder) DecodeSectionInto(dst []storage.Batch, section []byte, want SectionInfo, buf []byte) ([]storage.Batch, error) {
	if d.closed {
		return dst, ErrClosed
	}
	h, err := checkSection(section, &want)
	if err != nil {
		return dst, err
	}
	payload := section[h.payload : len(section)-checksumSize]
	var data []byte
	switch want.Codec {
	case metadata.CodecNone:
		if int64(len(payload)) != want.UncompressedSize {
			return dst, sectionCorrupt(&want, nil, "stored payload of %d bytes, want %d", len(payload), want.UncompressedSize)
		}
		data = payload
	case metadata.CodecZstd, metadata.CodecS2:
		if want.UncompressedSize > d.max {
			return dst, fmt.Errorf("%w: section of %s from offset %d decompresses to %d bytes, limit %d",
				ErrTooLarge, want.Partition, want.FirstOffset, want.UncompressedSize, d.max)
		}
		if data, err = d.decompress(payload, &want, buf); err != nil {
			return dst, err
		}
	}

	// The table was validated by checkSection; this pass only slices.
	out := slices.Grow(dst, h.batches)
	r := reader{b: section, off: h.table}
	var b storage.Batch
	b.Epoch = want.Epoch
	pos := int64(0)
	for i := range h.batches {
		readDescriptor(&r, i, &b)
		n := r.int64v("data length")
		b.Data = data[pos : pos+n : pos+n]
		pos += n
		out = append(out, b)
	}
	return out, nil
}

func (d *Decoder) decompress(payload []byte, want *SectionInfo, buf []byte) ([]byte, error) {
	n := int(want.UncompressedSize)
	if cap(buf) < n {
		buf = make([]byte, 0, n)
	}
	switch want.Codec {
	case metadata.CodecZstd:
		out, err := d.zstd.DecodeAll(payload, buf[:0])
		if err != nil {
			return nil, sectionCorrupt(want, err, "zstd payload does not decode")
		}
		if len(out) != n {
			return nil, sectionCorrupt(want, nil, "zstd payload decodes to %d bytes, want %d", len(out), n)
		}
		return out, nil
	default: // metadata.CodecS2
		l, err := s2.DecodedLen(payload)
		if err != nil {
			return nil, sectionCorrupt(want, err, "s2 payload has no valid length")
		}
		if l != n {
			return nil, sectionCorrupt(want, nil, "s2 payload decodes to %d bytes, want %d", l, n)
		}
		out, err := s2.Decode(buf[:n], payload)
		if err != nil {
			return nil, sectionCorrupt(want, err, "s2 payload does not decode")
		}
		return out, nil
	}
}

// sectionHeader is where a verified section's parts start.
type sectionHeader struct {
	table   int // first batch descriptor
	payload int // first payload byte
	batches int
}

// checkSection verifies a section's checksum, then parses its header and
// batch table and checks them against want, without touching the payload.
func checkSection(section []byte, want *SectionInfo) (sectionHeader, error) {
	var h sectionHeader
	if len(section) < minSectionSize {
		return h, sectionCorrupt(want, nil, "%d bytes, shorter than the minimum section of %d", len(section), minSectionSize)
	}
	if int64(len(section)) != want.Length {
		return h, sectionCorrupt(want, nil, "%d bytes, index says %d", len(section), want.Length)
	}
	body := section[:len(section)-checksumSize]
	// The version byte says how the checksum is computed, so it is read
	// first; a damaged one selects a checksum that does not match.
	version := body[0]
	if version != sectionVersion && version != formatVersion1 {
		return h, sectionCorrupt(want, ErrUnsupportedVersion, "section format version %d, this reader knows %d and %d", version, formatVersion1, sectionVersion)
	}
	stored := binary.LittleEndian.Uint64(section[len(body):])
	if sum := sectionChecksum(version, body, want); sum != stored {
		if version == formatVersion1 {
			return h, sectionCorrupt(want, nil, "checksum mismatch: computed %016x, section says %016x", sum, stored)
		}
		return h, sectionCorrupt(want, nil, "checksum mismatch: computed %016x for %s epoch %d offsets %d-%d, section says %016x: its bytes are damaged or it is not that section",
			sum, want.Partition, want.Epoch, want.FirstOffset, want.LastOffset, stored)
	}
	if stored != want.Checksum {
		return h, sectionCorrupt(want, nil, "checksum %016x, index says %016x", stored, want.Checksum)
	}

	r := reader{b: body, off: 1}
	codec := metadata.Codec(r.byte1("codec"))
	epoch := r.int32v("epoch")
	count := r.uvarint("batch count")
	if r.err != "" {
		return h, sectionCorrupt(want, nil, "%s", r.err)
	}
	switch {
	case codec != want.Codec || !codec.Valid():
		return h, sectionCorrupt(want, nil, "codec %s, index says %s", codec, want.Codec)
	case epoch != want.Epoch:
		return h, sectionCorrupt(want, nil, "epoch %d, index says %d", epoch, want.Epoch)
	case count == 0 || count > uint64(r.remaining()/minBatchDescriptor):
		return h, sectionCorrupt(want, nil, "batch count %d in %d bytes", count, len(section))
	case want.Batches != 0 && count != uint64(want.Batches):
		return h, sectionCorrupt(want, nil, "%d batches, index says %d", count, want.Batches)
	}
	h.batches = int(count)
	h.table = r.off

	var b storage.Batch
	var total int64
	maxTS := int64(math.MinInt64)
	for i := range h.batches {
		readDescriptor(&r, i, &b)
		n := r.int64v("data length")
		if r.err != "" {
			return h, sectionCorrupt(want, nil, "batch %d: %s", i, r.err)
		}
		if n == 0 || n > math.MaxInt64-total {
			return h, sectionCorrupt(want, nil, "batch %d: data length %d", i, n)
		}
		if i == 0 && b.FirstOffset != want.FirstOffset {
			return h, sectionCorrupt(want, nil, "first offset %d, index says %d", b.FirstOffset, want.FirstOffset)
		}
		total += n
		maxTS = max(maxTS, b.MaxTimestamp)
	}
	switch {
	case b.LastOffset != want.LastOffset:
		return h, sectionCorrupt(want, nil, "last offset %d, index says %d", b.LastOffset, want.LastOffset)
	case maxTS != want.MaxTimestamp:
		return h, sectionCorrupt(want, nil, "max timestamp %d, index says %d", maxTS, want.MaxTimestamp)
	case total != want.UncompressedSize:
		return h, sectionCorrupt(want, nil, "batches hold %d bytes, index says %d", total, want.UncompressedSize)
	case r.remaining() == 0:
		return h, sectionCorrupt(want, nil, "no payload")
	}
	h.payload = r.off
	return h, nil
}

// readDescriptor reads batch i's offsets and timestamp into b, which holds
// batch i-1's. Offsets that would overflow fail r. The data length is left
// for the caller.
func readDescriptor(r *reader, i int, b *storage.Batch) {
	gap := r.int64v("first offset")
	span := r.int64v("offset span")
	ts := r.varint("max timestamp")
	if r.err != "" {
		return
	}
	first := gap
	if i > 0 {
		if b.LastOffset > math.MaxInt64-1-gap {
			r.fail("first offset", "overflowing")
			return
		}
		first = b.LastOffset + 1 + gap
		ts = int64(uint64(b.MaxTimestamp) + uint64(ts))
	}
	if span > math.MaxInt64-first {
		r.fail("offset span", "overflowing")
		return
	}
	b.FirstOffset, b.LastOffset, b.MaxTimestamp = first, first+span, ts
}

// Verify checks a whole object: header, trailer, footer, and every section
// (checksum, header, batch table, and decompression) against its footer
// entry, that header, trailer and sections agree on the format version,
// and that a partition's sections ascend in offsets and epochs as Encode
// requires. It returns the object's sections. Errors about a
// section carry its index, partition and first offset.
func (d *Decoder) Verify(object []byte) ([]SectionInfo, error) {
	if d.closed {
		return nil, ErrClosed
	}
	if len(object) < minObjectSize {
		return nil, corruptf(PartHeader, "object of %d bytes is below the minimum %d", len(object), minObjectSize)
	}
	version, err := CheckHeader(object)
	if err != nil {
		return nil, err
	}
	infos, err := ReadFooter(object, int64(len(object)))
	if err != nil {
		return nil, err
	}
	if v := int(binary.LittleEndian.Uint16(object[len(object)-8:])); v != version {
		return nil, corruptf(PartTrailer, "format version %d, header says %d", v, version)
	}
	type last struct {
		epoch  int32
		offset int64
	}
	seen := make(map[metadata.TopicPartition]last, len(infos))
	var batches []storage.Batch
	for i := range infos {
		s := &infos[i]
		batches, err = d.DecodeSection(batches[:0], object[s.Position:s.Position+s.Length], *s)
		if err != nil {
			if ce := (*CorruptError)(nil); errors.As(err, &ce) {
				ce.Section = i
			}
			return nil, err
		}
		if v := object[s.Position]; int(v) != version {
			e := sectionCorrupt(s, nil, "section format version %d in an object of version %d", v, version)
			e.Section = i
			return nil, e
		}
		if p, ok := seen[s.Partition]; ok && (s.FirstOffset <= p.offset || s.Epoch < p.epoch) {
			e := sectionCorrupt(s, nil, "epoch %d from offset %d follows an earlier section of the partition with epoch %d up to offset %d",
				s.Epoch, s.FirstOffset, p.epoch, p.offset)
			e.Section = i
			return nil, e
		}
		seen[s.Partition] = last{epoch: s.Epoch, offset: s.LastOffset}
	}
	return infos, nil
}

// Verify is Decoder.Verify with a decoder made for the call, for tools that
// check one object now and then. Engines that verify often keep a Decoder.
func Verify(object []byte) ([]SectionInfo, error) {
	d, err := NewDecoder(DecoderOptions{Concurrency: 1})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Verify(object)
}
