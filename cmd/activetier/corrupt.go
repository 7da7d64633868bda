package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/internal/cluster"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// flippingLog is a broker's local log that, once told which batch (flip),
// returns it with one byte changed whenever it is read: a disk that no
// longer holds what was appended to it. The changed batch is always a
// copy: memstore's stored bytes, which the leader's upload path and the
// log comparison share, are never modified.
type flippingLog struct {
	*memstore.LocalLog
	at atomic.Pointer[flippedBatch]
}

// flippedBatch names the batch a flippingLog changes.
type flippedBatch struct {
	tp          metadata.TopicPartition
	firstOffset int64
}

// changed returns b as the disk now holds it: b itself, or a copy with one
// byte flipped. own says whether b.Data is the caller's copy already.
func (l *flippingLog) changed(tp metadata.TopicPartition, b storage.Batch, own bool) storage.Batch {
	f := l.at.Load()
	if f == nil || f.tp != tp || f.firstOffset != b.FirstOffset || len(b.Data) == 0 {
		return b
	}
	if !own {
		b.Data = append([]byte(nil), b.Data...)
	}
	b.Data[len(b.Data)/2] ^= 0x04
	return b
}

// Read is memstore's, whose batches are copies, with the flipped batch
// changed.
func (l *flippingLog) Read(ctx context.Context, tp metadata.TopicPartition, from int64, maxBytes int) ([]storage.Batch, error) {
	bs, err := l.LocalLog.Read(ctx, tp, from, maxBytes)
	for i := range bs {
		bs[i] = l.changed(tp, bs[i], true)
	}
	return bs, err
}

// Batches is memstore's, whose batches are copies, with the flipped batch
// changed.
func (l *flippingLog) Batches(tp metadata.TopicPartition) []storage.Batch {
	bs := l.LocalLog.Batches(tp)
	for i := range bs {
		bs[i] = l.changed(tp, bs[i], true)
	}
	return bs
}

// EachBatch is memstore's, with the flipped batch changed in a copy.
func (l *flippingLog) EachBatch(tp metadata.TopicPartition, from int64, fn func(storage.Batch) error) error {
	return l.LocalLog.EachBatch(tp, from, func(b storage.Batch) error { return fn(l.changed(tp, b, false)) })
}

// corruption is what --corrupt-follower did: which follower's log changed
// a byte of which batch, and whether the follower, restarted from its
// log, reported it as a digest mismatch.
type corruption struct {
	Broker      int32  `json:"broker"`
	Partition   string `json:"partition"`
	FirstOffset int64  `json:"first_offset"`
	LastOffset  int64  `json:"last_offset"`
	// AtS is when the follower was restarted, in seconds since producing
	// started.
	AtS float64 `json:"at_s"`
	// Detected: the restarted follower reported a digest mismatch over a
	// range holding the batch before --drain-timeout ran out.
	Detected bool `json:"detected"`
}

// maxMismatches bounds the digest mismatches a run lists: a log that
// differs everywhere must not grow the report.
const maxMismatches = 10

// digestMismatch is one digest mismatch as the report lists it.
type digestMismatch struct {
	// Replica is who found it: "broker N" for a follower, "reader N" for
	// a direct reader.
	Replica   string `json:"replica"`
	Partition string `json:"partition"`
	// Epoch and Publisher are the leader epoch and broker of the entry
	// whose digest was compared.
	Epoch     int32 `json:"epoch"`
	Publisher int32 `json:"publisher"`
	// From and To are the offsets [From, To) where the logs differ.
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// What is the comparison that failed: applied, held or reread.
	What string `json:"what"`
}

func newDigestMismatch(replica string, m *digest.Mismatch) digestMismatch {
	return digestMismatch{Replica: replica, Partition: m.Partition.String(), Epoch: m.Epoch, Publisher: m.Publisher, From: m.From, To: m.To, What: m.What}
}

func (m digestMismatch) String() string {
	return fmt.Sprintf("%s: %s offsets %d-%d (%s) differ from epoch %d's leader, broker %d", m.Replica, m.Partition, m.From, m.To-1, m.What, m.Epoch, m.Publisher)
}

