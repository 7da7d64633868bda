package combiner

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Defaults for BuilderConfig fields left at zero.
const (
	// DefaultInterval bounds how long a batch waits for its object: the
	// latency budgeted for accumulation on top of a ~10 ms PUT
	// (docs/design.md, "Worked cost examples from the KIP-1176 discussion",
	// the 30 MB/s latency estimate).
	DefaultInterval = 250 * time.Millisecond
	// DefaultTargetBytes is the object size at which a cut is due. At
	// 4 MiB one S3 Express PUT costs under 10% of the upload price of the
	// bytes, so larger objects save little and add latency (about 10 ms
	// per MiB of PUT time).
	DefaultTargetBytes = 4 << 20
	// DefaultMaxPartitions bounds the sections of one object, and so the
	// footer a tail reader fetches (about 30 bytes per section).
	DefaultMaxPartitions = 1000
)

// BuilderConfig configures a Builder. A zero field means its documented
// default; a negative one is an error naming the field.
type BuilderConfig struct {
	// Interval is the longest time a batch stays pending: a cut is due
	// once the oldest pending batch is this old. Zero means
	// DefaultInterval.
	Interval time.Duration
	// TargetBytes is the pending batch data at which a cut is due, and
	// the size objects are split at (an object holds at least one
	// partition, so one partition above it makes a larger object). Zero
	// means DefaultTargetBytes.
	TargetBytes int
	// MaxPartitions is the number of pending partitions at which a cut is
	// due, and the most partitions one object holds. Zero means
	// DefaultMaxPartitions.
	MaxPartitions int
	// SmallFlushBytes configures the DefaultPolicy used when Policy is
	// nil; it must be zero when Policy is set. Zero means
	// DefaultSmallFlushBytes.
	SmallFlushBytes int
	// Encoder configures the Builder's Encoder.
	Encoder EncoderOptions
	// Followers returns the brokers that follow a partition (its
	// placement), in any order. It is called once per pending partition at
	// every Cut. Nil means every partition has the same followers, so
	// sections are ordered by partition alone.
	Followers func(metadata.TopicPartition) []int32
	// Policy decides early cuts and the layout. Nil means
	// DefaultPolicy{SmallFlushBytes: SmallFlushBytes}.
	Policy CutPolicy
	// Buffer, if set, supplies the buffer each object is encoded into: a
	// slice of length 0 and capacity at least n (a smaller one is grown
	// by append, which allocates). It lets a caller reuse the buffers of
	// objects it has finished with. Nil means a new allocation per
	// object.
	Buffer func(n int) []byte
}

// Object is one encoded object returned by Builder.Cut.
type Object struct {
	// Data is the encoded object, owned by the caller.
	Data []byte
	// Sections index Data, in byte order; Followers[i] are the followers
	// of Sections[i].Partition at the time of the cut (shared between
	// sections, not to be modified).
	Sections  []SectionInfo
	Followers [][]int32
}

// Builder accumulates batches of many partitions and cuts them into
// objects. It has no clock: every call that depends on time takes the
// caller's now. A Builder is not safe for concurrent use.
type Builder struct {
	cfg    BuilderConfig
	policy CutPolicy
	enc    *Encoder
	parts  map[metadata.TopicPartition]*pendingPartition
	// spare holds emptied pendingPartitions, whose slices the next Adds
	// reuse instead of growing new ones batch by batch.
	spare  []*pendingPartition
	stats  PendingStats
	closed bool
}

type pendingPartition struct {
	sections []SectionInput // one per epoch, in offset order
	bytes    int
	// followers is its group's follower set, and placed whether the
	// layout placed it yet, during a Cut.
	followers []int32
	placed    bool
}

