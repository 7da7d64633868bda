package metering

import (
	"cmp"
	"encoding/hex"
	"slices"
	"sort"
	"sync"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/metadata"
)

// The ledger's rows that are not partitions. Neither name can be a Kafka
// topic's, which allows only ASCII letters, digits, '.', '_' and '-'.
const (
	// OverflowTopic holds the usage of partitions beyond
	// Config.MaxPartitions.
	OverflowTopic = "(overflow)"
	// UnattributedTopic holds usage no partition could be found for.
	UnattributedTopic = "(unattributed)"
)

// maxSpans bounds the sections kept per object: a combined object of the
// largest size the leader cuts holds far fewer.
const maxSpans = 1 << 16

// account is one row of the ledger.
type account struct {
	tp    metadata.TopicPartition
	share costmodel.Share
}

// span is one section's byte range in an object, [pos, end).
type span struct {
	pos, end int64
	acct     *account
}

type objectKey struct{ bucket, key string }

func keyOf(ref metadata.ObjectRef) objectKey { return objectKey{ref.Bucket, ref.Key} }

// ledger attributes usage to partitions. One mutex guards it: it is taken
// once per PUT, GET, DELETE and metadata message, never per byte.
type ledger struct {
	mu       sync.Mutex
	maxParts int
	// accounts holds the rows by rowOf their partitions.
	accounts     map[metadata.TopicPartition]*account
	order        []*account
	overflow     account
	unattributed account
	// invalid counts the partitions named that Validate refused.
	invalid int64

	maxObjects int
	objects    map[objectKey][]span // sorted by pos, not overlapping
	fifo       []objectKey          // insertion order; may hold deleted keys
}

func newLedger(maxParts, maxObjects int) *ledger {
	return &ledger{
		maxParts: maxParts, accounts: make(map[metadata.TopicPartition]*account),
		overflow:     account{tp: metadata.TopicPartition{Topic: OverflowTopic, Partition: -1}},
		unattributed: account{tp: metadata.TopicPartition{Topic: UnattributedTopic, Partition: -1}},
		maxObjects:   maxObjects, objects: make(map[objectKey][]span),
	}
}

// rowOf is the identity of tp's row: a named partition's topic name and
// number, whatever its topic id, so that the incarnations of a re-created
// topic (Kafka gives it a new id under the same name) share one row per
// partition instead of adding a set of rows each time; a partition known
// by its id alone keeps its id.
func rowOf(tp metadata.TopicPartition) metadata.TopicPartition {
	if tp.Topic != "" {
		tp.TopicID = [16]byte{}
	}
	return tp
}

// account returns tp's row, the overflow row once the bound is reached, or
// the unattributed row for a partition Validate refuses (a topic name
// Kafka would not accept, which a PUT body's footer may carry): such a
// name gets no row, so it reaches no report or metric label.
func (l *ledger) account(tp metadata.TopicPartition) *account {
	tp = rowOf(tp)
	if a, ok := l.accounts[tp]; ok {
		return a
	}
	if tp.Validate() != nil {
		l.invalid++
		return &l.unattributed
	}
	if len(l.accounts) >= l.maxParts {
		return &l.overflow
	}
	a := &account{tp: tp}
	l.accounts[tp] = a
	l.order = append(l.order, a)
	return a
}

// put attributes one PUT request of size bytes whose body listed sections
// (nil: not a combined object). If stored, the object's layout is kept for
// the GETs that follow.
func (l *ledger) put(ref metadata.ObjectRef, size int64, sections []combiner.SectionInfo, stored bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var total int64
	for _, s := range sections {
		total += s.Length
	}
	if total <= 0 {
		l.unattributed.share.Puts++
		l.unattributed.share.BytesUp += float64(size)
		return
	}
	spans := make([]span, 0, len(sections))
	for _, s := range sections {
		a := l.account(s.Partition)
		w := float64(s.Length) / float64(total)
		a.share.Puts += w
		a.share.BytesUp += w * float64(size)
		spans = append(spans, span{pos: s.Position, end: s.Position + s.Length, acct: a})
	}
	if stored {
		slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.pos, b.pos) })
		l.remember(keyOf(ref), spans)
	}
}

