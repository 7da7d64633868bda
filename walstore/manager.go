package walstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/internal/bufpool"
	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// ErrCorrupt matches errors for bytes that fail verification: a section
// whose checksum, framing or size disagrees with its metadata entry. It is
// the combiner's sentinel, so errors.Is works with either name.
var ErrCorrupt = combiner.ErrCorrupt

// DefaultCoalesceGap is the largest hole between two wanted sections of one
// object that a fetch reads through rather than issuing a second GET. At S3
// Express One Zone prices a GET costs $0.00003/1000 and retrieval
// $0.0006/GB, so one request costs as much as reading 50,000 bytes; at
// single-digit-ms first-byte latency the extra bytes also arrive sooner than
// a second request would.
const DefaultCoalesceGap = 50_000

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	// Store is where objects are written and read. Required.
	Store storage.ObjectStore
	// BrokerID is written into every entry as the writer. Must be >= 0.
	BrokerID int32
	// KeyPrefix is prepended to every object key this manager writes.
	KeyPrefix string
	// Codec compresses sections; compression is skipped per section where it
	// does not pay. Default metadata.CodecNone.
	Codec metadata.Codec
	// FetchConcurrency bounds the GETs one Fetch call has in flight.
	// Default 8.
	FetchConcurrency int
	// CoalesceGap is the largest hole, in bytes, read through to serve two
	// sections of one object with one GET. Zero means DefaultCoalesceGap; a
	// negative value disables coalescing across holes (adjacent sections are
	// still read together).
	CoalesceGap int64
	// Seed makes object keys reproducible in simulations. Zero is a valid
	// seed.
	Seed uint64
	// Clock stamps object keys. Default: the wall clock.
	Clock Clock
	// Logger receives debug-level detail. Default: slog.Default().
	Logger *slog.Logger
}

func (c *ManagerConfig) validate() error {
	if c.Store == nil {
		return errors.New("walstore: ManagerConfig.Store is required")
	}
	if c.BrokerID < 0 {
		return fmt.Errorf("walstore: ManagerConfig.BrokerID %d is negative", c.BrokerID)
	}
	if !c.Codec.Valid() {
		return fmt.Errorf("walstore: ManagerConfig.Codec %v is not a known codec", c.Codec)
	}
	if c.FetchConcurrency < 0 {
		return fmt.Errorf("walstore: ManagerConfig.FetchConcurrency %d is negative", c.FetchConcurrency)
	}
	if c.FetchConcurrency == 0 {
		c.FetchConcurrency = 8
	}
	if c.CoalesceGap == 0 {
		c.CoalesceGap = DefaultCoalesceGap
	}
	if c.Clock == nil {
		c.Clock = wallClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Manager implements KIP-1176's RemoteWalStorageManager: it copies batches
// of many partitions into one combined object, fetches and verifies the
// sections that metadata entries name, and deletes combined objects. It is
// safe for concurrent use.
//
// A Node's sides are built on it: the follower side fetches through Fetch's
// code, and garbage collection and Sweep delete through Delete. The leader
// side uploads through Copy's last step, the conditional Put under a fresh
// key: it encodes objects itself, as their partitions' batches arrive (the
// combiner's Builder), rather than all at once as Copy does. Direct readers
// (package directread) fetch with Fetch.
type Manager struct {
	cfg    ManagerConfig
	jitter *jitter

	encMu sync.Mutex
	enc   *combiner.Encoder
	dec   *combiner.Decoder
}

// NewManager validates cfg and returns a Manager.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	enc, err := combiner.NewEncoder(combiner.EncoderOptions{Codec: cfg.Codec})
	if err != nil {
		return nil, fmt.Errorf("walstore: encoder: %w", err)
	}
	dec, err := combiner.NewDecoder(combiner.DecoderOptions{})
	if err != nil {
		enc.Close()
		return nil, fmt.Errorf("walstore: decoder: %w", err)
	}
	return &Manager{cfg: cfg, jitter: newJitter(cfg.Seed), enc: enc, dec: dec}, nil
}

// CopyInput is one partition's batches for Copy, all of one record epoch,
// with the epoch of the leader publishing them.
type CopyInput struct {
	Partition      metadata.TopicPartition
	PublisherEpoch int32
	Batches        []storage.Batch
}

// Copy writes the batches of many partitions as one combined object in the
// store's local bucket and returns one metadata entry per input, in input
// order. Nothing is published: the caller decides where the entries go.
func (m *Manager) Copy(ctx context.Context, inputs []CopyInput) ([]metadata.Entry, error) {
	if len(inputs) == 0 {
		return nil, errors.New("walstore: Copy of no partitions")
	}
	sections := make([]combiner.SectionInput, len(inputs))
	for i, in := range inputs {
		sections[i] = combiner.SectionInput{Partition: in.Partition, Batches: in.Batches}
	}
	m.encMu.Lock()
	data, infos, err := m.enc.Encode(nil, sections)
	m.encMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("walstore: copy: %w", err)
	}
	ref, err := m.put(ctx, data)
	if err != nil {
		return nil, err
	}
	entries := make([]metadata.Entry, len(infos))
	for i, info := range infos {
		entries[i] = info.Entry(ref, inputs[i].PublisherEpoch, m.cfg.BrokerID)
	}
	return entries, nil
}