// NewBuilder validates cfg and returns an empty Builder.
func NewBuilder(cfg BuilderConfig) (*Builder, error) {
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("%w: BuilderConfig.Interval %v is negative", ErrInvalidConfig, cfg.Interval)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.TargetBytes < 0 {
		return nil, fmt.Errorf("%w: BuilderConfig.TargetBytes %d is negative", ErrInvalidConfig, cfg.TargetBytes)
	}
	if cfg.TargetBytes == 0 {
		cfg.TargetBytes = DefaultTargetBytes
	}
	if cfg.MaxPartitions < 0 {
		return nil, fmt.Errorf("%w: BuilderConfig.MaxPartitions %d is negative", ErrInvalidConfig, cfg.MaxPartitions)
	}
	if cfg.MaxPartitions == 0 {
		cfg.MaxPartitions = DefaultMaxPartitions
	}
	if cfg.SmallFlushBytes < 0 {
		return nil, fmt.Errorf("%w: BuilderConfig.SmallFlushBytes %d is negative", ErrInvalidConfig, cfg.SmallFlushBytes)
	}
	policy := cfg.Policy
	if policy == nil {
		policy = DefaultPolicy{SmallFlushBytes: cfg.SmallFlushBytes}
	} else if cfg.SmallFlushBytes != 0 {
		return nil, fmt.Errorf("%w: BuilderConfig.SmallFlushBytes applies to the default policy only, but Policy is set", ErrInvalidConfig)
	}
	enc, err := NewEncoder(cfg.Encoder)
	if err != nil {
		return nil, fmt.Errorf("BuilderConfig.Encoder: %w", err)
	}
	return &Builder{
		cfg:    cfg,
		policy: policy,
		enc:    enc,
		parts:  make(map[metadata.TopicPartition]*pendingPartition),
	}, nil
}

// Close releases the Builder's encoder and drops pending data. Later calls
// return ErrClosed. Close is idempotent.
func (b *Builder) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.parts = nil
	b.stats = PendingStats{}
	return b.enc.Close()
}

// Add appends batch to tp's pending data. The Builder keeps batch.Data,
// without copying, until the batch is cut: the caller must not modify it
// before Cut returns.
//
// The batch must be valid for Encode, and follow tp's pending batches:
// its first offset above their last offset, its epoch not below theirs. A
// new epoch starts a new section. Offsets are checked against pending data
// only: after a Cut, any offset is accepted, which is what a leader that
// truncated and took over again needs. Errors match ErrInvalidInput and
// name the partition and offsets; the batch is not added.
func (b *Builder) Add(tp metadata.TopicPartition, batch storage.Batch, now time.Time) error {
	if b.closed {
		return ErrClosed
	}
	if why := validPartition(tp); why != "" {
		return fmt.Errorf("%w: partition %s %s", ErrInvalidInput, tp, why)
	}
	p := b.parts[tp]
	var prev *storage.Batch
	if p != nil {
		s := &p.sections[len(p.sections)-1]
		prev = &s.Batches[len(s.Batches)-1]
	}
	if why := checkBatch(&batch, prev); why != "" {
		return fmt.Errorf("%w: partition %s batch (epoch %d, offsets %d-%d): %s", ErrInvalidInput, tp, batch.Epoch, batch.FirstOffset, batch.LastOffset, why)
	}
	if prev != nil && batch.Epoch < prev.Epoch {
		return fmt.Errorf("%w: partition %s batch (epoch %d, offsets %d-%d): epoch below the pending epoch %d", ErrInvalidInput, tp, batch.Epoch, batch.FirstOffset, batch.LastOffset, prev.Epoch)
	}

	if b.stats.Batches == 0 {
		b.stats.Oldest = now
	}
	switch {
	case p == nil:
		p = b.newPending()
		b.parts[tp] = p
		b.stats.Partitions++
		fallthrough
	case batch.Epoch != prev.Epoch:
		p.addSection(tp)
		b.stats.Sections++
	}
	s := &p.sections[len(p.sections)-1]
	s.Batches = append(s.Batches, batch)
	p.bytes += len(batch.Data)
	b.stats.Bytes += len(batch.Data)
	b.stats.Batches++
	return nil
}

// Remove drops tp's pending batches and returns how many bytes of batch
// data they held. A leader calls it when its leadership of tp ends: data
// accepted under a leadership that is over must not be published, so there
// is no point uploading it. The oldest pending time is kept (it can only
// make the next cut come sooner).
func (b *Builder) Remove(tp metadata.TopicPartition) int {
	p := b.parts[tp]
	if p == nil {
		return 0
	}
	delete(b.parts, tp)
	for _, s := range p.sections {
		b.stats.Batches -= len(s.Batches)
	}
	b.stats.Sections -= len(p.sections)
	b.stats.Partitions--
	b.stats.Bytes -= p.bytes
	n := p.bytes
	b.recycle(p)
	if b.stats.Batches == 0 {
		b.stats = PendingStats{}
	}
	return n
}