// remember keeps an object's layout, forgetting the oldest object when
// there are too many.
func (l *ledger) remember(k objectKey, spans []span) {
	if _, ok := l.objects[k]; !ok {
		for len(l.objects) >= l.maxObjects && len(l.fifo) > 0 {
			delete(l.objects, l.fifo[0])
			l.fifo = l.fifo[1:]
		}
		l.fifo = append(l.fifo, k)
		if len(l.fifo) > 2*l.maxObjects {
			// Deleted objects leave their keys behind; drop them.
			l.fifo = slices.DeleteFunc(l.fifo, func(k objectKey) bool { _, ok := l.objects[k]; return !ok })
		}
	}
	l.objects[k] = spans
}

// learn adds the sections that metadata entries describe to their objects'
// layouts: how a follower, which sees no PUT, learns them.
func (l *ledger) learn(entries []metadata.Entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range entries {
		if e.Length <= 0 || e.Position < 0 || e.Position > (1<<62) || e.Length > (1<<62) {
			continue // nothing a GET could be attributed by
		}
		k := keyOf(e.Object)
		spans := l.objects[k]
		i, found := sort.Find(len(spans), func(i int) int { return cmp.Compare(e.Position, spans[i].pos) })
		if found || len(spans) >= maxSpans ||
			(i > 0 && spans[i-1].end > e.Position) || (i < len(spans) && spans[i].pos < e.Position+e.Length) {
			continue // known already, or overlapping what is known: keep the first word
		}
		spans = slices.Insert(spans, i, span{pos: e.Position, end: e.Position + e.Length, acct: l.account(e.Partition)})
		l.remember(k, spans)
	}
}

// forget drops the layouts of deleted objects.
func (l *ledger) forget(refs []metadata.ObjectRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range refs {
		delete(l.objects, keyOf(r))
	}
}

// get attributes one GET request of [off, off+length) of ref that returned
// got bytes: to the partitions whose known sections it covers, by bytes
// covered; bytes no known section covers follow the covered ones.
func (l *ledger) get(ref metadata.ObjectRef, off, length, got int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	spans := l.objects[keyOf(ref)]
	end := off + length
	i := sort.Search(len(spans), func(i int) bool { return spans[i].end > off })
	type part struct {
		a *account
		n int64
	}
	var parts []part
	var covered int64
	for ; i < len(spans) && spans[i].pos < end; i++ {
		n := min(spans[i].end, end) - max(spans[i].pos, off)
		if n <= 0 {
			continue
		}
		covered += n
		if k := len(parts) - 1; k >= 0 && parts[k].a == spans[i].acct {
			parts[k].n += n
			continue
		}
		parts = append(parts, part{spans[i].acct, n})
	}
	if covered == 0 {
		l.unattributed.share.Gets++
		l.unattributed.share.BytesDown += float64(got)
		return
	}
	for _, p := range parts {
		w := float64(p.n) / float64(covered)
		p.a.share.Gets += w
		p.a.share.BytesDown += w * float64(got)
	}
}

// message attributes bytes of metadata traffic for one message, split
// equally among its entries, markers and commits, plus control bytes to each entry
// (a follower's read). A message that did not decode, or names nothing, is
// unattributed.
func (l *ledger) message(m *metadata.Message, bytes, controlPerEntry float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	if m != nil {
		n = len(m.Entries) + len(m.Markers) + len(m.Commits)
	}
	if n == 0 {
		l.unattributed.share.MetadataBytes += bytes
		return
	}
	each := bytes / float64(n)
	for i := range m.Entries {
		a := l.account(m.Entries[i].Partition)
		a.share.MetadataBytes += each
		a.share.ControlBytes += controlPerEntry
	}
	for i := range m.Markers {
		l.account(m.Markers[i].Partition).share.MetadataBytes += each
	}
	for i := range m.Commits {
		l.account(m.Commits[i].Partition).share.MetadataBytes += each
	}
}