// mismatchLog collects the mismatches followers report, from their
// engines' goroutines: the first maxMismatches of them.
type mismatchLog struct {
	mu   sync.Mutex
	list []digestMismatch
}

func (l *mismatchLog) add(m digestMismatch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.list) < maxMismatches {
		l.list = append(l.list, m)
	}
}

func (l *mismatchLog) snapshot() []digestMismatch {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]digestMismatch(nil), l.list...)
}

// corruptTarget returns the follower --corrupt-follower restarts: the
// first running follower of the first partition it holds records of, and
// that partition.
func (s *sim) corruptTarget() (*cluster.Broker, metadata.TopicPartition, error) {
	for _, p := range s.tps {
		for _, r := range s.c.Replicas(p) {
			if l, _ := s.c.Leadership(p); r.ID == l.Broker || !r.Running() {
				continue
			}
			if end, err := s.locals[r.ID-1].EndOffset(p); err == nil && end > 0 {
				return r, p, nil
			}
		}
	}
	return nil, metadata.TopicPartition{}, errors.New("--corrupt-follower: no follower holds any records to change")
}

// corruptFollower changes a byte of the last batch f holds of tp, and
// restarts f from its log, as a broker restarts after its disk changed:
// on start it reads back the records of the last entry it holds and
// checks them against the leader's digest. It returns f's new Node (see
// detected). The producer must not write to the partitions
// f leads meanwhile (sim.paused): before f stops, their followers catch
// up, so that f, leading them again at the next epoch, need republish
// nothing.
func (s *sim) corruptFollower(ctx context.Context, f *cluster.Broker, tp metadata.TopicPartition, timeout time.Duration, started time.Time) (*corruption, *walstore.Node, error) {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for caughtUp := false; !caughtUp; {
		caughtUp = true
		for _, r := range s.c.LiveReplicas() {
			if r.Leader != f {
				continue
			}
			if n, err := r.Lacks(); err != nil {
				return nil, nil, fmt.Errorf("--corrupt-follower: %w", err)
			} else if n > 0 {
				caughtUp = false
				break
			}
		}
		if caughtUp {
			break
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("--corrupt-follower: broker %d's followers did not catch up within --drain-timeout", f.ID)
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-t.C:
		}
	}
	if err := f.Stop(); err != nil {
		return nil, nil, fmt.Errorf("--corrupt-follower: stopping broker %d: %w", f.ID, err)
	}
	bs := s.locals[f.ID-1].Batches(tp)
	last := bs[len(bs)-1]
	c := &corruption{Broker: f.ID, Partition: tp.String(), FirstOffset: last.FirstOffset, LastOffset: last.LastOffset, AtS: time.Since(started).Seconds()}
	s.flips[f.ID-1].at.Store(&flippedBatch{tp: tp, firstOffset: last.FirstOffset})
	s.retiredMu.Lock()
	s.retired = append(s.retired, f.CurrentNode().Stats())
	n, err := f.Start(s.nodeConfig(f))
	s.retiredMu.Unlock()
	if err != nil {
		return nil, nil, fmt.Errorf("--corrupt-follower: restarting broker %d: %w", f.ID, err)
	}
	// It follows again what it followed, and leads again what it led, at
	// the next epoch, as a controller makes a restarted broker leader
	// again: its followers hold all of it, so nothing is republished.
	for _, p := range s.tps {
		l, _ := s.c.Leadership(p)
		if l.Broker != f.ID {
			if isReplica(s.c.Replicas(p), f.ID) {
				if err := n.BecomeFollower(ctx, p, l.Epoch, l.Broker); err != nil {
					return nil, nil, fmt.Errorf("--corrupt-follower: broker %d following %s: %w", f.ID, p, err)
				}
			}
			continue
		}
		if err := s.leadAgain(ctx, f, n, p, l.Epoch+1); err != nil {
			return nil, nil, fmt.Errorf("--corrupt-follower: %w", err)
		}
	}
	return c, n, nil
}