// Pending returns the pending batch bytes and the number of pending
// partitions.
func (b *Builder) Pending() (bytes, partitions int) {
	return b.stats.Bytes, b.stats.Partitions
}

// Stats returns a summary of the pending data.
func (b *Builder) Stats() PendingStats { return b.stats }

// Due reports whether pending data should be cut at now: the oldest pending
// batch has waited Interval, or TargetBytes or MaxPartitions is reached, or
// the policy asks for it. It is false when nothing is pending.
func (b *Builder) Due(now time.Time) bool {
	if b.closed || b.stats.Batches == 0 {
		return false
	}
	return now.Sub(b.stats.Oldest) >= b.cfg.Interval ||
		b.stats.Bytes >= b.cfg.TargetBytes ||
		b.stats.Partitions >= b.cfg.MaxPartitions ||
		b.policy.Due(b.stats, now)
}

// Cut encodes all pending data into objects, appends them to dst and
// empties the Builder. Objects come in layout order; within one,
// sections follow the layout's group order, then partition order, then
// offset order. Nothing pending gives dst unchanged.
//
// If the policy's layout is invalid or encoding fails, Cut returns an
// error and keeps the pending data, so nothing is lost.
func (b *Builder) Cut(dst []Object) ([]Object, error) {
	if b.closed {
		return dst, ErrClosed
	}
	if b.stats.Batches == 0 {
		return dst, nil
	}
	groups := b.groups()
	layout := b.policy.Layout(groups)
	objects, err := b.split(layout)
	if err != nil {
		return dst, err
	}

	out := dst
	var sections []SectionInput
	for _, parts := range objects {
		sections = sections[:0]
		for _, p := range parts {
			sections = append(sections, p.sections...)
		}
		// The object is handed over, so encode straight into a buffer of
		// its own, sized so that uncompressed data never regrows it.
		data, infos, err := b.enc.Encode(b.buffer(encodedSizeBound(sections)), sections)
		if err != nil {
			return dst, fmt.Errorf("combiner: encoding cut: %w", err)
		}
		obj := Object{
			Data:      data,
			Sections:  infos,
			Followers: make([][]int32, len(infos)),
		}
		for i := range infos {
			obj.Followers[i] = b.parts[infos[i].Partition].followers
		}
		out = append(out, obj)
	}
	for _, p := range b.parts {
		b.recycle(p)
	}
	clear(b.parts)
	b.stats = PendingStats{}
	return out, nil
}

// maxSpare bounds the emptied partitions a Builder keeps: one object's
// worth at the default MaxPartitions.
const maxSpare = DefaultMaxPartitions

// newPending returns an empty pendingPartition, reused if one is spare.
func (b *Builder) newPending() *pendingPartition {
	if n := len(b.spare); n > 0 {
		p := b.spare[n-1]
		b.spare[n-1] = nil
		b.spare = b.spare[:n-1]
		return p
	}
	return &pendingPartition{}
}

// recycle empties p, which nothing refers to any more (its data is
// encoded or dropped), and keeps it for reuse. Its batches are cleared so
// that it does not keep their data from the garbage collector.
func (b *Builder) recycle(p *pendingPartition) {
	if len(b.spare) >= maxSpare {
		return
	}
	for i := range p.sections {
		clear(p.sections[i].Batches)
		p.sections[i].Batches = p.sections[i].Batches[:0]
	}
	p.sections = p.sections[:0]
	p.bytes = 0
	p.followers = nil
	b.spare = append(b.spare, p)
}

// addSection starts a new section of tp, reusing the batch slice a
// recycled section left in place.
func (p *pendingPartition) addSection(tp metadata.TopicPartition) {
	n := len(p.sections)
	if n < cap(p.sections) {
		p.sections = p.sections[:n+1]
		p.sections[n].Partition = tp
		return
	}
	p.sections = append(p.sections, SectionInput{Partition: tp})
}

