package disklog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Errors of this package, to be tested with errors.Is.
var (
	// ErrInvalidPartition: a topic name Kafka would not accept (it becomes
	// a directory name, so "../x" must never reach the file system) or a
	// negative partition.
	ErrInvalidPartition = errors.New("disklog: invalid topic partition")
	// ErrCorrupt: bytes on disk that fail their checksum when read.
	ErrCorrupt = errors.New("disklog: corrupt frame")
	// ErrClosed: a call after Close.
	ErrClosed = errors.New("disklog: log closed")
	// ErrFormat: Open found a partition written in a format this version
	// does not read, or a checkpoint damaged past reading.
	ErrFormat = errors.New("disklog: unknown on-disk format")
)

const (
	frameHeader    = 44 // length, crc, epoch, first, last, maxTs, index, count
	maxFrameData   = 1 << 30
	maxCall        = 1<<32 - 1 // batches in one Append: a frame's count field
	checkpointName = "leader-epoch-checkpoint"
	// checkpointVersion is the first line of the checkpoints this
	// version writes. Version 2 ends in a checksum line; version 1, the
	// same lines without it, is still read (and rewritten as version 2
	// by Open). Version 0 had no cut line and went with frames without
	// index and count; Open refuses it rather than take those frames for
	// damage.
	checkpointVersion   = "2"
	checkpointVersionV1 = "1"
	segmentSuffix       = ".log"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Options tunes a Log. Zero values mean the defaults.
type Options struct {
	// SegmentBytes is the size at which a new segment file is started.
	// Default 64 MiB.
	SegmentBytes int64
	// Sync fsyncs the segment after every Append. Default off, as Kafka's
	// flush settings are: a crash loses the unsynced tail, which recovery
	// truncates and replication fetches again.
	Sync bool
	// Logger receives recovery reports. Default slog.Default().
	Logger *slog.Logger
}

// Log is a storage.LocalLog on local disk. It is safe for concurrent use.
type Log struct {
	dir  string
	opts Options

	mu     sync.Mutex
	parts  map[metadata.TopicPartition]*partition
	closed bool
}

var _ storage.LocalLog = (*Log)(nil)

// partition is one partition's files and in-memory index.
type partition struct {
	tp  metadata.TopicPartition
	dir string

	mu      sync.RWMutex
	start   int64 // the log start offset: the first record's, or where an empty log starts
	cut     int64 // where the latest Truncate that removed frames cut the log, or -1
	state   state // what the checkpoint on disk says
	segs    []*segment
	batches []batchPos
	epochs  fencing.Lineage
	closed  bool
}

type segment struct {
	base int64
	f    *os.File
	size int64
}

// batchPos locates one batch's frame.
type batchPos struct {
	epoch       int32
	first, last int64
	maxTs       int64
	seg         *segment
	pos         int64 // of the frame header
	size        int32 // of the data
}

// Open opens (creating if needed) the log in dir and recovers every
// partition found there.
func Open(dir string, opts Options) (*Log, error) {
	if opts.SegmentBytes < 0 {
		return nil, fmt.Errorf("disklog: SegmentBytes %d is negative", opts.SegmentBytes)
	}
	if opts.SegmentBytes == 0 {
		opts.SegmentBytes = 64 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("disklog: %w", err)
	}
	l := &Log{dir: dir, opts: opts, parts: make(map[metadata.TopicPartition]*partition)}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("disklog: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		tp, ok := parseDirName(e.Name())
		if !ok {
			continue
		}
		p, err := l.recover(tp)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.parts[tp] = p
	}
	return l, nil
}

// Dir returns the directory the log lives in.
func (l *Log) Dir() string { return l.dir }

// Close syncs and closes every file. Calls after it fail with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	for _, p := range l.parts {
		p.mu.Lock()
		for _, s := range p.segs {
			if err := s.f.Sync(); err != nil {
				errs = append(errs, fmt.Errorf("disklog: sync %s: %w", s.f.Name(), err))
			}
			if err := s.f.Close(); err != nil {
				errs = append(errs, fmt.Errorf("disklog: close %s: %w", s.f.Name(), err))
			}
		}
		p.segs, p.closed = nil, true
		p.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Partitions returns the partitions the log holds files for.
func (l *Log) Partitions() []metadata.TopicPartition {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]metadata.TopicPartition, 0, len(l.parts))
	for tp := range l.parts {
		out = append(out, tp)
	}
	slices.SortFunc(out, metadata.TopicPartition.Compare)
	return out
}

