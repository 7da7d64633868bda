package broker

import (
	"fmt"

	"github.com/activetier/activetier/digest"
)

// DigestMismatch is one of the latest digest mismatches a broker's
// follower side found (Status.Mismatches): its log of the partition
// differs from the leader's of Epoch (broker Publisher) somewhere in the
// offsets [From, To). What is "applied", "held" or "reread" (see package
// digest): "reread" is a restart that read back the last records it held
// and found them changed on disk since they were appended.
type DigestMismatch struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Epoch     int32  `json:"epoch"`
	Publisher int32  `json:"publisher"`
	From      int64  `json:"from"`
	To        int64  `json:"to"`
	What      string `json:"what"`
}

// digestMismatch returns the Node's OnDigestMismatch: it logs m at Error,
// since the broker's log no longer holds what its leader's does and only
// an operator (or a rebuild of the replica) repairs it, then calls next
// if set. The Node counts it for Status; replication goes on.
func (b *Broker) digestMismatch(next func(*digest.Mismatch)) func(*digest.Mismatch) {
	return func(m *digest.Mismatch) {
		b.lg.Error("replica digest mismatch: this broker's log differs from its leader's",
			"partition", m.Partition.String(), "epoch", m.Epoch, "publisher", m.Publisher,
			"from", m.From, "last", m.To-1, "check", m.What,
			"digest", fmt.Sprintf("%016x", m.Got), "published", fmt.Sprintf("%016x", m.Want))
		if next != nil {
			next(m)
		}
	}
}

// digestMismatches converts the Node's latest mismatches for Status.
func digestMismatches(ms []digest.Mismatch) []DigestMismatch {
	out := make([]DigestMismatch, 0, len(ms))
	for _, m := range ms {
		out = append(out, DigestMismatch{Topic: m.Partition.Topic, Partition: m.Partition.Partition, Epoch: m.Epoch,
			Publisher: m.Publisher, From: m.From, To: m.To, What: m.What})
	}
	return out
}
