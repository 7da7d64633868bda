package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// simStore is a broker's memstore.Store behind the simulated network:
// chaos, as the store's faults.Injector, decides each request's latency
// and faults, and every stored object's sections are recorded (so the
// checks know which records object storage holds), and every delete is
// judged against what followers still need before it is carried out.
// Requests do not wait: the simNode that makes one schedules its result
// for when its latency has passed. GETs are made through a
// walstore.Manager (its coalescing and verification are the engines'),
// which calls GetRange: that goes through faults.WrapStore, whose delays
// lat collects.
type simStore struct {
	*memstore.Store
	w *world
	b *broker
	// faulty is Store behind the store's Inject, for GETs.
	faulty storage.ObjectStore
	// lat are the latencies of the GETs since the last take.
	lat []time.Duration
}

func newSimStore(st *memstore.Store, w *world, b *broker) *simStore {
	s := &simStore{Store: st, w: w, b: b}
	s.faulty = faults.WrapStore(st, s, faults.WithWait(func(_ context.Context, d time.Duration) error {
		s.lat = append(s.lat, d)
		return nil
	}))
	return s
}

// Inject is the broker's faults.Injector: chaos decides the request's
// fate from its identity, which is what it carries (the body's or the
// objects' content, the range) and not when it comes.
func (s *simStore) Inject(_ context.Context, r faults.Request) faults.Effect {
	local := s.Local().Bucket
	switch r.Op {
	case faults.OpPut:
		return s.w.chaos.decide(r.Op, r.Bucket, false, r.Length, identity(idPut, uint64(s.b.id), xxhash.Sum64(r.Body)))
	case faults.OpGetRange, faults.OpReadRange:
		ref := metadata.ObjectRef{AZ: r.AZ, Bucket: r.Bucket, Key: r.Key}
		id := identity(idGet, uint64(s.b.id), s.w.objectID(ref), uint64(r.Offset), uint64(r.Length))
		return s.w.chaos.decide(faults.OpGetRange, r.Bucket, r.Bucket != local, r.Length, id)
	case faults.OpDelete:
		parts := []uint64{idDelete, uint64(s.b.id)}
		for _, ref := range r.Refs {
			parts = append(parts, s.w.objectID(ref))
		}
		return s.w.chaos.decide(r.Op, r.Bucket, r.Bucket != local, 0, identity(parts...))
	}
	return faults.Effect{}
}

// object is one stored combined object.
type object struct {
	ref      metadata.ObjectRef
	sum      uint64 // xxhash64 of the body
	sections []combiner.SectionInfo
	deleted  bool
}

// storedSection is one partition section of a stored object.
type storedSection struct {
	epoch       int32
	first, last int64
	obj         *object
}

// put decides the fate of a PUT of body: its latency, and the call that
// performs it when that has passed.
func (s *simStore) put(key string, body []byte) (time.Duration, func() (metadata.ObjectRef, error)) {
	sum := xxhash.Sum64(body)
	local := s.Local()
	req := faults.Request{Op: faults.OpPut, StoreAZ: local.AZ, AZ: local.AZ, Bucket: local.Bucket, Key: key, Length: int64(len(body)), Body: body}
	v := s.Inject(context.Background(), req)
	return v.Delay, func() (metadata.ObjectRef, error) {
		if err := v.Before(req); err != nil {
			return metadata.ObjectRef{}, err
		}
		ref, err := s.Store.Put(context.Background(), key, body)
		if err != nil {
			return ref, err
		}
		sections, ferr := combiner.ReadFooter(body, int64(len(body)))
		if ferr != nil {
			s.w.violate(KindHarness, "b%d stored %s, which does not list its own sections: %v", s.b.id, ref, ferr)
			return ref, nil
		}
		s.w.stored(ref, sum, sections)
		if s.w.cfg.Verbose {
			var b strings.Builder
			for _, sec := range sections {
				fmt.Fprintf(&b, " %s:e%d[%d-%d]", sec.Partition, sec.Epoch, sec.FirstOffset, sec.LastOffset)
			}
			s.w.tracef("b%d stored %s:%s", s.b.id, ref, b.String())
		}
		if err := v.After(req); err != nil {
			return metadata.ObjectRef{}, err
		}
		return ref, nil
	}
}

// GetRange answers at once; its latency goes to lat.
func (s *simStore) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	if !s.w.knownBucket(ref.Bucket) || length <= 0 {
		return s.Store.GetRange(ctx, ref, offset, length) // refused before any request
	}
	data, err := s.faulty.GetRange(ctx, ref, offset, length)
	if errors.Is(err, storage.ErrNotFound) {
		s.w.stats.NotFound++
	}
	return data, err
}

// ReadRange is GetRange copied into dst: the same chaos decides its fate.
// memstore.Store's, which would otherwise be promoted and get around it,
// is called only for an empty dst, which it refuses before any request.
func (s *simStore) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	if len(dst) == 0 {
		return s.Store.ReadRange(ctx, ref, offset, dst)
	}
	data, err := s.GetRange(ctx, ref, offset, int64(len(dst)))
	if err != nil {
		return 0, err
	}
	return copy(dst, data), nil
}

