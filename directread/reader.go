package directread

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/internal/readcore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// Config configures a Reader.
type Config struct {
	// Log is the metadata log the leaders publish to. Required.
	Log metadata.Log
	// Stores reads the objects of each AZ, by AZ name (the AZ of
	// metadata.ObjectRef). Required: at least one.
	Stores map[string]storage.ObjectStore
	// Partitions are the partitions to read and the offset to start each
	// at. Required: at least one.
	Partitions map[metadata.TopicPartition]int64
	// MetadataPartitions are the partitions of Log to read. Default: all.
	// A partition's metadata is in the metadata partitions of its
	// followers (metadata.Partitioner): include all of them, for records
	// to be judged gone only on every entry that could describe them.
	MetadataPartitions []int32
	// Cache is shared by the Readers of a process. Default: a 64 MiB
	// cache of this Reader's own.
	Cache *Cache
	// Durable serves every record published in object storage, not only
	// the committed ones: what an acks-on-upload producer was told is
	// durable. A failover before the in-sync followers applied them may
	// then truncate records already yielded (a *TruncatedError). Off by
	// default: ask for it explicitly.
	Durable bool
	// MaxBytes bounds the section bytes one Poll fetches. Default 4 MiB.
	MaxBytes int64
	// UnavailableAfter, if positive, is how long the fetches of a section
	// must keep failing as unavailable (storage.ErrUnavailable: its
	// bucket or AZ down) before the Reader gives it up: if nothing else
	// describes the records, Poll reports a *GoneError whose cause is the
	// store's error, and the consumer reads them from the broker instead
	// of waiting out the outage. Zero (the default) waits for as long as
	// the outage lasts.
	UnavailableAfter time.Duration
	// MaxHeld bounds the entries the Reader holds in memory, over all
	// its partitions, waiting for their turn: those it learned ahead of
	// what it may yield, as it does while a partition's commit stalls
	// (until the broker shrinks the in-sync set, a follower that stops
	// applying holds the high watermark back while its leader goes on
	// publishing). Past it, the Reader forgets the entries furthest ahead
	// of their partition's position, and leaves out those it learns past
	// them; once the partition reaches them it reads the metadata that
	// held them again, from the first record that describes them, and
	// serves them then. It forgets and reads again; it never skips a
	// record nor reports one gone for having forgotten it. Default
	// 100,000 (an entry takes some 330 bytes: some 33 MB).
	MaxHeld int
	// Logger receives the Reader's logs. Default: slog.Default().
	Logger *slog.Logger
}

// Reader yields the committed records of a set of partitions, in offset
// order per partition, straight from object storage. Create it with New,
// call Poll in a loop, and Close it. A Reader is safe for concurrent use,
// though Poll calls are served one at a time.
type Reader struct {
	cfg    Config
	core   *readcore.Core // the decisions; under mu
	mgrs   map[string]*walstore.Manager
	meta   []int32
	cursor map[int32]int64

	pollMu sync.Mutex // one Poll at a time
	mu     sync.Mutex // core, closed, stats
	closed bool
	stats  Stats
}

// Stats are a Reader's counters.
type Stats struct {
	// MetadataRecords read, and how many of them failed to decode.
	MetadataRecords, CorruptMetadata uint64
	// MetadataWatermarks counts the metadata.Log.Watermarks calls: the
	// high watermarks taken to judge records gone, none while no
	// partition waits for that judgement, and the low watermarks looked
	// up when the metadata was trimmed past the Reader.
	MetadataWatermarks uint64
	// Sections fetched from the stores, and served by the Cache.
	SectionsFetched, CacheHits uint64
	// Batches and bytes yielded.
	Batches, Bytes uint64
	// Held is the number of entries held now: at most Config.MaxHeld,
	// unless more than that hold their partitions' next offsets.
	// Evicted counts entries forgotten, or left out, to stay within it.
	Held    int
	Evicted uint64
	// MetadataRewinds counts the metadata partitions read again from an
	// earlier record: for entries forgotten at MaxHeld, and after a Seek
	// back.
	MetadataRewinds uint64
	// DigestChecks counts comparisons of the rolling digest of what the
	// Reader yielded (package digest) with the one a leader published at
	// the same offset, DigestMismatches those that differed (each also a
	// *digest.Mismatch in Fetch.Errors), and DigestsTaken the times a
	// partition that knew no value, after New or a Seek, took its
	// leader's.
	DigestChecks, DigestMismatches, DigestsTaken uint64
}