// detect waits, up to timeout, for n, the Node c restarted, to report a
// digest mismatch over a range holding the batch c changed, and sets
// c.Detected if it does.
func (c *corruption) detect(ctx context.Context, n *walstore.Node, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for time.Now().Before(deadline) {
		for _, m := range n.Stats().Follower.Mismatches {
			if m.Partition.String() == c.Partition && m.From <= c.FirstOffset && c.LastOffset < m.To {
				c.Detected = true
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// leadAgain makes b, whose Node n has just started, tp's leader at epoch,
// and its other running replicas follow it.
func (s *sim) leadAgain(ctx context.Context, b *cluster.Broker, n *walstore.Node, tp metadata.TopicPartition, epoch int32) error {
	end, err := b.Local.EndOffset(tp)
	if err != nil {
		return fmt.Errorf("broker %d reading its log end of %s: %w", b.ID, tp, err)
	}
	if err := b.Local.AssignEpoch(tp, epoch, end); err != nil {
		return fmt.Errorf("broker %d assigning epoch %d of %s: %w", b.ID, epoch, tp, err)
	}
	s.c.SetLeader(tp, b.ID, epoch)
	if err := n.BecomeLeader(ctx, tp, epoch, s.c.Followers(tp), -1); err != nil {
		return fmt.Errorf("broker %d leading %s: %w", b.ID, tp, err)
	}
	for _, r := range s.c.Replicas(tp) {
		if r == b || !r.Running() {
			continue
		}
		if err := r.CurrentNode().BecomeFollower(ctx, tp, epoch, b.ID); err != nil {
			return fmt.Errorf("broker %d following %s: %w", r.ID, tp, err)
		}
	}
	return nil
}

func isReplica(replicas []*cluster.Broker, id int32) bool {
	for _, r := range replicas {
		if r.ID == id {
			return true
		}
	}
	return false
}

// digestTotals adds up the digest counters of followers (every Node's,
// those of Nodes a restart replaced included) and direct readers.
func digestTotals(stats []walstore.NodeStats, readers []readerReport) (checks, mismatches, taken uint64) {
	for _, st := range stats {
		checks += st.Follower.DigestChecks
		mismatches += st.Follower.DigestMismatches
		taken += st.Follower.DigestsTaken
	}
	for _, r := range readers {
		checks += r.DigestChecks
		mismatches += r.DigestMismatches
		taken += r.DigestsTaken
	}
	return checks, mismatches, taken
}

// verdict is the run's: every follower's log equals its leader's, every
// direct reader yielded the committed logs, and no digest differed, which
// fails the run even where the log comparison finds nothing (a
// difference it cannot see, in bytes it does not read).
func (r *demoReport) verdict() bool {
	return r.FollowersConsistent && (r.ReadersConsistent == nil || *r.ReadersConsistent) && r.Digests.Mismatches == 0
}

// inconsistency is the error a run ends with for its digests: a mismatch,
// or a --corrupt-follower change that none reported; nil if neither.
func (d *digestsReport) inconsistency() error {
	var err error
	if d.Mismatches > 0 {
		first := ""
		if len(d.MismatchList) > 0 {
			first = fmt.Sprintf(" (first: %s)", d.MismatchList[0])
		}
		err = fmt.Errorf("%s differed from the leaders' published ones%s", plural(int(d.Mismatches), "replica digest"), first)
	}
	if c := d.Corrupted; c != nil && !c.Detected {
		err = errors.Join(err, fmt.Errorf("--corrupt-follower: broker %d did not report the byte changed in its log of %s at offsets %d-%d",
			c.Broker, c.Partition, c.FirstOffset, c.LastOffset))
	}
	return err
}

// digestsOf is the run's digests report: the totals over every Node and
// direct reader, and the mismatches listed, followers' first.
func digestsOf(s *sim, readers *readersReport, c *corruption) digestsReport {
	var rs []readerReport
	var list []digestMismatch
	list = s.mismatches.snapshot()
	if readers != nil {
		rs = readers.Readers
		list = append(list, readers.mismatches...)
	}
	d := digestsReport{MismatchList: list[:min(len(list), maxMismatches)], Corrupted: c}
	if d.MismatchList == nil {
		d.MismatchList = []digestMismatch{}
	}
	d.Checks, d.Mismatches, d.Taken = digestTotals(s.nodeStats(), rs)
	return d
}
