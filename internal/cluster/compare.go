package cluster

import (
	"bytes"
	"crypto/sha256"
	"fmt"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Replica is one live follower's copy of a partition, with the leader it
// copies.
type Replica struct {
	TP       metadata.TopicPartition
	Leader   *Broker
	Follower *Broker
}

// LiveReplicas lists every (partition, follower) pair whose follower has
// not crashed, by partition in the order they were assigned.
func (c *Cluster) LiveReplicas() []Replica {
	var out []Replica
	_ = c.EachLiveReplica(func(r Replica) error {
		out = append(out, r)
		return nil
	})
	return out
}

// EachLiveReplica calls fn for each pair LiveReplicas lists, without
// building the list, and stops at fn's first error: the demo's progress
// line samples it every second, and at 100,000 partitions a list a sample
// was a third of everything the demo allocated.
func (c *Cluster) EachLiveReplica(fn func(Replica) error) error {
	c.mu.Lock()
	tps := c.tps // appended to only: the elements seen here never change
	c.mu.Unlock()
	var buf [8]Replica
	for _, tp := range tps {
		c.mu.Lock()
		reps := buf[:0]
		lead, led := c.leaders[tp]
		l, ok := c.byID[lead.Broker]
		if !led || !ok {
			// No leader yet: no log to be a replica of.
			c.mu.Unlock()
			continue
		}
		for _, id := range c.replicas[tp] {
			if r := c.byID[id]; r != nil && r != l && !r.down {
				reps = append(reps, Replica{TP: tp, Leader: l, Follower: r})
			}
		}
		c.mu.Unlock()
		for _, r := range reps {
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// Behind returns how many live replicas have not reached their leader's
// log end offset, and the offsets they lack in total.
func (c *Cluster) Behind() (replicas int, offsets int64, err error) {
	err = c.EachLiveReplica(func(r Replica) error {
		n, err := r.Lacks()
		if err != nil {
			return err
		}
		if n != 0 {
			replicas++
			offsets += max(0, n)
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return replicas, offsets, nil
}

// Lacks returns how many offsets r's follower lacks of its leader's log;
// negative if it has more.
func (r Replica) Lacks() (int64, error) {
	le, err := endOffset(r.Leader, r.TP)
	if err != nil {
		return 0, err
	}
	fe, err := endOffset(r.Follower, r.TP)
	if err != nil {
		return 0, err
	}
	return le - fe, nil
}

// Compare checks every live follower's log against its leader's, batch by
// batch (offsets, epoch and bytes), and describes the differences it
// finds, one a replica. It reads the logs without copying their bytes,
// and each leader's log once for all its followers.
func (c *Cluster) Compare() (compared int, diffs []string) {
	var (
		last *Broker // the leader whose log want is, of tp
		tp   metadata.TopicPartition
		want []storage.Batch
	)
	_ = c.EachLiveReplica(func(r Replica) error {
		compared++
		if last != r.Leader || tp != r.TP {
			last, tp, want = r.Leader, r.TP, batchesOf(r.Leader.Local, r.TP)
		}
		if d := DiffLogs(want, batchesOf(r.Follower.Local, r.TP)); d != "" {
			diffs = append(diffs, fmt.Sprintf("%s: broker %d differs from leader %d: %s", r.TP, r.Follower.ID, r.Leader.ID, d))
		}
		return nil
	})
	return compared, diffs
}

// batchesOf returns tp's batches in l, sharing their bytes with the log
// (EachBatch): what a comparison reads, without a copy of the log.
func batchesOf(l LocalLog, tp metadata.TopicPartition) []storage.Batch {
	var out []storage.Batch
	_ = l.EachBatch(tp, 0, func(b storage.Batch) error {
		out = append(out, b)
		return nil
	})
	return out
}

// BatchDigest is what a direct reader keeps of a batch it yielded, to be
// compared with the leader's log without holding a copy of either: its
// offsets, epoch and a SHA-256 of its bytes.
type BatchDigest struct {
	FirstOffset, LastOffset int64
	Epoch                   int32
	Sum                     [sha256.Size]byte
}

// Digest returns b's digest.
func Digest(b storage.Batch) BatchDigest {
	return BatchDigest{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, Epoch: b.Epoch, Sum: sha256.Sum256(b.Data)}
}

// DigestLog returns the digests of tp's log in l, reading it without a
// copy.
func DigestLog(l LocalLog, tp metadata.TopicPartition) []BatchDigest {
	var out []BatchDigest
	_ = l.EachBatch(tp, 0, func(b storage.Batch) error {
		out = append(out, Digest(b))
		return nil
	})
	return out
}

// DiffDigests describes the first difference of got from want, the
// leader's log, batch by batch (offsets, epoch, bytes), or returns "" if
// they are equal. With prefix, a got that ends early is equal too: a
// reader that stopped before the end.
func DiffDigests(want, got []BatchDigest, prefix bool) string {
	return diff(want, got, func(d BatchDigest) batchHead { return batchHead{d.FirstOffset, d.LastOffset, d.Epoch} },
		func(w, g BatchDigest) bool { return w.Sum == g.Sum }, prefix)
}

// DiffLogs describes the first difference of got from want as DiffDigests
// does, comparing the bytes themselves, or returns "" if they are equal.
func DiffLogs(want, got []storage.Batch) string {
	return diff(want, got, func(b storage.Batch) batchHead { return batchHead{b.FirstOffset, b.LastOffset, b.Epoch} },
		func(w, g storage.Batch) bool { return bytes.Equal(w.Data, g.Data) }, false)
}

// batchHead is what a comparison reads of a batch besides its bytes.
type batchHead struct {
	first, last int64
	epoch       int32
}

// diff is DiffLogs and DiffDigests: the one comparison of a log with the
// leader's, over batches held whole or digested.
func diff[T any](want, got []T, head func(T) batchHead, sameBytes func(w, g T) bool, prefix bool) string {
	for i := range min(len(want), len(got)) {
		w, g := head(want[i]), head(got[i])
		switch {
		case w.first != g.first || w.last != g.last:
			return fmt.Sprintf("batch %d holds offsets %d-%d, the leader's %d-%d", i, g.first, g.last, w.first, w.last)
		case w.epoch != g.epoch:
			return fmt.Sprintf("batch %d (offsets %d-%d) has epoch %d, the leader's %d", i, g.first, g.last, g.epoch, w.epoch)
		case !sameBytes(want[i], got[i]):
			return fmt.Sprintf("batch %d (offsets %d-%d) has different bytes", i, g.first, g.last)
		}
	}
	if len(got) > len(want) || len(got) < len(want) && !prefix {
		return fmt.Sprintf("%d batches, the leader has %d", len(got), len(want))
	}
	return ""
}

// SameBatches reports whether two logs are equal: the same batches, with
// the same bytes.
func SameBatches(a, b []storage.Batch) bool { return DiffLogs(a, b) == "" }
