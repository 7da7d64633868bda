package followcore

import (
	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/metadata"
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

// Digest returns tp's rolling digest at offset, its log end, if the core
// knows it: the chain a leadership begun there continues.
func (c *Core) Digest(tp metadata.TopicPartition, offset int64) (digest.Chain, bool) {
	p := c.parts[tp]
	if p == nil || p.gone || p.state != ready || p.leo != offset {
		return digest.Chain{}, false
	}
	return p.chain.Value(offset)
}
