package fencing

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

// TestConvergence is the randomized property test. Each seed generates a
// history of leaders (KIP-279 fast failovers, lost uncommitted records,
// zombies that keep publishing after they were deposed), publishes what the
// marker contract says leaders publish (a publication of the lineage from
// an offset at or below the high watermark, the log republished from there,
// new records as they are written), duplicates some of it, and delivers it
// all in a random order to a follower that starts from an arbitrary prefix of
// some leader's log and uses only Decide and Divergence. Some fetches fail
// and are retried later. At the end the follower's log must be exactly the
// final leader's log: nothing outside the true lineage remains, and nothing
// the true log holds is missing (the follower never gets stuck).
//
// Replay a seed with FENCING_SEED=1234 go test -run TestConvergence ./fencing/
// (it then runs only that seed and logs its history).
func TestConvergence(t *testing.T) {
	first, last := uint64(1), uint64(3000)
	if testing.Short() {
		last = 300
	}
	verbose := false
	if s := os.Getenv("FENCING_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "FENCING_SEED")
		first, last, verbose = seed, seed, true
	}
	for seed := first; seed <= last; seed++ {
		h := generateHistory(rand.New(rand.NewPCG(seed, 0xfe9c1)))
		ok := t.Run(seedName(seed), func(t *testing.T) {
			if verbose {
				t.Logf("history:\n%s", h)
			}
			defer func() {
				if t.Failed() {
					t.Logf("replay with FENCING_SEED=%d go test -run TestConvergence ./fencing/\nhistory:\n%s", seed, h)
				}
			}()
			checkConvergence(t, seed, h)
		})
		if !ok {
			break
		}
	}
}

// term is one leader's tenure.
type term struct {
	epoch int32
	base  int     // length of the log it was elected with
	log   []int32 // its log when it was deposed: log[o] is the epoch of offset o
	// zombie is what it wrote after being deposed, at offsets len(log) on.
	zombie []int32
	from   int64 // where its publication starts
}

// delivery is one thing a follower reads from the metadata log.
type delivery struct {
	markers []metadata.EpochStart // a publication, or
	entry   metadata.Entry
}

type history struct {
	terms      []term
	truth      []int32 // the final leader's log
	deliveries []delivery
	followerOf int     // the follower starts with a prefix of this term's log (and zombie writes)
	prefix     int     // of this length; -1 for an empty follower
	failRate   float64 // chance that a fetch fails
}

func (h *history) String() string {
	var b strings.Builder
	for _, tm := range h.terms {
		fmt.Fprintf(&b, "  epoch %d: elected with %d records, publishes from %d, log %v, zombie %v\n", tm.epoch, tm.base, tm.from, tm.log, tm.zombie)
	}
	fmt.Fprintf(&b, "  truth %v\n  follower starts with %d records of term %d's log\n  deliveries:", h.truth, h.prefix, h.followerOf)
	for _, d := range h.deliveries {
		if d.markers != nil {
			b.WriteString(" pub")
			for _, m := range d.markers {
				fmt.Fprintf(&b, "(%d,%d)", m.Epoch, m.StartOffset)
			}
		} else {
			fmt.Fprintf(&b, " e%d/p%d[%d-%d]", d.entry.RecordEpoch, d.entry.PublisherEpoch, d.entry.FirstOffset, d.entry.LastOffset)
		}
	}
	return b.String()
}

// generateHistory builds one random but valid history of a partition under
// clean leader elections: every new leader's log holds all committed records.
func generateHistory(rng *rand.Rand) *history {
	h := &history{failRate: []float64{0, 0.2, 0.5}[rng.IntN(3)]}
	committed := 0           // offsets below are committed ...
	var committedLog []int32 // ... with these records
	epoch := int32(rng.IntN(3))
	for k := range 1 + rng.IntN(8) {
		if k > 0 {
			epoch += 1 + int32(rng.IntN(3))
		}
		var base []int32
		if k > 0 {
			// Elect any earlier leader's log that holds everything
			// committed; choosing one older than the last leader is a fast
			// failover (KIP-279), and cutting it short loses uncommitted
			// records.
			var candidates []int
			for j, tm := range h.terms {
				if len(tm.log) >= committed && slices.Equal(tm.log[:committed], committedLog[:committed]) {
					candidates = append(candidates, j)
				}
			}
			src := h.terms[candidates[rng.IntN(len(candidates))]].log
			base = slices.Clone(src[:committed+rng.IntN(len(src)-committed+1)])
		}
		from := int64(rng.IntN(committed + 1)) // at or below the high watermark
		tm := term{epoch: epoch, base: len(base), from: from}

		// The publication: the leader's lineage from `from` on, ending with
		// its own epoch.
		lin := lineageOf(base)
		_ = lin.Assign(epoch, int64(len(base)))
		lin.TruncateFromStart(from)
		var markers []metadata.EpochStart
		for _, e := range lin.Entries() {
			markers = append(markers, mk(e.Epoch, e.StartOffset))
		}
		rng.Shuffle(len(markers), func(i, j int) { markers[i], markers[j] = markers[j], markers[i] })
		h.deliveries = append(h.deliveries, delivery{markers: markers})
		if rng.IntN(3) == 0 { // the bare takeover marker too
			h.deliveries = append(h.deliveries, delivery{markers: []metadata.EpochStart{mk(epoch, int64(len(base)))}})
		}
		// The republish from `from`, then new records.
		h.publish(rng, base, int(from), len(base), epoch)
		tm.log = append(base, run(epoch, rng.IntN(7))...)
		h.publish(rng, tm.log, len(base), len(tm.log), epoch)
		h.terms = append(h.terms, tm)

		committed += rng.IntN(len(tm.log) - committed + 1)
		committedLog = tm.log
	}
	// Deposed leaders that keep writing.
	for k := range len(h.terms) - 1 {
		if rng.IntN(2) == 0 {
			tm := &h.terms[k]
			tm.zombie = run(tm.epoch, 1+rng.IntN(6))
			h.publish(rng, append(slices.Clone(tm.log), tm.zombie...), len(tm.log), len(tm.log)+len(tm.zombie), tm.epoch)
		}
	}
	h.truth = h.terms[len(h.terms)-1].log

	// Two buckets announce some of it twice; everything arrives in any order.
	for _, d := range h.deliveries {
		if rng.IntN(5) == 0 {
			h.deliveries = append(h.deliveries, d)
		}
	}
	rng.Shuffle(len(h.deliveries), func(i, j int) { h.deliveries[i], h.deliveries[j] = h.deliveries[j], h.deliveries[i] })

	h.followerOf, h.prefix = rng.IntN(len(h.terms)), -1
	if rng.IntN(4) > 0 {
		tm := h.terms[h.followerOf]
		h.prefix = rng.IntN(len(tm.log) + len(tm.zombie) + 1)
	}
	return h
}