// newKey names an object uniquely without coordination: broker id, the
// time, and random bits, so keys from restarted or concurrent writers do not
// collide and a collision is still caught by the conditional Put.
func (m *Manager) newKey() string {
	now := m.cfg.Clock.Now().UnixNano()
	return m.keyPrefix() + strconv.FormatInt(now, 36) + "-" + strconv.FormatUint(m.jitter.uint64(), 36) + ".wal"
}

// keyPrefix is the prefix of every key this manager writes.
func (m *Manager) keyPrefix() string {
	return m.cfg.KeyPrefix + strconv.FormatInt(int64(m.cfg.BrokerID), 10) + "/"
}

// put stores data under a fresh key, choosing another key if the first is
// taken (which also covers a retried Put whose first attempt landed). The
// reference Put returns is published for followers to read, so it must
// name the key put asked for in the store's local bucket, which must have a
// name: anything else is an error matching ErrContractViolation.
func (m *Manager) put(ctx context.Context, data []byte) (metadata.ObjectRef, error) {
	for range 3 {
		key := m.newKey()
		ref, err := m.cfg.Store.Put(ctx, key, data)
		if errors.Is(err, storage.ErrAlreadyExists) {
			continue
		}
		if err != nil {
			return metadata.ObjectRef{}, fmt.Errorf("walstore: upload: %w", &DependencyError{Dependency: "ObjectStore.Put", Err: err})
		}
		want := m.cfg.Store.Local()
		want.Key = key
		if ref != want || want.Bucket == "" {
			return metadata.ObjectRef{}, fmt.Errorf("walstore: upload: %w", &DependencyError{Dependency: "ObjectStore.Put",
				Err: fmt.Errorf("%w: stored %s and returned the reference %q/%q/%q", ErrContractViolation, want, ref.AZ, ref.Bucket, ref.Key)})
		}
		return ref, nil
	}
	return metadata.ObjectRef{}, fmt.Errorf("walstore: upload: three fresh keys already taken: %w", storage.ErrAlreadyExists)
}

// FetchResult is the outcome of fetching one entry: its verified batches, or
// the error that prevented it.
type FetchResult struct {
	Entry   metadata.Entry
	Batches []storage.Batch
	Err     error
	// buf is the pooled buffer Batches alias, when the follower fetched
	// them into one; the follower core releases it after appending.
	buf *sharedBuf
}

// FetchError says which object and partition a failed fetch concerned. Its
// Err matches storage.ErrNotFound, storage.ErrUnavailable, storage.ErrUnknownBucket, storage.ErrInvalidRange
// or ErrCorrupt, and ErrContractViolation when the store's answer broke the
// ObjectStore contract.
type FetchError struct {
	Object    metadata.ObjectRef
	Partition metadata.TopicPartition
	Position  int64
	Length    int64
	Err       error
}

// Error names the object, the byte range and the partition.
func (e *FetchError) Error() string {
	return fmt.Sprintf("walstore: fetch %s bytes %d+%d for %s: %v", e.Object, e.Position, e.Length, e.Partition, e.Err)
}

// Unwrap returns the cause, for errors.Is and errors.As.
func (e *FetchError) Unwrap() error { return e.Err }

