package followcore

import (
	"time"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// counted counts what p's digest tracker learned, and hands a mismatch
// out and to the log.
func (c *Core) counted(r digest.Result) {
	if r.Checked {
		c.DigestChecks++
	}
	if r.Taken {
		c.DigestsTaken++
	}
	if m := r.Mismatch; m != nil {
		c.DigestMismatches++
		c.log.Error("activetier: replica digest differs from the leader's", "err", m)
		c.out.Mismatches = append(c.out.Mismatches, *m)
	}
}

// epochAt returns the epoch of l's record at offset, or -1.
func epochAt(l *fencing.Lineage, offset int64) int32 {
	if e, ok := l.EpochFor(offset); ok {
		return e
	}
	return -1
}

// verify asks for the records of r to be read back from p's log: they were
// there before p started, and only reading them shows they still are what
// their leader published.
func (c *Core) verify(p *part, r digest.Reread) {
	p.op, p.opKind, p.verifying = c.id(), opVerify, r
	c.ops[p.op] = p
	c.out.Verifies = append(c.out.Verifies, Verify{ID: p.op, Partition: p.tp, From: r.From, To: r.To})
}

// Verified answers Verify id with the batches read back, or the error
// reading them. A read that fails is logged and passed over: the records
// stay unchecked, which the next start of the partition tries again; it
// does not stop replication, which needs only appends.
func (c *Core) Verified(now time.Time, id uint64, batches []storage.Batch, err error) {
	c.now = now
	defer c.step()
	p := c.answer(id)
	if p == nil {
		return
	}
	r := p.verifying
	p.verifying = digest.Reread{}
	if err != nil {
		c.log.Warn("activetier: reading back records to check their digest failed", "partition", p.tp.String(), "from", r.From, "to", r.To, "err", err)
		return
	}
	c.counted(p.chain.Reread(r, batches))
}

// Digest returns tp's rolling digest at offset, its log end, if the core
// knows it: the chain a leadership begun there continues.
func (c *Core) Digest(tp metadata.TopicPartition, offset int64) (digest.Chain, bool) {
	p := c.parts[tp]
	if p == nil || p.gone || p.state != ready || p.leo != offset {
		return digest.Chain{}, false
	}
	return p.chain.Value(offset)
}