// part returns tp's partition, creating its directory on first use.
func (l *Log) part(tp metadata.TopicPartition) (*partition, error) {
	if err := ValidPartition(tp); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if p := l.parts[tp]; p != nil {
		return p, nil
	}
	dir := filepath.Join(l.dir, dirName(tp))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("disklog: %s: %w", tp, err)
	}
	p := &partition{tp: tp, dir: dir, cut: -1}
	l.parts[tp] = p
	return p, nil
}

// ValidPartition returns an error wrapping ErrInvalidPartition for a
// partition the log refuses: a negative partition, or a topic name Kafka
// would refuse (metadata.ValidateTopicName; the name becomes a directory).
func ValidPartition(tp metadata.TopicPartition) error {
	if err := metadata.ValidateTopicName(tp.Topic); err != nil {
		return fmt.Errorf("%w: topic %q partition %d: %w", ErrInvalidPartition, tp.Topic, tp.Partition, err)
	}
	if tp.Partition < 0 {
		return fmt.Errorf("%w: topic %q partition %d is negative", ErrInvalidPartition, tp.Topic, tp.Partition)
	}
	return nil
}

func dirName(tp metadata.TopicPartition) string {
	return tp.Topic + "-" + strconv.Itoa(int(tp.Partition))
}

func parseDirName(name string) (metadata.TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return metadata.TopicPartition{}, false
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 32)
	tp := metadata.TopicPartition{Topic: name[:i], Partition: int32(n)}
	return tp, err == nil && ValidPartition(tp) == nil && dirName(tp) == name
}

func (p *partition) end() int64 {
	if n := len(p.batches); n > 0 {
		return p.batches[n-1].last + 1
	}
	return p.start
}

