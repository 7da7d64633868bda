package readcore

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/metadata"
)

// Config configures a Core.
type Config struct {
	// Partitions are the partitions to read and the offset to start each
	// at. At least one.
	Partitions map[metadata.TopicPartition]int64
	// Durable serves every record published, not only the committed ones.
	Durable bool
	// MaxBytes bounds the section bytes one Plan hands out. Positive.
	MaxBytes int64
	// CorruptFor is how long a section must keep failing verification,
	// from its first failure, before it is given up as gone. Default 30s:
	// longer than a flaky network path corrupts reads, short enough that
	// a consumer goes to the broker instead of waiting on a bad object.
	CorruptFor time.Duration
	// UnavailableFor, if positive, is how long a section's fetches must
	// keep failing as unavailable (its AZ's store down) before it is
	// given up as gone, so that a consumer reads what only a lost AZ
	// holds from the broker instead of waiting out the outage. Zero
	// waits for as long as the outage lasts.
	UnavailableFor time.Duration
}

// Core is one reader's partitions and what it knows of them. It is not
// safe for concurrent use: its driver serializes calls.
type Core struct {
	cfg   Config
	parts map[metadata.TopicPartition]*partition
	order []metadata.TopicPartition
	round uint64 // metadata rounds begun
	quiet uint64 // the last round that found the metadata at its end
}

