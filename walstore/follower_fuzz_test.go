package walstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// FuzzFollower feeds a follower engine arbitrary metadata: epoch-start
// markers with any epochs and starts, entries of real objects with any
// record and publisher epochs, offsets, byte ranges, buckets and keys, in
// any order and grouping, interleaved with garbage records and the passing
// of time. The follower follows two of three partitions and reads through a
// store that knows two buckets. Every execution runs in a synctest bubble
// for a minute of simulated time and checks that the follower
//
//   - never panics, and its Run returns nil (only a failing local log may
//     stop it, and the local log fails only on an append that does not
//     continue it);
//   - appends only batches that some object truly holds, byte for byte;
//   - appends only offsets where the leader lineage it has learned, from
//     the markers of the messages it has handled, gives the batch's epoch:
//     fencing's first guarantee, checked against the markers themselves
//     rather than against fencing.Decide;
//   - never appends to a partition it does not follow;
//   - makes no request to a bucket the store was not configured with;
//   - leaves no goroutine behind (synctest fails the bubble otherwise).
func FuzzFollower(f *testing.F) {
	for _, seed := range followerSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		synctest.Test(t, func(t *testing.T) { fuzzFollower(t, input) })
	})
}

// The partitions of the fuzzed world: the follower follows the first two.
var fuzzTPs = []metadata.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}, {Topic: "b", Partition: 0}}

// fuzzMaxEpoch is the highest epoch an input gives a marker or an entry.
const fuzzMaxEpoch = 6

// fuzzBase is each partition's first offset, so markers and offsets drawn
// from small numbers land near the data.
var fuzzBase = []int64{0, 100, 0}

// fuzzData returns the bytes of the one true batch [first, last] of tp at
// epoch: a record is named by (epoch, offset), so two objects holding the
// same records hold the same bytes.
func fuzzData(tp metadata.TopicPartition, epoch int32, first, last int64) []byte {
	return fmt.Appendf(nil, "%s e%d [%d,%d] payload", tp, epoch, first, last)
}

// fuzzSection is one section of a fuzz object: records [first, last] of a
// partition at an epoch, cut into batches of size records, published at a
// publisher epoch.
type fuzzSection struct {
	tp               int
	epoch, publisher int32
	first, last      int64
	size             int64
}

// fuzzObjects is the world's objects, by bucket: partition a-0 has epoch 1
// at 0-29, epoch 2 from 20 (so epoch 1's 20-29 were not the partition's),
// epoch 3 from 30, and a republished copy of epoch 1 by epoch 3's leader;
// a-1 has epoch 1 at 100-119 and epoch 4 from 110; b-0 is not followed.
var fuzzObjects = []struct {
	az       string
	sections []fuzzSection
}{
	{"az1", []fuzzSection{{0, 1, 1, 0, 14, 5}, {1, 1, 1, 100, 109, 10}}},
	{"az1", []fuzzSection{{0, 1, 1, 15, 29, 5}, {2, 1, 1, 0, 9, 5}}},
	{"az2", []fuzzSection{{0, 2, 2, 20, 39, 10}}},
	{"az2", []fuzzSection{{0, 3, 3, 30, 49, 10}, {1, 4, 4, 110, 129, 4}}},
	{"az2", []fuzzSection{{0, 1, 3, 0, 19, 20}}},
	{"az1", []fuzzSection{{1, 1, 1, 110, 119, 10}}},
}

// fuzzBuckets are bucket names an input may give a message's object: the
// two the store knows, and others it does not.
var fuzzBuckets = []string{"bucket-az1", "bucket-az2", "bucket-az9", "bucket-AZ1", "bucket-az1 ", "x"}