// Batch is one record batch of a partition, as the broker appended it.
// Its Data may be shared with other Readers through the Cache and must
// not be modified.
type Batch struct {
	Partition metadata.TopicPartition
	storage.Batch
}

// Fetch is the result of one Poll: batches, in offset order within each
// partition, and errors: of partitions that are paused until Seek
// (*GoneError, *TruncatedError), and *digest.Mismatch for a partition
// whose batches yielded in the mismatch's range differ from its leader's
// log (each section was verified, so the difference is in which sections
// were taken: a fencing fault, or a leader's log that changed under
// it). A mismatch does not pause the partition; it is reported once.
type Fetch struct {
	Batches []Batch
	Errors  []error
}

// New validates cfg and returns a Reader; it reads nothing until Poll.
func New(cfg Config) (*Reader, error) {
	switch {
	case cfg.Log == nil:
		return nil, errors.New("directread: Config.Log is required")
	case len(cfg.Stores) == 0:
		return nil, errors.New("directread: Config.Stores needs at least one AZ's store")
	case len(cfg.Partitions) == 0:
		return nil, errors.New("directread: Config.Partitions needs at least one partition")
	case cfg.MaxBytes < 0:
		return nil, fmt.Errorf("directread: Config.MaxBytes %d is negative", cfg.MaxBytes)
	case cfg.MaxHeld < 0:
		return nil, fmt.Errorf("directread: Config.MaxHeld %d is negative", cfg.MaxHeld)
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 4 << 20
	}
	if cfg.Cache == nil {
		cfg.Cache = NewCache(64 << 20)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := cfg.Log.Partitions()
	meta := slices.Sorted(slices.Values(cfg.MetadataPartitions))
	meta = slices.Compact(meta)
	if len(meta) == 0 {
		for p := range n {
			meta = append(meta, p)
		}
	}
	for _, p := range meta {
		if p < 0 || p >= n {
			return nil, fmt.Errorf("directread: Config.MetadataPartitions: %w: %d of %d", metadata.ErrUnknownPartition, p, n)
		}
	}
	if cfg.UnavailableAfter < 0 {
		return nil, fmt.Errorf("directread: Config.UnavailableAfter %v is negative", cfg.UnavailableAfter)
	}
	r := &Reader{cfg: cfg, mgrs: make(map[string]*walstore.Manager), meta: meta, cursor: make(map[int32]int64)}
	core, err := readcore.New(readcore.Config{Partitions: cfg.Partitions, Durable: cfg.Durable, MaxBytes: cfg.MaxBytes,
		UnavailableFor: cfg.UnavailableAfter, MetadataPartitions: meta, Violation: r.violation, MaxHeld: cfg.MaxHeld})
	if err != nil {
		return nil, fmt.Errorf("directread: Config.Partitions: %w", err)
	}
	r.core = core
	quietLogs := slog.New(slog.NewTextHandler(io.Discard, nil))
	for az, store := range cfg.Stores {
		if store == nil {
			r.Close()
			return nil, fmt.Errorf("directread: Config.Stores[%q] is nil", az)
		}
		m, err := walstore.NewManager(walstore.ManagerConfig{Store: store, Logger: quietLogs})
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("directread: store of %s: %w", az, err)
		}
		r.mgrs[az] = m
	}
	return r, nil
}

// Close releases the Reader. Poll then returns ErrClosed.
func (r *Reader) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.pollMu.Lock() // wait for a Poll under way
	defer r.pollMu.Unlock()
	for az, m := range r.mgrs {
		m.Close()
		delete(r.mgrs, az)
	}
	return nil
}

