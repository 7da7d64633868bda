package combiner

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Defaults for EncoderOptions fields left at zero.
const (
	// DefaultMinSavingRatio: a compressed section must be at least 10%
	// smaller than its batches, or it is stored uncompressed. Below that the
	// bytes saved in storage and transfer do not pay for every follower's
	// decompression, and Kafka batches compressed by their producer land
	// here.
	DefaultMinSavingRatio = 0.10
	// DefaultMinCompressBytes: sections with less batch data are stored
	// uncompressed without trying; a frame header and a table of a few
	// hundred bytes rarely shrink by 10%.
	DefaultMinCompressBytes = 512
	// DefaultZstdLevel is zstd's own default level.
	DefaultZstdLevel = 3
)

// EncoderOptions configure an Encoder. A zero field means its documented
// default; a negative or out-of-range one is an error naming the field.
type EncoderOptions struct {
	// Codec is the codec tried for every section. The zero value is
	// metadata.CodecNone.
	Codec metadata.Codec
	// MinSavingRatio is the fraction of a section's batch bytes that
	// compression must save for the compressed form to be kept; in [0, 1),
	// zero meaning DefaultMinSavingRatio.
	MinSavingRatio float64
	// MinCompressBytes is the batch data size below which a section is not
	// compressed at all; zero means DefaultMinCompressBytes.
	MinCompressBytes int
	// ZstdLevel is the zstd compression level, 1 to 22 as in the zstd
	// command; zero means DefaultZstdLevel. The library maps it onto four
	// speeds: 1-2 fastest, 3-5 default, 6-9 better, 10-22 best.
	ZstdLevel int
}

func (o EncoderOptions) resolve() (EncoderOptions, error) {
	if !o.Codec.Valid() {
		return o, fmt.Errorf("%w: EncoderOptions.Codec %d is not none, zstd or s2", ErrInvalidConfig, o.Codec)
	}
	if math.IsNaN(o.MinSavingRatio) || o.MinSavingRatio < 0 || o.MinSavingRatio >= 1 {
		return o, fmt.Errorf("%w: EncoderOptions.MinSavingRatio %v is outside [0, 1)", ErrInvalidConfig, o.MinSavingRatio)
	}
	if o.MinSavingRatio == 0 {
		o.MinSavingRatio = DefaultMinSavingRatio
	}
	if o.MinCompressBytes < 0 {
		return o, fmt.Errorf("%w: EncoderOptions.MinCompressBytes %d is negative", ErrInvalidConfig, o.MinCompressBytes)
	}
	if o.MinCompressBytes == 0 {
		o.MinCompressBytes = DefaultMinCompressBytes
	}
	if o.ZstdLevel < 0 || o.ZstdLevel > 22 {
		return o, fmt.Errorf("%w: EncoderOptions.ZstdLevel %d is outside 1..22", ErrInvalidConfig, o.ZstdLevel)
	}
	if o.ZstdLevel == 0 {
		o.ZstdLevel = DefaultZstdLevel
	}
	return o, nil
}

// Encoder writes combined objects. It keeps its compressor and scratch
// buffers from one object to the next, so encoding allocates only the
// returned SectionInfo slice once dst has room. An Encoder is not safe for
// concurrent use; use one per goroutine.
type Encoder struct {
	opts    EncoderOptions
	zstd    *zstd.Encoder
	payload []byte // a section's batches, concatenated for the compressor
	comp    []byte // the compressor's output
	// topics maps a topic to its index in the footer's topic table, and
	// order lists the table; both are reset for every object.
	topics map[topicKey]int
	order  []topicKey
	// last holds, per partition, the last section seen in the object
	// being validated, to check that a partition's sections ascend.
	last   map[metadata.TopicPartition]int
	closed bool
}

type topicKey struct {
	id   [16]byte
	name string
}