// buffer returns an empty buffer of capacity n for an object.
func (b *Builder) buffer(n int) []byte {
	if b.cfg.Buffer != nil {
		return b.cfg.Buffer(n)[:0]
	}
	return make([]byte, 0, n)
}

// encodedSizeBound bounds the encoded size of sections stored
// uncompressed: their batch data, a batch descriptor of four varints per
// batch, and per section its header, checksum and footer entry (at most a
// few dozen varints and the topic's name and ID).
func encodedSizeBound(sections []SectionInput) int {
	n := HeaderSize + TrailerSize + 2*binary.MaxVarintLen64
	for _, s := range sections {
		n += 32*binary.MaxVarintLen64 + len(s.Partition.Topic) + 16
		for _, b := range s.Batches {
			n += len(b.Data) + 4*binary.MaxVarintLen64
		}
	}
	return n
}

// groups returns the pending partitions grouped by follower set, in Group
// order, and notes in each pending partition its group's follower set.
// A set the Followers function returns sorted and without duplicates, as
// a leader keeps them, is used as it is to find its group, and copied only
// for a new group: a cut allocates per group, not per partition.
func (b *Builder) groups() []Group {
	var groups []Group
	index := make(map[string]int) // follower set, as bytes, to group
	var key []byte
	var scratch []int32
	for tp, p := range b.parts {
		var set []int32
		if b.cfg.Followers != nil {
			set = b.cfg.Followers(tp)
			if !sortedUnique(set) {
				scratch = append(scratch[:0], set...)
				slices.Sort(scratch)
				set = slices.Compact(scratch)
			}
		}
		key = key[:0]
		for _, f := range set {
			key = append(key, byte(f>>24), byte(f>>16), byte(f>>8), byte(f))
		}
		g, ok := index[string(key)]
		if !ok {
			g = len(groups)
			index[string(key)] = g
			var own []int32
			if len(set) > 0 {
				own = slices.Clone(set)
			}
			groups = append(groups, Group{Followers: own})
		}
		p.followers = groups[g].Followers
		groups[g].Partitions = append(groups[g].Partitions, tp)
		groups[g].Bytes += p.bytes
	}
	for i := range groups {
		slices.SortFunc(groups[i].Partitions, metadata.TopicPartition.Compare)
	}
	slices.SortFunc(groups, func(a, b Group) int { return slices.Compare(a.Followers, b.Followers) })
	return groups
}

// sortedUnique reports whether set is in ascending order without
// duplicates.
func sortedUnique(set []int32) bool {
	for i := 1; i < len(set); i++ {
		if set[i-1] >= set[i] {
			return false
		}
	}
	return true
}

// split checks that layout places every pending partition exactly once
// and cuts its objects at MaxPartitions and TargetBytes.
func (b *Builder) split(layout [][]Group) ([][]*pendingPartition, error) {
	// Each pending partition is placed once: the objects are runs of one
	// array.
	all := make([]*pendingPartition, 0, len(b.parts))
	defer func() {
		for _, p := range all {
			p.placed = false
		}
	}()
	var objects [][]*pendingPartition
	for i, obj := range layout {
		from, size := len(all), 0
		for _, g := range obj {
			for _, tp := range g.Partitions {
				p := b.parts[tp]
				if p == nil {
					return nil, fmt.Errorf("%w: policy layout object %d names partition %s, which has nothing pending", ErrInvalidInput, i, tp)
				}
				if p.placed {
					return nil, fmt.Errorf("%w: policy layout places partition %s twice", ErrInvalidInput, tp)
				}
				p.placed = true
				if n := len(all) - from; n > 0 && (n == b.cfg.MaxPartitions || size+p.bytes > b.cfg.TargetBytes) {
					objects = append(objects, all[from:len(all):len(all)])
					from, size = len(all), 0
				}
				all = append(all, p)
				size += p.bytes
			}
		}
		if len(all) > from {
			objects = append(objects, all[from:len(all):len(all)])
		}
	}
	if len(all) != len(b.parts) {
		for tp, p := range b.parts {
			if !p.placed {
				return nil, fmt.Errorf("%w: policy layout leaves out partition %s", ErrInvalidInput, tp)
			}
		}
	}
	return objects, nil
}
