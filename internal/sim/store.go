package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// simStore is a broker's memstore.Store, behind the simulated network
// (chaos decides latencies and faults) and watched: every stored object's
// sections are recorded (so the checks know which records object storage
// holds), and every delete is judged against what followers still need
// before it is carried out.
type simStore struct {
	*memstore.Store
	w *world
	b *broker
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

// wait waits out a request's latency, or ctx.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func (s simStore) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	sum := xxhash.Sum64(body)
	bucket := s.Local().Bucket
	v := s.w.chaos.decide(memstore.OpPut, bucket, false, int64(len(body)), identity(uint64(memstore.OpPut), uint64(s.b.id), sum))
	if err := wait(ctx, v.latency); err != nil {
		return metadata.ObjectRef{}, fmt.Errorf("sim: PUT %s/%s: %w", bucket, key, err)
	}
	if v.err && !v.afterApply {
		return metadata.ObjectRef{}, fmt.Errorf("sim: PUT %s/%s: injected fault: %w", bucket, key, walstore.ErrUnavailable)
	}
	ref, err := s.Store.Put(ctx, key, body)
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
	if v.err {
		return metadata.ObjectRef{}, fmt.Errorf("sim: PUT %s/%s: injected fault after the object was stored: %w", bucket, key, walstore.ErrUnavailable)
	}
	return ref, nil
}

func (s simStore) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	if !s.w.knownBucket(ref.Bucket) || length <= 0 {
		return s.Store.GetRange(ctx, ref, offset, length) // refused before any request
	}
	id := identity(uint64(memstore.OpGet), uint64(s.b.id), s.w.objectID(ref), uint64(offset), uint64(length))
	v := s.w.chaos.decide(memstore.OpGet, ref.Bucket, ref.Bucket != s.Local().Bucket, length, id)
	if err := wait(ctx, v.latency); err != nil {
		return nil, fmt.Errorf("sim: GET %s: %w", ref, err)
	}
	if v.err {
		return nil, fmt.Errorf("sim: GET %s: injected fault: %w", ref, walstore.ErrUnavailable)
	}
	data, err := s.Store.GetRange(ctx, ref, offset, length)
	if errors.Is(err, walstore.ErrNotFound) {
		s.w.count(func(st *Stats) { st.NotFound++ })
	}
	if err == nil && v.corrupt != 0 && len(data) > 0 {
		data[v.corrupt%uint64(len(data))] ^= byte(1 + (v.corrupt>>32)%255)
	}
	return data, err
}

func (s simStore) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	if len(refs) == 0 {
		return nil
	}
	parts := []uint64{uint64(memstore.OpDelete), uint64(s.b.id)}
	for _, r := range refs {
		parts = append(parts, s.w.objectID(r))
	}
	v := s.w.chaos.decide(memstore.OpDelete, refs[0].Bucket, refs[0].Bucket != s.Local().Bucket, 0, identity(parts...))
	// Judged as the collector decided it, against the followers and logs
	// of that moment; the objects are gone once the request takes effect.
	s.w.judgeDelete(s.b, refs)
	if err := wait(ctx, v.latency); err != nil {
		return fmt.Errorf("sim: DELETE of %d objects: %w", len(refs), err)
	}
	if v.err && !v.afterApply {
		return fmt.Errorf("sim: DELETE of %d objects: injected fault: %w", len(refs), walstore.ErrUnavailable)
	}
	if s.w.cfg.Verbose {
		s.w.tracef("b%d deletes %v", s.b.id, refs)
	}
	s.w.deleted(refs)
	if err := s.Store.Delete(ctx, refs); err != nil {
		return err
	}
	if v.err {
		return fmt.Errorf("sim: DELETE of %d objects: injected fault after they were deleted: %w", len(refs), walstore.ErrUnavailable)
	}
	return nil
}

func (s simStore) List(ctx context.Context, bucket, prefix string) ([]walstore.ObjectInfo, error) {
	v := s.w.chaos.decide(memstore.OpList, bucket, bucket != s.Local().Bucket, 0, identity(uint64(memstore.OpList), uint64(s.b.id), hashString(bucket+"/"+prefix)))
	if err := wait(ctx, v.latency); err != nil {
		return nil, fmt.Errorf("sim: LIST %s/%s: %w", bucket, prefix, err)
	}
	return s.Store.List(ctx, bucket, prefix)
}

// objectID names an object by its content where known: keys carry a
// random part the engines draw in racy order.
func (w *world) objectID(ref metadata.ObjectRef) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
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
	w.mu.Lock()
	defer w.mu.Unlock()
	o := &object{ref: ref, sum: sum, sections: sections}
	w.objects[ref] = o
	for _, s := range sections {
		w.sections[s.Partition] = append(w.sections[s.Partition], storedSection{epoch: s.Epoch, first: s.FirstOffset, last: s.LastOffset, obj: o})
	}
	w.stats.Objects++
}

// liveCopyLocked reports whether an object not deleted, and not among
// going, holds batch m of tp.
func (w *world) liveCopyLocked(tp metadata.TopicPartition, m batchMeta, going map[*object]bool) bool {
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
	w.mu.Lock()
	defer w.mu.Unlock()
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
					if r == ps.leader || !containsID(ps.replicas, r) || !w.brokers[r].log.needs(s.Partition, x) || w.liveCopyLocked(s.Partition, x, going) {
						continue
					}
					w.violateLocked(KindGCNeeded, "b%d deleted %s while b%d, a follower of %s it serves, still needs %s of the true log and no other object holds it",
						b.id, o.ref, r, s.Partition, x)
					return
				}
			}
		}
	}
}

// deleted marks objects gone.
func (w *world) deleted(refs []metadata.ObjectRef) {
	w.mu.Lock()
	defer w.mu.Unlock()
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