// Charge is one row of the ledger: what a partition (or a topic, or the
// overflow or unattributed row) used and what it cost.
type Charge struct {
	// Partition is the row's partition; for a topic's row Partition is -1,
	// as it is for the OverflowTopic and UnattributedTopic rows.
	Partition metadata.TopicPartition
	Share     costmodel.Share
	Cost      costmodel.Breakdown
}

// Ledger is the cost ledger at one moment.
type Ledger struct {
	// Prices is the list the costs are quoted in.
	Prices costmodel.Prices
	// Partitions holds a row per partition, in the order the ledger first
	// saw them (so a bounded export keeps the same partitions over time).
	// A named partition's row is its topic name and partition number, with
	// no TopicID: the incarnations of a topic deleted and created again
	// under the same name, which Kafka tells apart by their ids, share it,
	// as they share the name's row in Topics. A partition named by its id
	// alone has a row of its own.
	Partitions []Charge
	// Overflow holds the partitions beyond Config.MaxPartitions,
	// Unattributed what no partition could be found for, or was named by
	// a partition metadata.TopicPartition.Validate refuses.
	Overflow, Unattributed Charge
	// InvalidPartitions counts the times usage named such a partition.
	InvalidPartitions int64
}

func (l *ledger) snapshot(p costmodel.Prices) Ledger {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := Ledger{Prices: p, Partitions: make([]Charge, len(l.order)), InvalidPartitions: l.invalid}
	for i, a := range l.order {
		out.Partitions[i] = charge(p, a.tp, a.share)
	}
	out.Overflow = charge(p, l.overflow.tp, l.overflow.share)
	out.Unattributed = charge(p, l.unattributed.tp, l.unattributed.share)
	return out
}

func charge(p costmodel.Prices, tp metadata.TopicPartition, s costmodel.Share) Charge {
	// The prices were validated by New and a share is a sum of
	// non-negative terms, so pricing cannot fail.
	b, _ := costmodel.PriceShare(p, s)
	return Charge{Partition: tp, Share: s, Cost: b}
}

// TopicName is how the ledger names a partition's topic: its name, or its
// ID in hex when it has no name.
func TopicName(tp metadata.TopicPartition) string {
	if tp.Topic == "" && tp.TopicID != ([16]byte{}) {
		return hex.EncodeToString(tp.TopicID[:])
	}
	return tp.Topic
}

// Topics sums the partitions' rows by topic, the overflow and unattributed
// rows included when not empty, most expensive first.
func (l Ledger) Topics() []Charge {
	idx := make(map[string]int)
	var out []Charge
	for _, c := range append(slices.Clone(l.Partitions), l.Overflow, l.Unattributed) {
		name := TopicName(c.Partition)
		if c.Partition.Partition == -1 && c.Share == (costmodel.Share{}) {
			continue
		}
		i, ok := idx[name]
		if !ok {
			i = len(out)
			idx[name] = i
			out = append(out, Charge{Partition: metadata.TopicPartition{Topic: name, Partition: -1}})
		}
		out[i].Share = out[i].Share.Add(c.Share)
	}
	for i := range out {
		out[i] = charge(l.Prices, out[i].Partition, out[i].Share)
	}
	slices.SortStableFunc(out, func(a, b Charge) int { return cmp.Compare(b.Cost.TotalUSD, a.Cost.TotalUSD) })
	return out
}

// Total is the sum of every row: the whole bill the ledger saw.
func (l Ledger) Total() Charge {
	var s costmodel.Share
	for _, c := range l.Partitions {
		s = s.Add(c.Share)
	}
	s = s.Add(l.Overflow.Share).Add(l.Unattributed.Share)
	return charge(l.Prices, metadata.TopicPartition{Partition: -1}, s)
}
