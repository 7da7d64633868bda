package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// simStore is a broker's memstore.Store, watched: every stored object's
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
	sections []combiner.SectionInfo
	deleted  bool
}

// storedSection is one partition section of a stored object.
type storedSection struct {
	epoch       int32
	first, last int64
	obj         *object
}

func (s simStore) Put(ctx context.Context, key string, body []byte) (metadata.ObjectRef, error) {
	ref, err := s.Store.Put(ctx, key, body)
	if err != nil {
		return ref, err
	}
	sections, ferr := combiner.ReadFooter(body, int64(len(body)))
	if ferr != nil {
		s.w.violate(KindHarness, "b%d stored %s, which does not list its own sections: %v", s.b.id, ref, ferr)
		return ref, nil
	}
	s.w.stored(ref, sections)
	if s.w.cfg.Verbose {
		var b strings.Builder
		for _, sec := range sections {
			fmt.Fprintf(&b, " %s:e%d[%d-%d]", sec.Partition, sec.Epoch, sec.FirstOffset, sec.LastOffset)
		}
		s.w.tracef("b%d stored %s:%s", s.b.id, ref, b.String())
	}
	return ref, nil
}

func (s simStore) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	if s.w.cfg.Verbose {
		s.w.tracef("b%d deletes %v", s.b.id, refs)
	}
	s.w.deleting(s.b, refs)
	return s.Store.Delete(ctx, refs)
}

func (s simStore) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	data, err := s.Store.GetRange(ctx, ref, offset, length)
	if errors.Is(err, walstore.ErrNotFound) {
		s.w.count(func(st *Stats) { st.NotFound++ })
	}
	return data, err
}

func (w *world) stored(ref metadata.ObjectRef, sections []combiner.SectionInfo) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := &object{ref: ref, sections: sections}
	w.objects[ref] = o
	for _, s := range sections {
		w.sections[s.Partition] = append(w.sections[s.Partition], storedSection{epoch: s.Epoch, first: s.FirstOffset, last: s.LastOffset, obj: o})
	}
	w.stats.Objects++
}

// liveCopyLocked reports whether an object not deleted holds batch m of tp.
func (w *world) liveCopyLocked(tp metadata.TopicPartition, m batchMeta) bool {
	for _, s := range w.sections[tp] {
		if !s.obj.deleted && s.epoch == m.epoch && s.first <= m.first && m.last <= s.last {
			return true
		}
	}
	return false
}

// deleting judges a garbage collector's delete before it happens. An
// object may go once no follower needs it: a violation is a section holding
// records of the true log that a follower the deleting leader serves does
// not hold, and that no other object still holds.
func (w *world) deleting(b *broker, refs []metadata.ObjectRef) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var objs []*object
	for _, ref := range refs {
		if o := w.objects[ref]; o != nil && !o.deleted {
			o.deleted = true
			objs = append(objs, o)
			w.stats.Deleted++
		}
	}
	for _, o := range objs {
		for _, s := range o.sections {
			ps := w.parts[s.Partition]
			if ps == nil {
				continue
			}
			_, truth := w.brokers[ps.leader].log.snapshot(s.Partition)
			for i := max(covering(truth, s.FirstOffset), 0); i < len(truth) && truth[i].first <= s.LastOffset; i++ {
				x := truth[i]
				if x.epoch != s.Epoch || x.first < s.FirstOffset || x.last > s.LastOffset {
					continue
				}
				for _, r := range b.followersOf(s.Partition) {
					if r == ps.leader || !containsID(ps.replicas, r) || !w.brokers[r].log.needs(s.Partition, x) || w.liveCopyLocked(s.Partition, x) {
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

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
