package cluster

import (
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
		l, ok := c.byID[c.leaders[tp].Broker]
		if !ok {
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
	le, err := r.Leader.Local.EndOffset(r.TP)
	if err != nil {
		return 0, fmt.Errorf("broker %d: log end of %s: %w", r.Leader.ID, r.TP, err)
	}
	fe, err := r.Follower.Local.EndOffset(r.TP)
	if err != nil {
		return 0, fmt.Errorf("broker %d: log end of %s: %w", r.Follower.ID, r.TP, err)
	}
	return le - fe, nil
}

// Compare checks every live follower's log against its leader's, batch by
// batch (offsets, epoch and a SHA-256 of the bytes), and describes the
// differences it finds, one a replica. It reads the logs without copying
// them, and digests each leader's log once for all its followers.
func (c *Cluster) Compare() (compared int, diffs []string) {
	var (
		last *Broker // the leader whose digest want is, of tp
		tp   metadata.TopicPartition
		want []BatchDigest
	)
	_ = c.EachLiveReplica(func(r Replica) error {
		compared++
		if last != r.Leader || tp != r.TP {
			last, tp, want = r.Leader, r.TP, DigestLog(r.Leader.Local, r.TP)
		}
		if d := DiffDigests(want, DigestLog(r.Follower.Local, r.TP), false); d != "" {
			diffs = append(diffs, fmt.Sprintf("%s: broker %d differs from leader %d: %s", r.TP, r.Follower.ID, r.Leader.ID, d))
		}
		return nil
	})
	return compared, diffs
}

// BatchDigest is what the log comparison keeps of a batch: its offsets,
// epoch and a SHA-256 of its bytes, so that logs are compared without
// holding a copy of either (a direct reader keeps only these of what it
// yielded).
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
	for i := range min(len(want), len(got)) {
		w, g := want[i], got[i]
		switch {
		case w.FirstOffset != g.FirstOffset || w.LastOffset != g.LastOffset:
			return fmt.Sprintf("batch %d holds offsets %d-%d, the leader's %d-%d", i, g.FirstOffset, g.LastOffset, w.FirstOffset, w.LastOffset)
		case w.Epoch != g.Epoch:
			return fmt.Sprintf("batch %d (offsets %d-%d) has epoch %d, the leader's %d", i, g.FirstOffset, g.LastOffset, g.Epoch, w.Epoch)
		case w.Sum != g.Sum:
			return fmt.Sprintf("batch %d (offsets %d-%d) has different bytes", i, g.FirstOffset, g.LastOffset)
		}
	}
	if len(got) > len(want) || len(got) < len(want) && !prefix {
		return fmt.Sprintf("%d batches, the leader has %d", len(got), len(want))
	}
	return ""
}

// DiffLogs describes the first difference of got from want as DiffDigests
// does, or returns "" if they are equal.
func DiffLogs(want, got []storage.Batch) string {
	return DiffDigests(digests(want), digests(got), false)
}

func digests(bs []storage.Batch) []BatchDigest {
	out := make([]BatchDigest, len(bs))
	for i, b := range bs {
		out[i] = Digest(b)
	}
	return out
}

// SameBatches reports whether two logs are equal: the same batches, with
// the same bytes (by SHA-256).
func SameBatches(a, b []storage.Batch) bool { return DiffLogs(a, b) == "" }