// EndOffset returns the offset the next record of tp will get.
func (l *Log) EndOffset(tp metadata.TopicPartition) (int64, error) {
	p, err := l.part(tp)
	if err != nil {
		return 0, err
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.end(), nil
}

// StartOffset returns the offset of the first record tp holds, or where
// an empty log starts.
func (l *Log) StartOffset(tp metadata.TopicPartition) (int64, error) {
	p, err := l.part(tp)
	if err != nil {
		return 0, err
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.start, nil
}

// Epochs returns tp's leader-epoch entries.
func (l *Log) Epochs(tp metadata.TopicPartition) ([]storage.EpochEntry, error) {
	p, err := l.part(tp)
	if err != nil {
		return nil, err
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.epochs.Entries(), nil
}

// AssignEpoch starts epoch at tp's end offset in its epoch cache, as
// Kafka's makeLeader does before the new leader appends: the Node's
// BecomeLeader requires it. An epoch not above the latest is refused.
func (l *Log) AssignEpoch(tp metadata.TopicPartition, epoch int32) error {
	p, err := l.part(tp)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if latest, ok := p.epochs.Latest(); ok && epoch <= latest.Epoch {
		if epoch == latest.Epoch {
			return nil
		}
		return fmt.Errorf("disklog: assign epoch %d to %s: below its latest epoch %d: %w", epoch, p.tp, latest.Epoch, storage.ErrNotContiguous)
	}
	old := p.epochs.Clone()
	if err := p.epochs.Assign(epoch, p.end()); err != nil {
		return fmt.Errorf("disklog: assign epoch %d to %s: %w", epoch, p.tp, err)
	}
	if err := p.writeCheckpoint(p.settled()); err != nil {
		p.epochs = *old
		return err
	}
	return nil
}

// Append adds batches at the end of tp's log, all or none.
func (l *Log) Append(ctx context.Context, tp metadata.TopicPartition, batches []storage.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(batches) == 0 {
		return nil
	}
	if uint64(len(batches)) > maxCall {
		return fmt.Errorf("disklog: append to %s: %d batches in one call, over %d: %w", tp, len(batches), maxCall, storage.ErrInvalidBatch)
	}
	p, err := l.part(tp)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	next := p.end()
	epoch := int32(-1)
	if latest, ok := p.epochs.Latest(); ok {
		epoch = latest.Epoch
	}
	size := 0
	for i, b := range batches {
		switch {
		case b.LastOffset < b.FirstOffset || b.Epoch < 0 || b.FirstOffset < 0:
			return fmt.Errorf("disklog: append to %s: batch %d (epoch %d, offsets %d-%d): %w", tp, i, b.Epoch, b.FirstOffset, b.LastOffset, storage.ErrInvalidBatch)
		case len(b.Data) > maxFrameData:
			return fmt.Errorf("disklog: append to %s: batch %d of %d bytes, over %d: %w", tp, i, len(b.Data), maxFrameData, storage.ErrInvalidBatch)
		case b.FirstOffset != next:
			return fmt.Errorf("disklog: append to %s: batch %d starts at %d, want %d: %w", tp, i, b.FirstOffset, next, storage.ErrNotContiguous)
		case b.Epoch < epoch:
			return fmt.Errorf("disklog: append to %s: batch %d at %d has epoch %d, below epoch %d before it: %w", tp, i, b.FirstOffset, b.Epoch, epoch, storage.ErrNotContiguous)
		}
		next, epoch = b.LastOffset+1, b.Epoch
		size += frameHeader + len(b.Data)
	}

	if p.state == stateTruncating {
		// A Truncate could not say it was done (see Truncate): say it
		// now, or recovery would take these frames for the rest of it.
		if err := p.writeCheckpoint(stateRecords); err != nil {
			return err
		}
	}
	seg, rolled, err := p.activeSegment(l.opts.SegmentBytes, batches[0].FirstOffset)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, size)
	pos := seg.size
	var added []batchPos
	for i, b := range batches {
		added = append(added, batchPos{epoch: b.Epoch, first: b.FirstOffset, last: b.LastOffset, maxTs: b.MaxTimestamp, seg: seg, pos: pos + int64(len(buf)), size: int32(len(b.Data))})
		buf = appendFrame(buf, b, uint32(i), uint32(len(batches)))
	}
	undo := func() {
		_ = seg.f.Truncate(seg.size)
		if rolled {
			p.dropLastSegment()
		}
	}
	if _, err := seg.f.WriteAt(buf, pos); err != nil {
		undo()
		return fmt.Errorf("disklog: append to %s: %w", tp, err)
	}
	if l.opts.Sync {
		if err := seg.f.Sync(); err != nil {
			undo()
			return fmt.Errorf("disklog: append to %s: sync: %w", tp, err)
		}
	}
	old := p.epochs.Clone()
	newEpoch := false
	for _, b := range batches {
		if latest, ok := p.epochs.Latest(); !ok || b.Epoch > latest.Epoch {
			if err := p.epochs.Assign(b.Epoch, b.FirstOffset); err != nil {
				p.epochs = *old
				undo()
				return fmt.Errorf("disklog: append to %s: %w", tp, err)
			}
			newEpoch = true
		}
	}
	// The first records of an empty log clear the checkpoint's empty
	// state, which would otherwise make recovery drop them.
	if newEpoch || len(p.batches) == 0 {
		if err := p.writeCheckpoint(stateRecords); err != nil {
			p.epochs = *old
			undo()
			return err
		}
	}
	seg.size += int64(len(buf))
	p.batches = append(p.batches, added...)
	return nil
}

// activeSegment returns the segment to append to, starting a new one at
// base when there is none or the last is full.
func (p *partition) activeSegment(segmentBytes, base int64) (*segment, bool, error) {
	if n := len(p.segs); n > 0 && p.segs[n-1].size < segmentBytes {
		return p.segs[n-1], false, nil
	}
	name := filepath.Join(p.dir, fmt.Sprintf("%020d%s", base, segmentSuffix))
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("disklog: %s: new segment: %w", p.tp, err)
	}
	s := &segment{base: base, f: f}
	p.segs = append(p.segs, s)
	return s, true, nil
}

func (p *partition) dropLastSegment() {
	s := p.segs[len(p.segs)-1]
	p.segs = p.segs[:len(p.segs)-1]
	_ = s.f.Close()
	_ = os.Remove(s.f.Name())
}

// appendFrame appends b's frame, the index-th of the count frames one
// Append call writes.
func appendFrame(buf []byte, b storage.Batch, index, count uint32) []byte {
	at := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, uint32(frameHeader-4+len(b.Data)))
	buf = binary.BigEndian.AppendUint32(buf, 0) // crc, below
	buf = binary.BigEndian.AppendUint32(buf, uint32(b.Epoch))
	buf = binary.BigEndian.AppendUint64(buf, uint64(b.FirstOffset))
	buf = binary.BigEndian.AppendUint64(buf, uint64(b.LastOffset))
	buf = binary.BigEndian.AppendUint64(buf, uint64(b.MaxTimestamp))
	buf = binary.BigEndian.AppendUint32(buf, index)
	buf = binary.BigEndian.AppendUint32(buf, count)
	buf = append(buf, b.Data...)
	binary.BigEndian.PutUint32(buf[at+4:], crc32.Checksum(buf[at+8:], castagnoli))
	return buf
}