// NewEncoder returns an Encoder with the given options. The zstd encoder,
// when the codec needs one, runs in the caller's goroutine: it is created
// with concurrency 1 and used only through EncodeAll.
func NewEncoder(opts EncoderOptions) (*Encoder, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	e := &Encoder{
		opts:   o,
		topics: make(map[topicKey]int),
		last:   make(map[metadata.TopicPartition]int),
	}
	if o.Codec == metadata.CodecZstd {
		e.zstd, err = zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(1),
			zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(o.ZstdLevel)),
			// The section checksum covers the payload already.
			zstd.WithEncoderCRC(false),
		)
		if err != nil {
			return nil, fmt.Errorf("combiner: creating zstd encoder: %w", err)
		}
	}
	return e, nil
}

// Options returns the encoder's options with defaults filled in.
func (e *Encoder) Options() EncoderOptions { return e.opts }

// Close releases the compressor. Encode returns ErrClosed afterwards.
// Close is idempotent.
func (e *Encoder) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	if e.zstd != nil {
		err := e.zstd.Close()
		e.zstd = nil
		if err != nil {
			return fmt.Errorf("combiner: closing zstd encoder: %w", err)
		}
	}
	return nil
}

// Encode appends one object holding sections, in the given order, to dst
// and returns the extended slice and one SectionInfo per section, whose
// Position is relative to the start of the object (len(dst) on entry).
//
// Every section must hold at least one batch; batches must have data, and
// offsets 0 <= FirstOffset <= LastOffset ascending strictly from batch to
// batch (gaps are allowed, as compaction and transaction markers leave
// them); all batches of a section must share one epoch. A partition may
// have several sections in one object (one per epoch) if their offsets
// ascend and their epochs do not decrease. Errors match ErrInvalidInput
// and name the section, partition and batch; dst is returned unchanged.
//
// Encode does not retain sections or their data.
func (e *Encoder) Encode(dst []byte, sections []SectionInput) ([]byte, []SectionInfo, error) {
	if e.closed {
		return dst, nil, ErrClosed
	}
	bound, err := e.validate(sections)
	if err != nil {
		return dst, nil, err
	}
	start := len(dst)
	out := slices.Grow(dst, bound)

	out = append(out, magic...)
	out = binary.LittleEndian.AppendUint16(out, FormatVersion)
	out = binary.LittleEndian.AppendUint16(out, 0)

	infos := make([]SectionInfo, len(sections))
	for i := range sections {
		out, err = e.appendSection(out, &sections[i], &infos[i])
		if err != nil {
			return dst, nil, err
		}
		infos[i].Position -= int64(start)
	}
	out, err = e.appendFooter(out, start, infos)
	if err != nil {
		return dst, nil, err
	}
	return out, infos, nil
}

// validate checks sections and returns an upper bound of the encoded size.
func (e *Encoder) validate(sections []SectionInput) (int, error) {
	if len(sections) == 0 {
		return 0, fmt.Errorf("%w: no sections", ErrInvalidInput)
	}
	if uint64(len(sections)) > math.MaxUint32 {
		return 0, fmt.Errorf("%w: %d sections, more than the format's %d", ErrInvalidInput, len(sections), uint32(math.MaxUint32))
	}
	clear(e.last)
	bound := HeaderSize + TrailerSize + binary.MaxVarintLen64
	for i := range sections {
		s := &sections[i]
		if why := validPartition(s.Partition); why != "" {
			return 0, fmt.Errorf("%w: section %d: partition %s %s", ErrInvalidInput, i, s.Partition, why)
		}
		if len(s.Batches) == 0 {
			return 0, fmt.Errorf("%w: section %d (%s) has no batches", ErrInvalidInput, i, s.Partition)
		}
		first := &s.Batches[0]
		for j := range s.Batches {
			b := &s.Batches[j]
			var prev *storage.Batch
			if j > 0 {
				prev = &s.Batches[j-1]
			}
			if why := checkBatch(b, prev); why != "" {
				return 0, fmt.Errorf("%w: section %d (%s) batch %d (offsets %d-%d): %s", ErrInvalidInput, i, s.Partition, j, b.FirstOffset, b.LastOffset, why)
			}
			if b.Epoch != first.Epoch {
				return 0, fmt.Errorf("%w: section %d (%s) batch %d (offsets %d-%d): epoch %d differs from the section's epoch %d", ErrInvalidInput, i, s.Partition, j, b.FirstOffset, b.LastOffset, b.Epoch, first.Epoch)
			}
			// Descriptor varints, and the batch's bytes stored raw.
			bound += 4*binary.MaxVarintLen64 + len(b.Data)
		}
		if p, ok := e.last[s.Partition]; ok {
			pl := &sections[p].Batches[len(sections[p].Batches)-1]
			if first.FirstOffset <= pl.LastOffset || first.Epoch < pl.Epoch {
				return 0, fmt.Errorf("%w: section %d (%s, epoch %d, offsets from %d) does not follow section %d of the same partition (epoch %d, offsets to %d)",
					ErrInvalidInput, i, s.Partition, first.Epoch, first.FirstOffset, p, pl.Epoch, pl.LastOffset)
			}
		}
		e.last[s.Partition] = i
		// Section header and checksum; footer entry and topic entry.
		bound += 2 + 2*binary.MaxVarintLen64 + checksumSize
		bound += 10*binary.MaxVarintLen64 + 1 + checksumSize
		bound += 1 + 16 + binary.MaxVarintLen64 + len(s.Partition.Topic)
	}
	return bound, nil
}