// Seek makes tp's next batch the one holding offset, and resumes it if a
// GoneError or TruncatedError paused it. Backwards or forwards, to
// records the objects still hold (walstore.NodeConfig.RetainFor), the
// Reader serves them: the entries of records it yielded are forgotten,
// so it reads the metadata again for them, in each metadata partition
// from the first record that describes them. Records no longer retained
// are reported as a GoneError, as on the first read.
func (r *Reader) Seek(tp metadata.TopicPartition, offset int64) error {
	if offset < 0 {
		return fmt.Errorf("directread: seek %s to negative offset %d", tp, offset)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.core.Seek(tp, offset); err != nil {
		return fmt.Errorf("directread: %w", err)
	}
	return nil
}

// Position returns tp's next offset and the highest committed offset the
// Reader has learned for it: their difference is the Reader's lag.
func (r *Reader) Position(tp metadata.TopicPartition) (next, committed int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next, committed, _ = r.core.Position(tp)
	return next, committed
}

// Stats returns the Reader's counters.
func (r *Reader) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	cc := r.core.Counters()
	s.Held, s.Evicted, s.MetadataRewinds = cc.Held, cc.Evicted, cc.Rewinds
	s.DigestChecks, s.DigestMismatches, s.DigestsTaken = cc.DigestChecks, cc.DigestMismatches, cc.DigestsTaken
	return s
}