// Truncate removes tp's records at and after offset, and the epochs that
// start there or later; see storage.LocalLog.
func (l *Log) Truncate(ctx context.Context, tp metadata.TopicPartition, offset int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("disklog: truncate %s to %d: %w", tp, offset, storage.ErrInvalidOffset)
	}
	p, err := l.part(tp)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	old, oldStart, oldCut := p.epochs.Clone(), p.start, p.cut
	if len(p.batches) == 0 || offset <= p.batches[0].first {
		// The checkpoint goes first: recovery drops the segments of a
		// log it says is empty, so a crash between the two finishes this.
		p.start, p.cut = offset, -1
		p.epochs.TruncateFromEnd(offset)
		if err := p.writeCheckpoint(stateEmpty); err != nil {
			p.start, p.epochs, p.cut = oldStart, *old, oldCut
			return err
		}
		for _, s := range p.segs {
			_ = s.f.Close()
			if err := os.Remove(s.f.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
				l.opts.Logger.Warn("disklog: removing a truncated segment", "partition", tp.String(), "err", err)
			}
		}
		p.segs, p.batches = nil, nil
		return nil
	}
	i := p.find(offset)
	if i < len(p.batches) && p.batches[i].first != offset {
		return fmt.Errorf("disklog: truncate %s to %d: batch %d-%d: %w", tp, offset, p.batches[i].first, p.batches[i].last, storage.ErrNotBatchBoundary)
	}
	p.epochs.TruncateFromEnd(offset)
	if i == len(p.batches) {
		if err := p.writeCheckpoint(stateRecords); err != nil {
			p.epochs = *old
			return err
		}
		return nil
	}
	// Removing frames takes steps (a segment cut, others removed), so
	// the checkpoint first says a Truncate to offset is under way, for
	// recovery to finish one a crash interrupts, and then that it is
	// done, for recovery to keep what later Appends add. The cut may
	// fall inside one Append call's frames: the checkpoint keeps where,
	// for recovery to keep what is left of that call (see dropTornCall).
	p.cut = offset
	if err := p.writeCheckpoint(stateTruncating); err != nil {
		p.epochs, p.cut = *old, oldCut
		return err
	}
	if err := p.truncateFrames(i); err != nil {
		// Its first step failed, so no frame went: undo the rest.
		p.epochs, p.cut = *old, oldCut
		if cerr := p.writeCheckpoint(stateRecords); cerr != nil {
			// Recovery would finish the truncation, and the next
			// Append says first that none is under way.
			l.opts.Logger.Warn("disklog: a failed truncation's checkpoint not undone", "partition", tp.String(), "err", cerr)
		}
		return fmt.Errorf("disklog: truncate %s to %d: %w", tp, offset, err)
	}
	if err := p.writeCheckpoint(stateRecords); err != nil {
		// The truncation is done, only not yet said so: the next Append
		// says it before it writes a frame.
		l.opts.Logger.Warn("disklog: truncation done, but its checkpoint not updated", "partition", tp.String(), "err", err)
	}
	return nil
}

// truncateFrames removes the frames of batches i and after from the
// files: the segment holding batch i is cut there, the later ones removed.
func (p *partition) truncateFrames(i int) error {
	cut := p.batches[i]
	if err := cut.seg.f.Truncate(cut.pos); err != nil {
		return err
	}
	cut.seg.size = cut.pos
	for p.segs[len(p.segs)-1] != cut.seg {
		p.dropLastSegment()
	}
	if cut.seg.size == 0 {
		p.dropLastSegment()
	}
	p.batches = p.batches[:i]
	return nil
}