// checkBatch says what is wrong with b, which follows prev in its section
// (prev is nil for the first batch), or returns "".
func checkBatch(b, prev *storage.Batch) string {
	switch {
	case len(b.Data) == 0:
		return "no data"
	case b.FirstOffset < 0:
		return "negative first offset"
	case b.LastOffset < b.FirstOffset:
		return "last offset below first offset"
	case prev != nil && b.FirstOffset <= prev.LastOffset:
		return fmt.Sprintf("first offset not above the previous batch's last offset %d", prev.LastOffset)
	}
	return ""
}

// appendSection appends one section and fills in its info (with Position
// relative to the start of out).
func (e *Encoder) appendSection(out []byte, s *SectionInput, info *SectionInfo) ([]byte, error) {
	pos := len(out)
	out = append(out, sectionVersion, byte(metadata.CodecNone))
	first := &s.Batches[0]
	out = binary.AppendVarint(out, int64(first.Epoch))
	out = binary.AppendUvarint(out, uint64(len(s.Batches)))
	raw := 0
	maxTS := first.MaxTimestamp
	for j := range s.Batches {
		b := &s.Batches[j]
		if j == 0 {
			out = binary.AppendUvarint(out, uint64(b.FirstOffset))
			out = binary.AppendUvarint(out, uint64(b.LastOffset-b.FirstOffset))
			out = binary.AppendVarint(out, b.MaxTimestamp)
		} else {
			prev := &s.Batches[j-1]
			out = binary.AppendUvarint(out, uint64(b.FirstOffset-prev.LastOffset-1))
			out = binary.AppendUvarint(out, uint64(b.LastOffset-b.FirstOffset))
			// Wrapping subtraction: the decoder adds it back the same way.
			out = binary.AppendVarint(out, int64(uint64(b.MaxTimestamp)-uint64(prev.MaxTimestamp)))
		}
		out = binary.AppendUvarint(out, uint64(len(b.Data)))
		raw += len(b.Data)
		maxTS = max(maxTS, b.MaxTimestamp)
	}

	codec := metadata.CodecNone
	if e.opts.Codec != metadata.CodecNone && raw >= e.opts.MinCompressBytes {
		comp, err := e.compress(s.Batches, raw)
		if err != nil {
			return out, fmt.Errorf("combiner: compressing section of %s: %w", s.Partition, err)
		}
		if float64(len(comp)) <= float64(raw)*(1-e.opts.MinSavingRatio) {
			codec = e.opts.Codec
			out = append(out, comp...)
		}
	}
	if codec == metadata.CodecNone {
		for j := range s.Batches {
			out = append(out, s.Batches[j].Data...)
		}
	}
	out[pos+1] = byte(codec)
	*info = SectionInfo{
		Partition:        s.Partition,
		Epoch:            first.Epoch,
		FirstOffset:      first.FirstOffset,
		LastOffset:       s.Batches[len(s.Batches)-1].LastOffset,
		MaxTimestamp:     maxTS,
		Position:         int64(pos),
		Codec:            codec,
		UncompressedSize: int64(raw),
		Batches:          len(s.Batches),
	}
	info.Checksum = sectionChecksum(sectionVersion, out[pos:], info)
	out = binary.LittleEndian.AppendUint64(out, info.Checksum)
	info.Length = int64(len(out) - pos)
	return out, nil
}