// Fetch reads the sections the entries name and returns their verified
// batches, one result per entry in input order. Sections of one object that
// lie next to each other, or within CoalesceGap bytes, are read with one
// ranged GET; GETs run in parallel up to FetchConcurrency. A failure affects
// only the entries it concerns; Fetch itself returns an error only when ctx
// ends.
//
// An entry whose byte range is empty, negative or overflows int64 fails
// with storage.ErrInvalidRange without a request. When a coalesced GET fails with
// storage.ErrInvalidRange (one entry's range may run past the object's end) or
// with an answer that breaks the ObjectStore contract (a body shorter or
// longer than the range, as a truncating proxy gives), each of its entries
// is read again on its own, one after another, so that a bad entry fails
// alone. An answer of the wrong size for a single entry's range fails it
// with an error matching both ErrContractViolation and storage.ErrUnavailable: the
// next attempt may well succeed, so callers retry it with backoff.
func (m *Manager) Fetch(ctx context.Context, entries []metadata.Entry) ([]FetchResult, error) {
	return m.fetch(ctx, entries, nil)
}

// fetch is Fetch, reading into buffers of pool when it and the store
// allow: then each result whose batches alias a buffer holds it (buf).
func (m *Manager) fetch(ctx context.Context, entries []metadata.Entry, pool *bufpool.Pool) ([]FetchResult, error) {
	results := make([]FetchResult, len(entries))
	valid := make([]int, 0, len(entries))
	for i, e := range entries {
		results[i].Entry = e
		if e.Position < 0 || e.Length <= 0 || e.Position > math.MaxInt64-e.Length {
			results[i].Err = fetchError(&e, fmt.Errorf("%w: entry range %d+%d", storage.ErrInvalidRange, e.Position, e.Length))
			continue
		}
		valid = append(valid, i)
	}
	reads := planReads(entries, valid, m.cfg.CoalesceGap)
	sem := make(chan struct{}, m.cfg.FetchConcurrency)
	var wg sync.WaitGroup
	for _, r := range reads {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return nil, ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			m.read(ctx, r, entries, results, pool)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return results, nil
}

func fetchError(e *metadata.Entry, err error) *FetchError {
	return &FetchError{Object: e.Object, Partition: e.Partition, Position: e.Position, Length: e.Length, Err: err}
}

// maxPooledSection bounds the decompressed bytes of one read given a
// pooled arena (more get buffers of their own).
const maxPooledSection = 16 << 20

// rangeRead is one GET serving the entries at idx, which all lie in
// [start, end) of object.
type rangeRead struct {
	object     metadata.ObjectRef
	start, end int64
	idx        []int
}

// planReads is followcore.PlanReads, whose plan the follower's core makes
// its fetches from: a fetch it hands out is then one GET here.
func planReads(entries []metadata.Entry, idx []int, gap int64) []rangeRead {
	plan := followcore.PlanReads(entries, idx, gap)
	reads := make([]rangeRead, len(plan))
	for i, r := range plan {
		reads[i] = rangeRead{object: r.Object, start: r.Start, end: r.End, idx: r.Idx}
	}
	return reads
}

// read serves the entries of r with one GET, or with one GET each when the
// answer to the coalesced one may be the fault of one entry (see Fetch).
func (m *Manager) read(ctx context.Context, r rangeRead, entries []metadata.Entry, results []FetchResult, pool *bufpool.Pool) {
	data, sb, err := m.getRange(ctx, r.object, r.start, r.end-r.start, pool)
	if err != nil && len(r.idx) > 1 && ctx.Err() == nil && (errors.Is(err, storage.ErrInvalidRange) || errors.Is(err, ErrContractViolation)) {
		m.cfg.Logger.Debug("activetier: coalesced read failed; reading its sections one by one",
			"object", r.object.String(), "start", r.start, "end", r.end, "sections", len(r.idx), "err", err)
		for _, i := range r.idx {
			e := &entries[i]
			m.read(ctx, rangeRead{object: r.object, start: e.Position, end: e.Position + e.Length, idx: []int{i}}, entries, results, pool)
		}
		return
	}
	// Compressed sections decompress into one pooled arena per read, as
	// uncompressed ones alias the GET buffer: each goes back to the pool
	// once the last section holding it is appended. Without it every
	// replicated byte of a compressed topic went through a fresh buffer.
	// The arena is sized from the entries' uncompressed sizes, whose
	// checksums are not checked yet, so only within the pool's sizes.
	var arena *sharedBuf
	if pool != nil && err == nil {
		if total := compressedBytes(entries, r.idx); total > 0 && total <= maxPooledSection {
			arena = &sharedBuf{pool: pool, b: pool.Get(int(total))}
		}
	}
	holds, arenaHolds := int32(0), int32(0)
	// The sections' batches share one array, sized once the first section
	// shows how many batches a byte holds: an allocation per read, not per
	// section. Each result's slice ends at its capacity, so that appending
	// to one cannot reach another's.
	var batches []storage.Batch
	for _, i := range r.idx {
		e := &entries[i]
		if err != nil {
			results[i].Err = fetchError(e, err)
			continue
		}
		section := data[e.Position-r.start : e.Position-r.start+e.Length]
		want := combiner.SectionOf(*e)
		from := len(batches)
		var scratch []byte
		if arena != nil && want.Codec != metadata.CodecNone && want.UncompressedSize > 0 {
			n := len(arena.b)
			scratch = arena.b[n:n:min(n+int(want.UncompressedSize), cap(arena.b))]
		}
		decoded, derr := m.dec.DecodeSectionInto(batches, section, want, scratch)
		if derr != nil {
			results[i].Err = fetchError(e, derr)
			continue
		}
		if batches = decoded; from == 0 {
			// r.idx is in position order: the rest of the read follows.
			// The first section's density is a guess, which small
			// batches ahead of large ones would make wild: the array
			// grown for the rest never takes more bytes than the rest
			// of the read has, and appends grow it past that if need be.
			rest := r.end - e.Position - e.Length
			guess := min(int64(len(batches))*rest/e.Length, rest/int64(unsafe.Sizeof(storage.Batch{})))
			batches = slices.Grow(batches, int(guess))
		}
		results[i].Batches = batches[from:len(batches):len(batches)]
		switch {
		case want.Codec != metadata.CodecNone && cap(scratch) == int(want.UncompressedSize):
			// Decompressed into the arena (a scratch too small, which
			// only a wrong size in the entry makes, was not used).
			arena.b = arena.b[:len(arena.b)+cap(scratch)]
			results[i].buf = arena
			arenaHolds++
		case sb != nil && want.Codec == metadata.CodecNone:
			results[i].buf = sb
			holds++
		}
	}
	for _, b := range []struct {
		sb    *sharedBuf
		holds int32
	}{{sb, holds}, {arena, arenaHolds}} {
		switch {
		case b.sb == nil:
		case b.holds == 0:
			pool.Put(b.sb.b)
		default:
			b.sb.refs.Store(b.holds)
		}
	}
}

// compressedBytes is what the compressed sections among entries[idx]
// decompress to, by their entries.
func compressedBytes(entries []metadata.Entry, idx []int) int64 {
	var total int64
	for _, i := range idx {
		if e := &entries[i]; e.Codec != metadata.CodecNone && e.UncompressedSize > 0 {
			total += min(e.UncompressedSize, maxPooledSection+1) // no overflow
		}
	}
	return total
}

// getRange is ObjectStore.GetRange with its answer checked: errors name
// the call, and a body of another length than asked for is an error
// matching ErrContractViolation and storage.ErrUnavailable, never a slice to index
// out of range. With a pool, and a store that is a RangeReader, it reads
// into a pooled buffer and returns it as sb, not yet held by anyone. A
// store call that panics is an error too (see recovered).
func (m *Manager) getRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64, pool *bufpool.Pool) (data []byte, sb *sharedBuf, err error) {
	rr, into := m.cfg.Store.(storage.RangeReader)
	if pool != nil && into && length <= maxPooledRead {
		data = pool.Get(int(length))[:length]
		var n int
		p := recovered(func() { n, err = rr.ReadRange(ctx, ref, offset, data) })
		// A read that did not end in success may have left a request
		// behind that still writes into data (one abandoned when ctx
		// ended, still reading its body): data is left to the garbage
		// collector, never handed to another read, so that such a write
		// cannot land in a section verified since. Failed reads are
		// rare; a cancelled hedge is one.
		switch {
		case p != nil:
			return nil, nil, m.panicError("ObjectStore.ReadRange", p, ref, offset, length)
		case err != nil:
			return nil, nil, &DependencyError{Dependency: "ObjectStore.ReadRange", Err: err}
		case int64(n) != length:
			return nil, nil, wrongLength("ObjectStore.ReadRange", ref, offset, length, n)
		}
		return data, &sharedBuf{pool: pool, b: data}, nil
	}
	if p := recovered(func() { data, err = m.cfg.Store.GetRange(ctx, ref, offset, length) }); p != nil {
		return nil, nil, m.panicError("ObjectStore.GetRange", p, ref, offset, length)
	}
	if err != nil {
		return nil, nil, &DependencyError{Dependency: "ObjectStore.GetRange", Err: err}
	}
	if int64(len(data)) != length {
		return nil, nil, wrongLength("ObjectStore.GetRange", ref, offset, length, len(data))
	}
	return data, nil, nil
}