// takeLatency returns how long the GETs made since the last call take
// with at most parallel of them at a time, and forgets them.
func (s *simStore) takeLatency(parallel int) time.Duration {
	var longest, sum time.Duration
	for _, l := range s.lat {
		longest = max(longest, l)
		sum += l
	}
	s.lat = s.lat[:0]
	return max(longest, sum/time.Duration(max(parallel, 1)))
}

// delete decides the fate of a DELETE of refs: its latency, and the call
// that performs it when that has passed. It is judged now, as the
// collector decided it, against the followers and logs of this moment.
func (s *simStore) delete(refs []metadata.ObjectRef) (time.Duration, func() error) {
	req := faults.Request{Op: faults.OpDelete, StoreAZ: s.Local().AZ, AZ: refs[0].AZ, Bucket: refs[0].Bucket, Refs: refs}
	v := s.Inject(context.Background(), req)
	s.w.judgeDelete(s.b, refs)
	return v.Delay, func() error {
		if err := v.Before(req); err != nil {
			return err
		}
		if s.w.cfg.Verbose {
			s.w.tracef("b%d deletes %v", s.b.id, refs)
		}
		s.w.deleted(refs)
		if err := s.Store.Delete(context.Background(), refs); err != nil {
			return err
		}
		return v.After(req)
	}
}

// objectID names an object by its content where known: keys carry a
// random part the engines draw in racy order.
func (w *world) objectID(ref metadata.ObjectRef) uint64 {
	if o := w.objects[ref]; o != nil {
		return o.sum
	}
	return hashString(ref.Bucket + "/" + ref.Key)
}

func (w *world) knownBucket(name string) bool {
	for i := range numAZs {
		if name == bucketName(i) {
			return true
		}
	}
	return false
}

func (w *world) stored(ref metadata.ObjectRef, sum uint64, sections []combiner.SectionInfo) {
	o := &object{ref: ref, sum: sum, sections: sections}
	w.objects[ref] = o
	for _, s := range sections {
		w.sections[s.Partition] = append(w.sections[s.Partition], storedSection{epoch: s.Epoch, first: s.FirstOffset, last: s.LastOffset, obj: o})
	}
	w.stats.Objects++
}

// liveCopy reports whether an object not deleted, and not among
// going, holds batch m of tp.
func (w *world) liveCopy(tp metadata.TopicPartition, m batchMeta, going map[*object]bool) bool {
	for _, s := range w.sections[tp] {
		if !s.obj.deleted && !going[s.obj] && s.epoch == m.epoch && s.first <= m.first && m.last <= s.last {
			return true
		}
	}
	return false
}

// judgeDelete judges a garbage collector's delete. An object may go once
// no follower needs it: a violation is a section holding records of the
// true log that a follower the deleting leader serves does not hold (at or
// above its log start), and that no other object still holds. Only the
// partition's current leader is judged: every leadership republishes from
// the lowest offset its followers lack (and a reassignment from the log
// start), so what a former leader deletes, on reports that may be stale
// by now, current followers get from the current leader; whether they do
// is the end of the run's business.
func (w *world) judgeDelete(b *broker, refs []metadata.ObjectRef) {
	going := make(map[*object]bool)
	for _, ref := range refs {
		if o := w.objects[ref]; o != nil && !o.deleted {
			going[o] = true
		}
	}
	for _, ref := range refs {
		o := w.objects[ref]
		if !going[o] {
			continue
		}
		for _, s := range o.sections {
			ps := w.parts[s.Partition]
			if _, zombie := ps.zombies[b.id]; ps == nil || ps.leader != b.id || zombie {
				continue
			}
			_, truth := w.brokers[ps.leader].log.snapshot(s.Partition)
			for i := max(covering(truth, s.FirstOffset), 0); i < len(truth) && truth[i].first <= s.LastOffset; i++ {
				x := truth[i]
				if x.epoch != s.Epoch || x.first < s.FirstOffset || x.last > s.LastOffset {
					continue
				}
				for _, r := range b.followersOf(s.Partition) {
					if r == ps.leader || !containsID(ps.replicas, r) || w.lostTail[s.Partition][r] || !w.brokers[r].log.needs(s.Partition, x) || w.liveCopy(s.Partition, x, going) {
						continue
					}
					w.violate(KindGCNeeded, "b%d deleted %s while b%d, a follower of %s it serves, still needs %s of the true log and no other object holds it",
						b.id, o.ref, r, s.Partition, x)
					return
				}
			}
		}
	}
}

// deleted marks objects gone.
func (w *world) deleted(refs []metadata.ObjectRef) {
	for _, ref := range refs {
		if o := w.objects[ref]; o != nil && !o.deleted {
			o.deleted = true
			w.stats.Deleted++
		}
	}
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