// publish announces log[lo:hi] in entries of random size, one record epoch
// per entry, published by publisher.
func (h *history) publish(rng *rand.Rand, log []int32, lo, hi int, publisher int32) {
	for o := lo; o < hi; {
		end := o + 1
		for end < hi && log[end] == log[o] && end-o < 1+rng.IntN(6) {
			end++
		}
		h.deliveries = append(h.deliveries, delivery{entry: entry(log[o], publisher, int64(o), int64(end-1))})
		o = end
	}
}

// lineageOf is the lineage of a log, built the way a broker builds it: one
// Assign per record.
func lineageOf(log []int32) *Lineage {
	var l Lineage
	for o, e := range log {
		_ = l.Assign(e, int64(o))
	}
	return &l
}

func checkConvergence(t *testing.T, seed uint64, h *history) {
	rng := rand.New(rand.NewPCG(seed, 0xfa11))
	m := &model{t: t, f: newFollower(t, 0)}
	if h.prefix >= 0 {
		tm := h.terms[h.followerOf]
		for _, e := range append(slices.Clone(tm.log), tm.zombie...)[:h.prefix] {
			m.f.append(e, 1)
		}
	}
	for _, d := range h.deliveries {
		if d.markers != nil {
			require.NoError(t, m.f.leader.Merge(d.markers...))
			if to, ok := Divergence(m.f.leo(), &m.f.local, &m.f.leader); ok {
				m.truncate(to)
			}
		} else {
			m.pending = append(m.pending, d.entry)
		}
		m.drain(func() bool { return rng.Float64() < h.failRate })
		require.Equal(t, lineageOf(m.f.log).Entries(), m.f.local.Entries(), "seed %d: local lineage out of step with the log", seed)
	}
	m.drain(func() bool { return false })
	if !slices.Equal(h.truth, m.f.log) {
		t.Logf("seed %d: follower log %v, local %v, leader %v; pending:", seed, m.f.log, &m.f.local, &m.f.leader)
		for _, e := range m.pending {
			t.Logf("  e%d/p%d[%d-%d]: %v", e.RecordEpoch, e.PublisherEpoch, e.FirstOffset, e.LastOffset, Decide(m.f.leo(), &m.f.local, &m.f.leader, e))
		}
	}
	require.Equal(t, append([]int32{}, h.truth...), append([]int32{}, m.f.log...), "seed %d: the follower's log is not the final leader's log", seed)
	if len(h.truth) > 0 {
		require.Equal(t, lineageOf(h.truth).Entries(), m.f.local.Entries(), "seed %d: local lineage", seed)
	}
}

// model is the follower engine in miniature: held entries are decided again
// whenever something changes; applied and skipped ones are set aside and
// brought back only when a truncation reaches them (an engine re-reads them
// from the metadata log); dropped ones are gone for good, which is the test
// that Drop is only ever said of entries no future can need.
type model struct {
	t        *testing.T
	f        *follower
	pending  []metadata.Entry
	setAside []metadata.Entry
}

func (m *model) truncate(to int64) {
	m.f.truncate(to)
	kept := m.setAside[:0]
	for _, e := range m.setAside {
		if e.LastOffset >= to {
			m.pending = append(m.pending, e)
		} else {
			kept = append(kept, e)
		}
	}
	m.setAside = kept
}

// drain decides the pending entries, lowest offset first, until nothing
// changes. fail says whether a fetch fails; a failed Apply is not carried out
// and its entry stays pending.
func (m *model) drain(fail func() bool) {
	for round := 0; ; round++ {
		require.Less(m.t, round, 10000, "no fixpoint")
		slices.SortStableFunc(m.pending, func(a, b metadata.Entry) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
		changed := false
		pending := m.pending
		m.pending = nil
		for n, e := range pending {
			d := Decide(m.f.leo(), &m.f.local, &m.f.leader, e)
			switch d.Action {
			case Hold:
				m.pending = append(m.pending, e)
			case Drop:
			case Skip:
				m.setAside = append(m.setAside, e)
			case Apply:
				if fail() {
					m.pending = append(m.pending, e)
					continue
				}
				m.f.checkApply(e, d)
				m.f.append(e.RecordEpoch, int(d.Limit-d.From))
				m.setAside = append(m.setAside, e)
				changed = true
			case Truncate:
				m.pending = append(m.pending, pending[n:]...)
				m.truncate(d.TruncateTo)
				changed = true
			}
			if d.Action == Truncate {
				break
			}
		}
		if !changed {
			return
		}
	}
}