// panicked is a store call's panic, caught: its value and stack.
type panicked struct {
	value any
	stack []byte
}

func (p *panicked) Error() string { return fmt.Sprintf("panicked: %v", p.value) }

// recovered runs call and returns its panic, if any, as a *panicked: a
// store's bug, met on one read, must not take down the broker's other
// partitions, and the read may succeed another time.
func recovered(call func()) (p *panicked) {
	defer func() {
		if r := recover(); r != nil {
			p = &panicked{value: r, stack: debug.Stack()}
		}
	}()
	call()
	return nil
}

// panicError logs a store call's panic with its stack and returns the
// error for it, matching ErrContractViolation and storage.ErrUnavailable.
func (m *Manager) panicError(call string, p *panicked, ref metadata.ObjectRef, offset, length int64) error {
	m.cfg.Logger.Error("activetier: the object store panicked", "call", call, "object", ref.String(),
		"offset", offset, "length", length, "panic", fmt.Sprint(p.value), "stack", string(p.stack))
	return &DependencyError{Dependency: call, Err: fmt.Errorf("%w: %w reading %d bytes at %d of %s, which may be transient (%w)",
		ErrContractViolation, p, length, offset, ref, storage.ErrUnavailable)}
}

// maxPooledRead is the longest range read into a pooled buffer. The
// buffer is allocated before the store answers, so a longer one, which
// only a malformed entry names (objects are a few MiB), goes to GetRange,
// where the store refuses what the object does not hold before
// allocating anything.
const maxPooledRead = 16 << 20