// find returns the index of the batch holding offset, or of the first
// batch after it.
func (p *partition) find(offset int64) int {
	i, _ := slices.BinarySearchFunc(p.batches, offset, func(b batchPos, off int64) int {
		switch {
		case b.last < off:
			return -1
		case b.first > off:
			return 1
		}
		return 0
	})
	return i
}

// Read returns whole batches of tp from the one holding from; see
// storage.LocalLog.
func (l *Log) Read(ctx context.Context, tp metadata.TopicPartition, from int64, maxBytes int) ([]storage.Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := l.part(tp)
	if err != nil {
		return nil, err
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return nil, ErrClosed
	}
	var out []storage.Batch
	size := 0
	for i := p.find(from); i < len(p.batches) && (len(out) == 0 || size+int(p.batches[i].size) <= maxBytes); i++ {
		bp := p.batches[i]
		frame := make([]byte, frameHeader+int(bp.size))
		if _, err := bp.seg.f.ReadAt(frame, bp.pos); err != nil {
			return nil, fmt.Errorf("disklog: read %s at %d from %s: %w", tp, bp.first, bp.seg.f.Name(), err)
		}
		b, _, _, err := parseFrame(frame)
		if err != nil || b.FirstOffset != bp.first || b.LastOffset != bp.last || b.Epoch != bp.epoch {
			return nil, fmt.Errorf("disklog: read %s at %d: %s position %d: %w", tp, bp.first, bp.seg.f.Name(), bp.pos, ErrCorrupt)
		}
		out = append(out, b)
		size += len(b.Data)
	}
	return out, nil
}

// parseFrame decodes one whole frame and checks its checksum. It returns
// the batch and the frame's place in the frames of its Append call.
func parseFrame(frame []byte) (b storage.Batch, index, count uint32, err error) {
	if len(frame) < frameHeader || int(binary.BigEndian.Uint32(frame)) != len(frame)-4 {
		return storage.Batch{}, 0, 0, ErrCorrupt
	}
	if crc32.Checksum(frame[8:], castagnoli) != binary.BigEndian.Uint32(frame[4:]) {
		return storage.Batch{}, 0, 0, ErrCorrupt
	}
	return storage.Batch{
		Epoch:        int32(binary.BigEndian.Uint32(frame[8:])),
		FirstOffset:  int64(binary.BigEndian.Uint64(frame[12:])),
		LastOffset:   int64(binary.BigEndian.Uint64(frame[20:])),
		MaxTimestamp: int64(binary.BigEndian.Uint64(frame[28:])),
		Data:         frame[frameHeader:],
	}, binary.BigEndian.Uint32(frame[36:]), binary.BigEndian.Uint32(frame[40:]), nil
}

// state is what a checkpoint says of the frames beside it.
type state int

const (
	// stateRecords: the frames are the log (recovery truncates only
	// what is torn or damaged).
	stateRecords state = iota
	// stateEmpty: the log holds no records; frames found beside the
	// checkpoint are the remains of a truncation a crash interrupted.
	stateEmpty
	// stateTruncating: a Truncate to the checkpoint's cut is under way;
	// frames found from there on are the remains of it.
	stateTruncating
)

// settled is the state of the checkpoint of the log as it is.
func (p *partition) settled() state {
	if len(p.batches) == 0 {
		return stateEmpty
	}
	return stateRecords
}

// writeCheckpoint replaces the partition's checkpoint atomically.
func (p *partition) writeCheckpoint(st state) error {
	c := checkpoint{start: p.start, state: st, cut: p.cut, entries: p.epochs.Entries()}
	if err := writeAtomic(p.dir, checkpointName, c.encode()); err != nil {
		return fmt.Errorf("disklog: %s: checkpoint: %w", p.tp, err)
	}
	p.state = st
	return nil
}