func fuzzFollower(t *testing.T, input []byte) {
	ctx := t.Context()
	quiet := slog.New(slog.DiscardHandler)
	cluster, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "bucket-az1", "az2": "bucket-az2"}})
	if err != nil {
		t.Fatal(err)
	}
	truth := make(map[string][]byte) // "tp epoch first last" -> bytes
	var entries []metadata.Entry
	for i, o := range fuzzObjects {
		store, err := cluster.Store(o.az)
		if err != nil {
			t.Fatal(err)
		}
		mgr, err := walstore.NewManager(walstore.ManagerConfig{Store: store, BrokerID: 1, Seed: uint64(i), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		var inputs []walstore.CopyInput
		for _, s := range o.sections {
			tp := fuzzTPs[s.tp]
			in := walstore.CopyInput{Partition: tp, PublisherEpoch: s.publisher}
			for first := s.first; first <= s.last; first += s.size {
				last := min(first+s.size-1, s.last)
				data := fuzzData(tp, s.epoch, first, last)
				truth[fmt.Sprint(tp, s.epoch, first, last)] = data
				in.Batches = append(in.Batches, storage.Batch{Epoch: s.epoch, FirstOffset: first, LastOffset: last, MaxTimestamp: last, Data: data})
			}
			inputs = append(inputs, in)
		}
		es, err := mgr.Copy(ctx, inputs)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, es...)
		mgr.Close()
	}
	cluster.ResetStats()

	meta, err := memstore.NewLog(1, memstore.WithMaxPollWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	store, err := cluster.Store("az2")
	if err != nil {
		t.Fatal(err)
	}
	w := &fuzzWatch{t: t, truth: truth, leader: make(map[metadata.TopicPartition]*fencing.LeaderLineage)}
	follows := func(tp metadata.TopicPartition) bool { return tp == fuzzTPs[0] || tp == fuzzTPs[1] }
	f, err := walstore.NewNode(walstore.NodeConfig{
		BrokerID: 2, Store: &fuzzStore{ObjectStore: store, w: w}, Log: &fuzzLog{Log: meta, w: w},
		Local:   &fuzzLocal{LocalLog: memstore.NewLocalLog(), w: w, follows: follows},
		Backoff: walstore.Backoff{Initial: time.Millisecond, Max: 50 * time.Millisecond},
		Logger:  quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.f = f
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()
	// The broker knows the highest epoch any input can name, so that the
	// follower acts on every marker it reads.
	for _, tp := range fuzzTPs[:2] {
		if err := f.BecomeFollower(ctx, tp, fuzzMaxEpoch, 1); err != nil {
			t.Fatal(err)
		}
	}

	publish(ctx, t, meta, entries, input)
	time.Sleep(time.Minute)
	synctest.Wait()
	select {
	case err := <-done:
		t.Fatalf("the follower stopped on its own: %v", err)
	default:
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Requests counted by memstore are requests made: refs to buckets it
	// does not know must have been refused before any.
	w.mu.Lock()
	defer w.mu.Unlock()
	if got := cluster.Stats().Total.GetRequests; got != w.knownGets {
		t.Fatalf("memstore counted %d GETs; the follower made %d to known buckets with valid ranges", got, w.knownGets)
	}
}

// publish turns input into metadata messages and appends them, with the
// passing of time between them. Each byte-coded operation adds to the
// message being built, sends it, or waits:
//
//	0 tp n (epoch start)*n   markers of a partition
//	1 i mask fields...       entry i of the world, fields overridden by mask
//	2 b k                    the message's object: bucket b, key of entry k
//	3                        send the message
//	4 d                      wait d*7ms
//	5 n bytes*n              append n raw bytes as a record
//
// A message the codec refuses (overlapping ranges, an entry of another
// object, a publisher epoch below the record epoch) is not sent: a
// follower never sees one.
func publish(ctx context.Context, t *testing.T, meta metadata.Log, entries []metadata.Entry, input []byte) {
	r := fuzzReader{b: input}
	var m metadata.Message
	object := -1 // index of the entry whose object the message names
	bucket, key := "", ""
	send := func() {
		if len(m.Entries) > 0 {
			ref := entries[object].Object
			if bucket != "" {
				ref.Bucket = bucket
			}
			if key != "" {
				ref.Key = key
			}
			m.Object = ref
			for i := range m.Entries {
				m.Entries[i].Object = ref
			}
		}
		if b, err := metadata.AppendMessage(nil, &m); err == nil {
			if _, err := meta.Append(ctx, 0, b); err != nil {
				t.Fatal(err)
			}
		}
		m, object, bucket, key = metadata.Message{}, -1, "", ""
	}
	for !r.done() {
		switch r.next() % 6 {
		case 0:
			tp := int(r.next()) % len(fuzzTPs)
			for range 1 + r.next()%3 {
				m.Markers = append(m.Markers, metadata.EpochStart{
					Partition: fuzzTPs[tp], Epoch: int32(r.next() % (fuzzMaxEpoch + 1)), StartOffset: fuzzBase[tp] + int64(r.next()%64), LeaderBrokerID: 1,
				})
			}
		case 1:
			i := int(r.next()) % len(entries)
			e := entries[i]
			if object >= 0 && entries[object].Object != e.Object {
				send()
			}
			object = i
			mask := r.next()
			base := fuzzBase[tpIndex(e.Partition)]
			if mask&1 != 0 {
				e.RecordEpoch = int32(r.next() % (fuzzMaxEpoch + 1))
			}
			if mask&2 != 0 {
				e.PublisherEpoch = int32(r.next() % (fuzzMaxEpoch + 1))
			}
			if mask&4 != 0 {
				e.FirstOffset = base + int64(r.next()%64)
			}
			if mask&8 != 0 {
				e.LastOffset = e.FirstOffset + int64(r.next()%24) - 2
			}
			if mask&16 != 0 {
				e.Position += int64(int8(r.next()))
			}
			if mask&32 != 0 {
				e.Length += int64(int8(r.next()))
			}
			if mask&64 != 0 {
				e.Checksum ^= uint64(r.next()) << (8 * (r.next() % 8))
			}
			if mask&128 != 0 {
				e.Partition = fuzzTPs[int(r.next())%len(fuzzTPs)]
			}
			m.Entries = append(m.Entries, e)
		case 2:
			bucket = fuzzBuckets[int(r.next())%len(fuzzBuckets)]
			key = entries[int(r.next())%len(entries)].Object.Key
		case 3:
			send()
		case 4:
			time.Sleep(time.Duration(r.next()) * 7 * time.Millisecond)
		case 5:
			raw := make([]byte, r.next()%32)
			for i := range raw {
				raw[i] = r.next()
			}
			if _, err := meta.Append(ctx, 0, raw); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(m.Entries) > 0 || len(m.Markers) > 0 {
		send()
	}
}

func tpIndex(tp metadata.TopicPartition) int {
	for i, x := range fuzzTPs {
		if x == tp {
			return i
		}
	}
	return 0
}

// fuzzReader hands out the input's bytes, then zeros.
type fuzzReader struct {
	b []byte
	i int
}

func (r *fuzzReader) done() bool { return r.i >= len(r.b) }

func (r *fuzzReader) next() byte {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

// fuzzWatch is what the checks know: the true batches, the messages handed
// to the follower in order, and the leader lineages they teach.
type fuzzWatch struct {
	t     *testing.T
	f     *walstore.Node
	truth map[string][]byte

	mu        sync.Mutex
	delivered []*metadata.Message
	folded    int
	leader    map[metadata.TopicPartition]*fencing.LeaderLineage
	knownGets int64
}

// lineage returns the leader lineage of tp learned from the messages the
// follower has handled: each message's markers of a partition are one
// publication, merged as the engine merges them. Called on the engine's
// goroutine when it appends, when handling has finished for every message
// counted.
func (w *fuzzWatch) lineage(tp metadata.TopicPartition) *fencing.LeaderLineage {
	handled := int(w.f.Stats().Follower.Messages)
	w.mu.Lock()
	defer w.mu.Unlock()
	for ; w.folded < handled && w.folded < len(w.delivered); w.folded++ {
		pubs := make(map[metadata.TopicPartition][]metadata.EpochStart)
		for _, mk := range w.delivered[w.folded].Markers {
			pubs[mk.Partition] = append(pubs[mk.Partition], mk)
		}
		for p, markers := range pubs {
			if w.leader[p] == nil {
				w.leader[p] = &fencing.LeaderLineage{}
			}
			_ = w.leader[p].Merge(markers...) // the engine ignores what Merge refuses, too
		}
	}
	if w.leader[tp] == nil {
		return &fencing.LeaderLineage{}
	}
	return w.leader[tp].Clone()
}

// fuzzLog records the messages the follower reads, in order.
type fuzzLog struct {
	metadata.Log
	w *fuzzWatch
}

func (l *fuzzLog) Read(ctx context.Context, partition int32, from int64, max int) ([]metadata.Record, error) {
	recs, err := l.Log.Read(ctx, partition, from, max)
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	for _, r := range recs {
		if m, err := metadata.DecodeMessage(r.Value); err == nil {
			l.w.delivered = append(l.w.delivered, m)
		}
	}
	return recs, err
}

// fuzzStore counts the GETs that reach a bucket the store knows with a
// range memstore accepts, and checks that others are refused as unknown.
type fuzzStore struct {
	storage.ObjectStore
	w *fuzzWatch
}

func (s *fuzzStore) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	b, err := s.ObjectStore.GetRange(ctx, ref, offset, length)
	known := ref.Bucket == "bucket-az1" || ref.Bucket == "bucket-az2"
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	switch {
	case !known && !errors.Is(err, storage.ErrUnknownBucket):
		s.w.t.Errorf("GET of %s, a bucket the store does not know, returned %v", ref, err)
	case known && offset >= 0 && length > 0:
		s.w.knownGets++
	}
	return b, err
}

// fuzzLocal is the follower's local log, checking every append.
type fuzzLocal struct {
	*memstore.LocalLog
	w       *fuzzWatch
	follows func(metadata.TopicPartition) bool
}

func (l *fuzzLocal) Append(ctx context.Context, tp metadata.TopicPartition, batches []storage.Batch) error {
	t := l.w.t
	if !l.follows(tp) {
		t.Errorf("appended to %s, which the follower does not follow", tp)
	}
	lineage := l.w.lineage(tp)
	for _, b := range batches {
		if want, ok := l.w.truth[fmt.Sprint(tp, b.Epoch, b.FirstOffset, b.LastOffset)]; !ok || !bytes.Equal(want, b.Data) {
			t.Errorf("appended %s e%d [%d, %d], which no object holds: %q", tp, b.Epoch, b.FirstOffset, b.LastOffset, b.Data)
		}
		for _, o := range []int64{b.FirstOffset, b.LastOffset} {
			if e, _, ok := lineage.At(o); !ok || e != b.Epoch {
				t.Errorf("appended %s e%d [%d, %d], but the lineage it learned, %s, says offset %d is epoch %d (known %v)",
					tp, b.Epoch, b.FirstOffset, b.LastOffset, lineage, o, e, ok)
			}
		}
	}
	return l.LocalLog.Append(ctx, tp, batches)
}

// followerSeeds are hand-built inputs: the scenarios of docs/design.md (a
// clean history, a fence arriving before and after the fenced entries, a
// republish, an unknown bucket, a corrupted checksum) as starting points.
func followerSeeds() [][]byte {
	marker := func(tp, epoch, start byte) []byte { return []byte{0, tp, 0, epoch, start} }
	entry := func(i byte) []byte { return []byte{1, i, 0} }
	send := []byte{3}
	tick := []byte{4, 20}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	// Entries of the world, in Copy order: 0 a-0 e1 0-14, 1 a-1 e1
	// 100-109, 2 a-0 e1 15-29, 3 b-0 e1 0-9, 4 a-0 e2 20-39, 5 a-0 e3
	// 30-49, 6 a-1 e4 110-129, 7 a-0 e1 0-19 (republished by 3), 8 a-1 e1
	// 110-119.
	return [][]byte{
		cat(marker(0, 1, 0), send, entry(0), send, entry(2), send, tick),
		cat(marker(0, 1, 0), send, entry(0), send, entry(2), send, tick, marker(0, 2, 20), send, entry(4), send, tick),
		cat(marker(0, 1, 0), marker(0, 2, 20), send, entry(2), send, entry(0), send, entry(4), send, tick),
		cat(entry(5), send, entry(4), send, entry(7), send, marker(0, 1, 0), marker(0, 2, 20), marker(0, 3, 30), send, entry(0), send, tick),
		cat(marker(1, 1, 0), send, entry(1), []byte{2, 2, 1}, send, tick, entry(1), send, entry(8), send, marker(1, 4, 10), send, entry(6), send, tick),
		cat(marker(0, 1, 0), send, []byte{1, 0, 64, 7, 0}, send, tick, entry(0), send, []byte{5, 3, 1, 2, 3}, tick),
		// Found by fuzzing: a marker starting an epoch inside an applied
		// batch once stopped the follower (a truncation inside a batch).
		[]byte("0002\x001Z\x009X00000A01"),
	}
}