// wrongLength is the error for a read that returned n bytes of a range of
// length: a broken contract, and maybe a transient one.
func wrongLength(call string, ref metadata.ObjectRef, offset, length int64, n int) error {
	return &DependencyError{Dependency: call, Err: fmt.Errorf("%w: returned %d bytes for the %d-byte range at offset %d of %s, which may be transient (%w)",
		ErrContractViolation, n, length, offset, ref, storage.ErrUnavailable)}
}

// Delete removes combined objects. Deleting an object that is already gone
// is not an error, so callers may retry freely; nor is a store's
// ErrNotFound, which the ObjectStore contract forbids for a missing object.
func (m *Manager) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	if len(refs) == 0 {
		return nil
	}
	err := m.cfg.Store.Delete(ctx, refs)
	if errors.Is(err, storage.ErrNotFound) {
		// The contract makes a missing object no error, and a missing
		// object is what a delete is for. A store that says otherwise may
		// have stopped at the first: each object is deleted again alone.
		err = nil
		for i := 0; len(refs) > 1 && i < len(refs) && err == nil; i++ {
			if e := m.cfg.Store.Delete(ctx, refs[i:i+1]); !errors.Is(e, storage.ErrNotFound) {
				err = e
			}
		}
	}
	if err != nil {
		return fmt.Errorf("walstore: delete %d objects: %w", len(refs), err)
	}
	return nil
}

// Close releases the encoder and decoder. Calls that are still running
// must have returned.
func (m *Manager) Close() error {
	m.encMu.Lock()
	defer m.encMu.Unlock()
	return errors.Join(m.enc.Close(), m.dec.Close())
}