func writeAtomic(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// checkpoint is what a partition's checkpoint file holds.
type checkpoint struct {
	start   int64
	state   state
	cut     int64
	entries []storage.EpochEntry
	version string // of the file it was read from
}

// encode returns c as a checkpoint file of the current version: its
// lines, then the CRC-32C of every byte before it as 8 hex digits.
func (c checkpoint) encode() []byte {
	b := c.appendLines(nil, checkpointVersion)
	return fmt.Appendf(b, "%08x\n", crc32.Checksum(b, castagnoli))
}

// appendLines appends c's lines under version, without a checksum.
func (c checkpoint) appendLines(b []byte, version string) []byte {
	b = fmt.Appendf(b, "%s\n%d\n%d\n%d\n%d\n", version, c.start, c.state, c.cut, len(c.entries))
	for _, e := range c.entries {
		b = fmt.Appendf(b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b
}

// readCheckpoint reads a partition's checkpoint; a missing one is a log
// starting at 0.
func readCheckpoint(dir string) (checkpoint, error) {
	name := filepath.Join(dir, checkpointName)
	data, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return checkpoint{cut: -1}, nil
	}
	if err != nil {
		return checkpoint{}, err
	}
	return parseCheckpoint(name, data)
}

// parseCheckpoint decodes the checkpoint file name holds data. A
// checkpoint that does not parse, or fails its checksum, is damage
// recovery cannot repair: what it would say (an empty log's start, a
// truncation under way) decides which frames are the log.
func parseCheckpoint(name string, data []byte) (checkpoint, error) {
	bad := fmt.Errorf("%s: malformed checkpoint: %w", name, ErrFormat)
	version, _, _ := bytes.Cut(data, []byte("\n"))
	var lines []string
	switch string(version) {
	case checkpointVersion:
		// The checksum line is the last; it covers every byte before it.
		i := bytes.LastIndexByte(data[:len(data)-1], '\n')
		if i < 0 || data[len(data)-1] != '\n' {
			return checkpoint{}, fmt.Errorf("%s: checkpoint without its checksum line: %w", name, ErrFormat)
		}
		body, sum := data[:i+1], data[i+1:len(data)-1]
		if fmt.Sprintf("%08x", crc32.Checksum(body, castagnoli)) != string(sum) {
			return checkpoint{}, fmt.Errorf("%s: checkpoint fails its checksum: %w", name, ErrFormat)
		}
		lines = strings.Split(string(body[:len(body)-1]), "\n")
	case checkpointVersionV1:
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		if sc.Err() != nil {
			return checkpoint{}, bad
		}
	default:
		if len(data) == 0 {
			return checkpoint{}, bad
		}
		return checkpoint{}, fmt.Errorf("%s: checkpoint of format version %q, want %q or %q: %w", name, version, checkpointVersion, checkpointVersionV1, ErrFormat)
	}
	if len(lines) < 5 {
		return checkpoint{}, bad
	}
	c := checkpoint{version: lines[0]}
	var err1, err2, err3 error
	c.start, err1 = strconv.ParseInt(lines[1], 10, 64)
	switch lines[2] {
	case "0":
		c.state = stateRecords
	case "1":
		c.state = stateEmpty
	case "2":
		c.state = stateTruncating
	default:
		return checkpoint{}, bad
	}
	c.cut, err2 = strconv.ParseInt(lines[3], 10, 64)
	n, err3 := strconv.Atoi(lines[4])
	if err1 != nil || err2 != nil || err3 != nil || c.start < 0 || c.cut < -1 || c.state == stateTruncating && c.cut < 0 || n != len(lines)-5 {
		return checkpoint{}, bad
	}
	for _, line := range lines[5:] {
		var e storage.EpochEntry
		if _, err := fmt.Sscanf(line, "%d %d", &e.Epoch, &e.StartOffset); err != nil {
			return checkpoint{}, bad
		}
		c.entries = append(c.entries, e)
	}
	// This version writes one spelling of each checkpoint; any other
	// ("+5", "007", a trailing space) was not written by it.
	if c.version == checkpointVersion && !bytes.Equal(c.encode(), data) {
		return checkpoint{}, bad
	}
	return c, nil
}

// recover opens tp's files and rebuilds its index, truncating a torn or
// damaged tail.
func (l *Log) recover(tp metadata.TopicPartition) (*partition, error) {
	p := &partition{tp: tp, dir: filepath.Join(l.dir, dirName(tp))}
	cp, err := readCheckpoint(p.dir)
	if err != nil {
		return nil, fmt.Errorf("disklog: %s: %w", tp, err)
	}
	p.start, p.cut, p.state = cp.start, cp.cut, cp.state
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, fmt.Errorf("disklog: %s: %w", tp, err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), segmentSuffix) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names) // zero-padded base offsets sort as numbers
	stop, damaged := false, false
	var calls []frameCall // each batch's, while recovering
	for _, name := range names {
		path := filepath.Join(p.dir, name)
		if stop {
			l.opts.Logger.Warn("disklog: recovery removes a segment after a damaged one", "partition", tp.String(), "segment", path)
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("disklog: %s: %w", tp, err)
			}
			continue
		}
		base, err := strconv.ParseInt(strings.TrimSuffix(name, segmentSuffix), 10, 64)
		if err != nil {
			continue
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("disklog: %s: %w", tp, err)
		}
		s := &segment{base: base, f: f}
		p.segs = append(p.segs, s)
		stop, err = p.scan(s, &calls, l.opts.Logger)
		if err != nil {
			return nil, err
		}
		damaged = damaged || stop
		if s.size == 0 {
			p.dropLastSegment()
		}
	}
	if i := p.find(p.cut); cp.state == stateTruncating && i < len(p.batches) {
		// A Truncate a crash interrupted after its checkpoint: finish it.
		l.opts.Logger.Warn("disklog: recovery finishes an interrupted truncation", "partition", tp.String(), "offset", p.cut)
		if err := p.truncateFrames(i); err != nil {
			return nil, fmt.Errorf("disklog: %s: finishing a truncation: %w", tp, err)
		}
		damaged = true
	} else if tornCall(calls) {
		cut, err := p.dropTornCall(calls, l.opts.Logger)
		if err != nil {
			return nil, err
		}
		damaged = damaged || cut
	}
	if len(p.batches) > 0 && cp.state == stateEmpty {
		// A truncation to a new start whose checkpoint was written but
		// whose segments were not yet removed: finish it. Such a
		// truncation starts the log at or below its first frame, so
		// frames below the start are not its remains but a checkpoint
		// damaged into a number: dropping them would lose the log.
		if first := p.batches[0].first; first < cp.start {
			for _, s := range p.segs {
				_ = s.f.Close()
			}
			return nil, fmt.Errorf("disklog: %s: checkpoint says the log is empty from %d, but its frames start at %d: %w", tp, cp.start, first, ErrFormat)
		}
		for len(p.segs) > 0 {
			p.dropLastSegment()
		}
		p.batches = nil
	}
	if len(p.batches) > 0 {
		p.start = p.batches[0].first
	}
	// The frames say which epoch wrote what; the checkpoint adds only an
	// epoch assigned at the end before any record of it, if nothing was
	// lost: after damage, an entry at the recovered end may be the epoch
	// of the records lost, as Kafka's recovery truncates its epoch cache
	// to the log end.
	for _, b := range p.batches {
		if latest, ok := p.epochs.Latest(); !ok || b.epoch > latest.Epoch {
			if err := p.epochs.Assign(b.epoch, b.first); err != nil {
				return nil, fmt.Errorf("disklog: %s: %w", tp, err)
			}
		}
	}
	end := p.end()
	for _, e := range cp.entries {
		latest, ok := p.epochs.Latest()
		if !damaged && e.StartOffset == end && (!ok || e.Epoch > latest.Epoch) {
			if err := p.epochs.Assign(e.Epoch, e.StartOffset); err != nil {
				return nil, fmt.Errorf("disklog: %s: %w", tp, err)
			}
		}
	}
	switch {
	case tornCall(calls[:len(p.batches)]):
		// What recovery keeps of a call, it keeps for good (only a
		// checkpoint at odds with the frames makes this differ).
		p.cut = end
	case p.cut > end:
		// Damage took the log below the latest cut, so new calls may
		// end there: the cut must no longer keep an incomplete one.
		p.cut = -1
	}
	// A checkpoint of version 1 is rewritten at once: until it is, a
	// damaged digit in it would be taken at its word.
	if p.cut != cp.cut || p.state == stateTruncating || cp.version == checkpointVersionV1 {
		if err := p.writeCheckpoint(p.settled()); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// frameCall is, during recovery, a frame's place among the frames of its
// Append call.
type frameCall struct{ index, count uint32 }

// tornCall reports whether the last call of calls has fewer frames than
// its count.
func tornCall(calls []frameCall) bool {
	n := len(calls)
	return n > 0 && calls[n-1].index+1 < calls[n-1].count
}

// dropTornCall handles a log whose last call has fewer frames than its
// count says. A Truncate that cut the call at a batch boundary leaves that
// legitimately, and its checkpoint says where: the frames up to there stay
// (and any after it, left by a crash during that Truncate, go). Otherwise
// a crash came in the middle of the call's write, and Append is all or
// none: every frame of the call goes. It reports whether frames went.
func (p *partition) dropTornCall(calls []frameCall, logger *slog.Logger) (bool, error) {
	last := calls[len(calls)-1]
	first := len(calls) - 1 - int(last.index) // a call's frames are consecutive
	keep := first
	for i := first; i < len(p.batches); i++ {
		if p.batches[i].last+1 == p.cut {
			keep = i + 1
			break
		}
	}
	if keep == len(p.batches) {
		return false, nil
	}
	from := p.batches[keep]
	logger.Warn("disklog: recovery truncates an Append call a crash interrupted", "partition", p.tp.String(), "segment", from.seg.f.Name(),
		"position", from.pos, "offset", from.first, "frames", len(p.batches)-keep, "count", last.count)
	if err := p.truncateFrames(keep); err != nil {
		return true, fmt.Errorf("disklog: %s: truncating an interrupted Append: %w", p.tp, err)
	}
	return true, nil
}

// scan indexes s's frames, truncating the file at the first one that is
// torn, damaged or does not continue the log or its call; it reports
// whether it did. It appends each frame's place in its call to calls.
func (p *partition) scan(s *segment, calls *[]frameCall, logger *slog.Logger) (bool, error) {
	st, err := s.f.Stat()
	if err != nil {
		return false, fmt.Errorf("disklog: %s: %w", p.tp, err)
	}
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, st.Size()), 1<<20)
	var pos int64
	hdr := make([]byte, 4)
	why := ""
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			if !errors.Is(err, io.EOF) {
				why = "torn frame length"
			}
			break
		}
		n := int64(binary.BigEndian.Uint32(hdr))
		if n < frameHeader-4 || n > maxFrameData+frameHeader || pos+4+n > st.Size() {
			why = "torn or impossible frame length"
			break
		}
		frame := make([]byte, 4+n)
		copy(frame, hdr)
		if _, err := io.ReadFull(r, frame[4:]); err != nil {
			why = "short frame"
			break
		}
		b, index, count, err := parseFrame(frame)
		if err != nil {
			why = "checksum mismatch"
			break
		}
		// A frame starts a call or is the next frame of the one before,
		// in the same segment (a call left incomplete was cut by a
		// Truncate: see dropTornCall).
		var prev frameCall
		if n := len(*calls); n > 0 {
			prev = (*calls)[n-1]
		}
		switch {
		case index == 0 && count > 0:
		case index > 0 && index < count && index == prev.index+1 && count == prev.count && pos > 0:
		default:
			why = "frame does not continue its Append call"
		}
		if why != "" {
			break
		}
		if len(p.batches) > 0 {
			prev := p.batches[len(p.batches)-1]
			if b.FirstOffset != prev.last+1 || b.Epoch < prev.epoch || b.LastOffset < b.FirstOffset {
				why = "frame does not continue the log"
				break
			}
		} else if b.LastOffset < b.FirstOffset || b.Epoch < 0 {
			why = "invalid first frame"
			break
		}
		p.batches = append(p.batches, batchPos{epoch: b.Epoch, first: b.FirstOffset, last: b.LastOffset, maxTs: b.MaxTimestamp, seg: s, pos: pos, size: int32(len(b.Data))})
		*calls = append(*calls, frameCall{index, count})
		pos += 4 + n
	}
	s.size = pos
	if why == "" {
		return false, nil
	}
	logger.Warn("disklog: recovery truncates a damaged tail", "partition", p.tp.String(), "segment", s.f.Name(), "position", pos, "size", st.Size(), "reason", why)
	if err := s.f.Truncate(pos); err != nil {
		return true, fmt.Errorf("disklog: %s: truncating a damaged tail: %w", p.tp, err)
	}
	return true, nil
}