// New validates cfg and returns a Core.
func New(cfg Config) (*Core, error) {
	switch {
	case len(cfg.Partitions) == 0:
		return nil, errors.New("no partitions")
	case cfg.MaxBytes <= 0:
		return nil, fmt.Errorf("MaxBytes %d is not positive", cfg.MaxBytes)
	case cfg.CorruptFor < 0:
		return nil, fmt.Errorf("CorruptFor %v is negative", cfg.CorruptFor)
	case cfg.UnavailableFor < 0:
		return nil, fmt.Errorf("UnavailableFor %v is negative", cfg.UnavailableFor)
	}
	if cfg.CorruptFor == 0 {
		cfg.CorruptFor = 30 * time.Second
	}
	c := &Core{cfg: cfg, parts: make(map[metadata.TopicPartition]*partition, len(cfg.Partitions))}
	for tp, start := range cfg.Partitions {
		if err := tp.Validate(); err != nil {
			return nil, err
		}
		if start < 0 {
			return nil, fmt.Errorf("%s start offset %d is negative", tp, start)
		}
		c.parts[tp] = newPartition(tp, start, cfg.Durable)
	}
	c.order = slices.SortedFunc(maps.Keys(c.parts), func(a, b metadata.TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return c, nil
}

// Round begins a round of metadata reading: what Learn hands over until
// the next Round was read in it.
func (c *Core) Round() { c.round++ }

// Quiet says that the current round found every metadata partition the
// reader reads at its end: what the Core learned before it is all the
// log holds, so a partition that learned nothing since may be judged
// gone.
func (c *Core) Quiet() { c.quiet = c.round }

// Learn hands what m says of the Core's partitions to them. The markers
// one message carries for a partition are one publication.
func (c *Core) Learn(m *metadata.Message) {
	var pubs map[metadata.TopicPartition][]metadata.EpochStart
	for _, mk := range m.Markers {
		if c.parts[mk.Partition] != nil {
			if pubs == nil {
				pubs = make(map[metadata.TopicPartition][]metadata.EpochStart)
			}
			pubs[mk.Partition] = append(pubs[mk.Partition], mk)
		}
	}
	for tp, pub := range pubs {
		c.parts[tp].learnMarkers(pub, c.round)
	}
	for _, cm := range m.Commits {
		if p := c.parts[cm.Partition]; p != nil {
			p.learnCommit(cm, c.round)
		}
	}
	for _, e := range m.Entries {
		if p := c.parts[e.Partition]; p != nil {
			p.learnEntry(e, c.round)
		}
	}
}

// Want is a section to fetch and the offsets of it that may be yielded.
type Want struct {
	Entry metadata.Entry
	// From is the partition's next offset; Limit the offset below which
	// the section's batches may be yielded.
	From, Limit int64
}

// Pause says why a partition stopped until Seek: its records from Offset
// on are gone from object storage (directread's GoneError), or, with
// Truncated, records yielded from Offset on were truncated by a later
// leader (its TruncatedError).
type Pause struct {
	Partition metadata.TopicPartition
	Truncated bool
	Offset    int64
	// ResumeHint is, when gone, the first offset after Offset that the
	// Core knows it can describe, or Offset itself when it knows none.
	ResumeHint int64
	// Cause is why the last section that could not be read failed.
	Cause error
}

// Plan decides every partition, in partition order, and returns the
// sections to fetch next, at most MaxBytes of them (and at least one if
// any is due), and the partitions that paused since the last Plan, each
// reported once.
func (c *Core) Plan() ([]Want, []Pause) {
	var wants []Want
	var errs []Pause
	budget := c.cfg.MaxBytes
	for _, tp := range c.order {
		p := c.parts[tp]
		for _, w := range p.plan(budget) {
			wants = append(wants, w)
			budget -= w.Entry.Length
		}
		p.gone(c.quiet)
		if ps := p.takeError(); ps != nil {
			errs = append(errs, *ps)
		}
	}
	return wants, errs
}

// Fetched hands over the result of fetching w's section at now, which the
// driver classifies with followcore.OutcomeOf (or as Gone when it has no
// store for the object's AZ). It returns the batches to yield, in offset
// order, and whether the fetch should be retried after a backoff. A
// section that is gone is forgotten, and the partition is judged gone if
// nothing else describes its next offset; one that keeps failing
// verification for CorruptFor is too, and one whose store keeps being
// unavailable for UnavailableFor, if set. Any other failure is retried,
// another entry for the same offsets first.
func (c *Core) Fetched(now time.Time, w Want, r followcore.Result) (batches []combiner.Batch, retry bool) {
	p := c.parts[w.Entry.Partition]
	if p == nil {
		return nil, false
	}
	switch r.Outcome {
	case followcore.Fetched:
		return p.apply(w, r.Batches), false
	case followcore.Gone:
		p.drop(w.Entry, r.Err)
		p.changed = c.round // judged again on metadata read from now on
		return nil, false
	case followcore.Corrupt:
		if p.keepsFailing(p.corruptSince, now, w.Entry, c.cfg.CorruptFor) {
			p.drop(w.Entry, r.Err)
			p.changed = c.round
			return nil, false
		}
	case followcore.Unavailable:
		if c.cfg.UnavailableFor > 0 && p.keepsFailing(p.unavailableSince, now, w.Entry, c.cfg.UnavailableFor) {
			p.drop(w.Entry, r.Err)
			p.changed = c.round
			return nil, false
		}
	}
	p.failures[keyOf(&w.Entry)]++
	p.idle = false
	return nil, true
}

// Seek makes tp's next batch the one holding offset, and resumes it if a
// GoneError or TruncatedError paused it.
func (c *Core) Seek(tp metadata.TopicPartition, offset int64) error {
	if offset < 0 {
		return fmt.Errorf("seek %s to negative offset %d", tp, offset)
	}
	p := c.parts[tp]
	if p == nil {
		return fmt.Errorf("seek: %s is not one of the reader's partitions", tp)
	}
	p.seek(offset)
	p.changed = c.round
	return nil
}

// Position returns tp's next offset and the highest committed offset
// learned for it, with ok false if tp is not one of the Core's
// partitions.
func (c *Core) Position(tp metadata.TopicPartition) (next, committed int64, ok bool) {
	p := c.parts[tp]
	if p == nil {
		return -1, -1, false
	}
	return p.next, p.highestCommit(), true
}

// Partitions returns the Core's partitions, in order.
func (c *Core) Partitions() []metadata.TopicPartition { return slices.Clone(c.order) }