// compress returns the batches' data compressed with the encoder's codec,
// in a scratch buffer valid until the next call.
func (e *Encoder) compress(batches []storage.Batch, raw int) ([]byte, error) {
	e.payload = slices.Grow(e.payload[:0], raw)
	for j := range batches {
		e.payload = append(e.payload, batches[j].Data...)
	}
	switch e.opts.Codec {
	case metadata.CodecZstd:
		e.comp = e.zstd.EncodeAll(e.payload, e.comp[:0])
		return e.comp, nil
	case metadata.CodecS2:
		n := s2.MaxEncodedLen(raw)
		if n < 0 {
			return nil, fmt.Errorf("%d bytes are too many for s2", raw)
		}
		if cap(e.comp) < n {
			e.comp = make([]byte, n)
		}
		e.comp = s2.Encode(e.comp[:n], e.payload)
		return e.comp, nil
	}
	return nil, fmt.Errorf("codec %s cannot compress", e.opts.Codec)
}

// appendFooter appends the topic table, one entry per section, and the
// trailer. start is the object's first byte in out.
func (e *Encoder) appendFooter(out []byte, start int, infos []SectionInfo) ([]byte, error) {
	clear(e.topics)
	e.order = e.order[:0]
	for i := range infos {
		k := topicKey{id: infos[i].Partition.TopicID, name: infos[i].Partition.Topic}
		if _, ok := e.topics[k]; !ok {
			e.topics[k] = len(e.order)
			e.order = append(e.order, k)
		}
	}

	footerPos := len(out)
	out = binary.AppendUvarint(out, uint64(len(e.order)))
	for _, k := range e.order {
		if k.id != ([16]byte{}) {
			out = append(out, topicHasID)
			out = append(out, k.id[:]...)
		} else {
			out = append(out, 0)
		}
		out = binary.AppendUvarint(out, uint64(len(k.name)))
		out = append(out, k.name...)
	}
	for i := range infos {
		s := &infos[i]
		k := topicKey{id: s.Partition.TopicID, name: s.Partition.Topic}
		out = binary.AppendUvarint(out, uint64(e.topics[k]))
		out = binary.AppendUvarint(out, uint64(s.Partition.Partition))
		out = binary.AppendVarint(out, int64(s.Epoch))
		out = binary.AppendUvarint(out, uint64(s.FirstOffset))
		out = binary.AppendUvarint(out, uint64(s.LastOffset-s.FirstOffset))
		out = binary.AppendVarint(out, s.MaxTimestamp)
		out = binary.AppendUvarint(out, uint64(s.Batches))
		out = binary.AppendUvarint(out, uint64(s.Length))
		out = append(out, byte(s.Codec))
		out = binary.AppendUvarint(out, uint64(s.UncompressedSize))
		out = binary.LittleEndian.AppendUint64(out, s.Checksum)
	}
	footerLen := len(out) - footerPos
	if uint64(footerLen) > math.MaxUint32 {
		return out, fmt.Errorf("%w: footer of %d bytes exceeds the format's 4 GiB limit", ErrInvalidInput, footerLen)
	}

	trailer := len(out)
	out = binary.LittleEndian.AppendUint64(out, uint64(footerPos-start))
	out = binary.LittleEndian.AppendUint32(out, uint32(footerLen))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(infos)))
	out = binary.LittleEndian.AppendUint64(out, footerChecksum(out[footerPos:trailer], out[trailer:trailer+16]))
	out = binary.LittleEndian.AppendUint16(out, FormatVersion)
	out = binary.LittleEndian.AppendUint16(out, 0)
	out = append(out, magic...)
	return out, nil
}

// footerChecksum covers the footer and the trailer's position, length and
// section count, so that a change to any of them is detected.
func footerChecksum(footer, trailerHead []byte) uint64 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.Write(footer)
	_, _ = d.Write(trailerHead)
	return d.Sum64()
}