// Poll returns the next batches of the Reader's partitions, blocking
// until there are some, a partition fails (Fetch.Errors), or ctx ends.
// It reads the metadata log, fetches the sections it can serve (each
// Poll at most MaxBytes of them) and yields their committed batches.
// Errors of the stores and the metadata log are retried; Poll returns an
// error only for ctx, a closed Reader, a closed metadata log, or a
// metadata log whose answer broke its contract (a *walstore.DependencyError
// naming the call, matching walstore.ErrContractViolation: a high
// watermark below what was read, records out of order). Such an answer
// is not trusted, so no records are judged gone on it, and the next Poll
// reads on.
func (r *Reader) Poll(ctx context.Context) (Fetch, error) {
	r.pollMu.Lock()
	defer r.pollMu.Unlock()
	backoff := 10 * time.Millisecond
	for {
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		if closed {
			return Fetch{}, ErrClosed
		}
		f, transient := r.serve(ctx)
		if len(f.Batches)+len(f.Errors) > 0 {
			return f, nil
		}
		if err := ctx.Err(); err != nil {
			return Fetch{}, err
		}
		if transient {
			select {
			case <-ctx.Done():
				return Fetch{}, ctx.Err()
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		}
		if err := r.readMetadata(ctx); err != nil {
			return Fetch{}, err
		}
	}
}

// serve plans every partition, fetches what they want and yields it.
// transient reports a fetch that failed and will be retried.
func (r *Reader) serve(ctx context.Context) (f Fetch, transient bool) {
	r.mu.Lock()
	r.core.Plan()
	plan := r.take()
	r.mu.Unlock()
	for _, p := range plan.Pauses {
		f.Errors = append(f.Errors, pauseError(p))
	}
	f.Errors = r.mismatches(f.Errors, plan.Mismatches)
	wants := plan.Fetches
	if len(wants) == 0 {
		return f, false
	}
	results := r.fetch(ctx, wants)
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for i, w := range wants {
		res := followcore.Result{Entry: w.Entry, Outcome: followcore.OutcomeOf(results[i].err), Batches: results[i].batches, Err: results[i].err}
		if errors.Is(res.Err, ErrNoStore) {
			res.Outcome = followcore.Gone
		}
		r.core.Fetched(now, w, res)
	}
	rd := r.take()
	for _, y := range rd.Yields {
		f.Batches = append(f.Batches, Batch{Partition: y.Partition, Batch: y.Batch})
		r.stats.Batches++
		r.stats.Bytes += uint64(len(y.Batch.Data))
	}
	for _, g := range rd.GivenUp {
		r.cfg.Logger.Warn("directread: section cannot be read", "partition", g.Entry.Partition.String(), "err", g.Err)
	}
	f.Errors = r.mismatches(f.Errors, rd.Mismatches)
	return f, rd.Retry
}

// mismatches adds the digest mismatches ms to errs, and to the log.
func (r *Reader) mismatches(errs []error, ms []digest.Mismatch) []error {
	for i := range ms {
		m := &ms[i]
		r.cfg.Logger.Error("directread: records yielded differ from the leader's log", "err", m)
		errs = append(errs, m)
	}
	return errs
}

// take takes the core's Ready and acknowledges it; r.mu held.
func (r *Reader) take() readcore.Ready {
	rd := r.core.Ready()
	r.core.Advance()
	return rd
}

// pauseError is the error a paused partition reports.
func pauseError(p readcore.Pause) error {
	if p.Truncated {
		return &TruncatedError{Partition: p.Partition, Offset: p.Offset}
	}
	return &GoneError{Partition: p.Partition, Offset: p.Offset, ResumeHint: p.ResumeHint, Cause: p.Cause}
}

type fetched struct {
	batches []storage.Batch
	err     error
}

// fetch reads the wanted sections through the cache: cached ones at once,
// ones another Reader is fetching after it, the rest coalesced per object.
func (r *Reader) fetch(ctx context.Context, wants []readcore.Want) []fetched {
	out := make([]fetched, len(wants))
	var mine, waited []int
	waits := make(map[int]<-chan struct{})
	for i, w := range wants {
		k := sectionOf(&w.Entry)
		if b, ch, ok := r.cfg.Cache.claim(k); ok {
			out[i].batches = b
			r.mu.Lock()
			r.stats.CacheHits++
			r.mu.Unlock()
		} else if ch != nil {
			waits[i] = ch
			waited = append(waited, i)
		} else {
			mine = append(mine, i)
		}
	}
	r.fetchOwn(ctx, wants, mine, out)
	for _, i := range waited {
		select {
		case <-waits[i]:
		case <-ctx.Done():
			out[i].err = ctx.Err()
			continue
		}
		k := sectionOf(&wants[i].Entry)
		if b, ch, ok := r.cfg.Cache.claim(k); ok {
			out[i].batches = b
		} else if ch == nil {
			r.fetchOwn(ctx, wants, []int{i}, out) // the other fetch failed
		} else {
			out[i].err = fmt.Errorf("directread: %w: section in flight elsewhere", storage.ErrUnavailable)
		}
	}
	return out
}

// fetchOwn fetches the sections at idx, which this Reader claimed, and
// releases them to the cache.
func (r *Reader) fetchOwn(ctx context.Context, wants []readcore.Want, idx []int, out []fetched) {
	byAZ := make(map[string][]int)
	for _, i := range idx {
		byAZ[wants[i].Entry.Object.AZ] = append(byAZ[wants[i].Entry.Object.AZ], i)
	}
	for _, az := range slices.Sorted(maps.Keys(byAZ)) {
		ids := byAZ[az]
		m := r.mgrs[az]
		var results []walstore.FetchResult
		var err error
		if m == nil {
			err = fmt.Errorf("%w %q", ErrNoStore, az)
		} else {
			entries := make([]metadata.Entry, len(ids))
			for j, i := range ids {
				entries[j] = wants[i].Entry
			}
			results, err = m.Fetch(ctx, entries)
		}
		for j, i := range ids {
			k := sectionOf(&wants[i].Entry)
			if err != nil {
				out[i].err = err
				r.cfg.Cache.release(k, nil)
				continue
			}
			out[i] = fetched{batches: results[j].Batches, err: results[j].Err}
			if out[i].err != nil {
				out[i].batches = nil
			}
			r.cfg.Cache.release(k, out[i].batches)
			if out[i].err == nil {
				r.mu.Lock()
				r.stats.SectionsFetched++
				r.mu.Unlock()
			}
		}
	}
}

// metaRead is one round's read of a metadata partition.
type metaRead struct {
	from int64 // where the read began: the cursor, or the low watermark
	recs []metadata.Record
	high int64 // a high watermark taken before the read, if hasHigh
	err  error // the read's error
	// hasHigh: high was taken; highErr: taking it failed.
	hasHigh bool
	highErr error
	calls   uint64 // of Log.Watermarks
}

// readMetadata reads every metadata partition from its cursor, in
// parallel (each read may long-poll), and hands the messages to the
// core, a round at a time. While a partition waits for a gone judgement,
// it first takes the high watermarks the core asks for: the core judges
// once every metadata partition was read up to one taken in a round
// after the partition last changed, or found at its end (readcore's
// Core.Plan says why that is enough). A metadata log that breaks its
// contract is reported as a *walstore.DependencyError. The partitions the
// core asks to read again (Core.Round) are read from there.
func (r *Reader) readMetadata(ctx context.Context) error {
	r.mu.Lock()
	r.core.Round()
	round := r.take()
	r.mu.Unlock()
	want := round.Watermarks
	rewound := make(map[int32]bool, len(round.Rewinds))
	for _, rw := range round.Rewinds {
		r.cursor[rw.Partition], rewound[rw.Partition] = min(r.cursor[rw.Partition], rw.From), true
	}
	reads := make([]metaRead, len(r.meta))
	var wg sync.WaitGroup
	for i, mp := range r.meta {
		wg.Go(func() { reads[i] = r.readPartition(ctx, mp, slices.Contains(want, mp)) })
	}
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	var violation error
	for i, mp := range r.meta {
		rd := reads[i]
		r.stats.MetadataWatermarks += rd.calls
		if rd.highErr != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("directread: taking a metadata high watermark failed; retrying", "metadata_partition", mp, "err", rd.highErr)
		}
		if rd.err != nil {
			if errors.Is(rd.err, metadata.ErrClosed) {
				return fmt.Errorf("directread: reading metadata partition %d: %w", mp, rd.err)
			}
			if errors.Is(rd.err, walstore.ErrContractViolation) {
				violation = cmp.Or(violation, rd.err)
			} else if ctx.Err() == nil {
				r.cfg.Logger.Warn("directread: reading metadata failed; retrying", "metadata_partition", mp, "err", rd.err)
			}
		}
		if rd.from != r.cursor[mp] {
			if !rewound[mp] {
				r.cfg.Logger.Warn("directread: metadata trimmed past the reader", "metadata_partition", mp, "from", r.cursor[mp], "low", rd.from)
			}
			r.cursor[mp] = rd.from
		}
		next := rd.from
		for _, rec := range rd.recs {
			if rec.Offset < next {
				violation = cmp.Or(violation, r.violation("metadata.Log.Read",
					fmt.Sprintf("partition %d: record at offset %d where %d or later was due (read from %d)", mp, rec.Offset, next, rd.from)))
				break
			}
			next = rec.Offset + 1
			r.stats.MetadataRecords++
			m, err := metadata.DecodeMessage(rec.Value)
			if err != nil {
				r.stats.CorruptMetadata++
				r.cfg.Logger.Error("directread: skipping a metadata record that does not decode", "metadata_partition", mp, "offset", rec.Offset, "err", err)
				continue
			}
			r.core.Learn(mp, rec.Offset, m)
		}
		r.cursor[mp] = next
		err := r.core.MetadataRead(readcore.MetadataRead{Partition: mp, From: rd.from, Next: next, High: rd.high, HasHigh: rd.hasHigh,
			AtEnd: rd.err == nil && len(rd.recs) == 0})
		violation = cmp.Or(violation, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if violation != nil {
		return fmt.Errorf("directread: %w", violation)
	}
	return nil
}

// readPartition is one round's read of metadata partition mp, from its
// cursor, after taking its high watermark if high. A cursor the log
// trimmed past moves to the low watermark, whose lookup gives a high
// watermark too.
func (r *Reader) readPartition(ctx context.Context, mp int32, high bool) metaRead {
	rd := metaRead{from: r.cursor[mp]}
	if high {
		rd.calls++
		if _, rd.high, rd.highErr = r.cfg.Log.Watermarks(ctx, mp); rd.highErr == nil {
			rd.hasHigh = true
		}
	}
	rd.recs, rd.err = r.cfg.Log.Read(ctx, mp, rd.from, 500)
	if !errors.Is(rd.err, metadata.ErrOffsetOutOfRange) {
		return rd
	}
	// Trimmed past the cursor: start again at the low watermark; a
	// GoneError tells of what was lost.
	rd.calls++
	low, hw, err := r.cfg.Log.Watermarks(ctx, mp)
	if err == nil && low < 0 {
		err = r.violation("metadata.Log.Watermarks", fmt.Sprintf("partition %d: negative low watermark %d", mp, low))
	}
	if err != nil {
		rd.err = err
		return rd
	}
	rd.from, rd.high, rd.hasHigh, rd.highErr = low, hw, true, nil
	rd.recs, rd.err = r.cfg.Log.Read(ctx, mp, low, 500)
	return rd
}

// violation is the error for an answer of the metadata log that breaks
// its contract.
func (r *Reader) violation(call, detail string) error {
	return &walstore.DependencyError{Dependency: call, Err: fmt.Errorf("%w: %s", walstore.ErrContractViolation, detail)}
}
