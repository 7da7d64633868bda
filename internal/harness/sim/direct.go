package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/activetier/activetier/internal/followcore"
	"github.com/activetier/activetier/internal/readcore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// Direct readers: consumers reading partitions straight from the combined
// objects, as directread.Reader does. A simReader drives readcore's Core,
// the Reader's own decisions, the way the Reader's Poll loop drives it,
// but by events: it reads every metadata partition through a metaReader
// (late, out of order and duplicated, as followers do), learns a round of
// what was delivered at a time, fetches the sections the core plans
// through a walstore.Manager over a store behind chaos (faults, outages,
// corrupted bytes, latency), and hands the results back. Its cursor in a
// metadata partition is the offset below which every record was
// delivered (or trimmed); like the Reader, it takes the high watermarks
// the core asks for at the start of a round, reads again from where it
// asks (what it delivered from there on is delivered again), and tells
// the core how far it read each round. Some readers hold as few as two
// entries (readcore.Config.MaxHeld), so that they forget and read again
// all the time.
//
// What it yields is checked as the run goes and at the end:
//
//   - every batch yielded is, byte for byte, the batch the partition's log
//     has at its offsets when it is yielded (KindReaderTruncated), and
//     stays so: an election that cuts the log short of a yielded batch,
//     and the final log, are checked too;
//   - yields are contiguous from where the reader started or resumed
//     (KindReaderSkipped);
//   - a reader reports a partition gone only when nothing each metadata
//     partition retains below the high watermark the judgement rested on
//     (the one the reader's cursor last reached, as the core says and the
//     reader checks it took) describes a stored copy of the record there
//     (KindReaderGone); it then reads the records in between from the
//     leader, as a consumer would, and resumes;
//   - once faults stop, every reader reaches the end of each of its
//     partitions (KindNoProgress).
type simReader struct {
	w       *world
	n       int
	az      string
	core    *readcore.Core
	durable bool
	// digestChecks is core's count of digest checks last added to the
	// run's.
	digestChecks uint64
	// pseudo is a broker in all but name: its store's GETs are the
	// reader's.
	pseudo *broker
	mgr    *walstore.Manager
	// reads, inbox, cursors and proofs are per metadata partition: its
	// reader, what it delivered since the last round, how far the reader
	// has learned it, and the high watermarks the reader gave the core
	// that could prove it read to its end (the high watermarks it took,
	// and its cursor when it was at the end), by round.
	reads   []*metaReader
	inbox   [][]metadata.Record
	cursors []metaCursor
	proofs  [][]proof
	backoff time.Duration
	// parts are, per partition read, what was yielded.
	parts map[metadata.TopicPartition]*readLog
}

// metaCursor is how far a reader learned a metadata partition whose
// records come out of order: next is the offset below which every record
// was learned or trimmed, ahead the offsets learned above it.
type metaCursor struct {
	next  int64
	ahead map[int64]bool
}

// learned records that the record at off was learned.
func (c *metaCursor) learned(off int64) {
	if off >= c.next {
		c.ahead[off] = true
	}
}

// advance moves next past what was learned and what the log trimmed
// (below low).
func (c *metaCursor) advance(low int64) {
	for off := range c.ahead {
		if off < low {
			delete(c.ahead, off)
		}
	}
	c.next = max(c.next, low)
	for c.ahead[c.next] {
		delete(c.ahead, c.next)
		c.next++
	}
}

// proof is a high watermark a reader gave its core in a round: one it
// took, or its cursor when it found the partition at its end.
type proof struct {
	round uint64
	high  int64
	taken bool
}

// readLog is what a reader yielded of one partition since it started or
// last resumed: next is the offset the next batch must hold.
type readLog struct {
	next int64
	// exact: the next batch must start at next; until the first yield
	// after a start or a resume, it may start below it (a start offset
	// inside a batch).
	exact  bool
	yields []batchMeta
}

// Reader poll pacing, as directread.Reader's Poll: a failed fetch backs
// off from 10ms, doubling up to a second.
const (
	readerBackoffMin = 10 * time.Millisecond
	readerBackoffMax = time.Second
)

// readerID is the identity a reader's requests carry in chaos's draws,
// apart from every broker's.
func readerID(n int) int32 { return int32(1000 + n) }

// startReaders starts the seed's direct readers: some from each
// partition's start now, one perhaps later in the faulty phase from
// wherever its partitions then are. Their choices come from a stream of
// their own, so that the rest of the run is what it is without them.
func (w *world) startReaders() {
	rr := rand.New(rand.NewPCG(w.cfg.Seed, 0x726561646572))
	if lag := choose[time.Duration](rr, 0, time.Second, 3*time.Second); lag > 0 {
		w.tierAfter(lag)
	}
	n := 1 + rr.IntN(2)
	for range n {
		w.startReader(rr, false)
	}
	if rr.IntN(2) == 0 {
		seed := rr.Uint64()
		w.step(time.Duration(rr.Int64N(int64(w.p.faultyFor))), func() {
			w.startReader(rand.New(rand.NewPCG(seed, 1)), true)
		})
	}
}

// tierAfter makes each partition's leader tier its records lag after
// they were committed, as a broker with tiered storage does some time
// after its segments roll: its garbage collector keeps the objects until
// then (leadcore's Tiered), and direct readers that keep up read them
// before they go. Without it, an object goes as soon as every follower
// applied it, which is when its records become committed: a reader then
// races the collector, and mostly reads from the broker.
func (w *world) tierAfter(lag time.Duration) {
	type mark struct {
		at time.Time
		hw int64
	}
	hist := make(map[metadata.TopicPartition][]mark)
	w.every(250*time.Millisecond, func() {
		for _, tp := range w.tps {
			l := w.brokers[w.parts[tp].leader]
			if l.node == nil {
				continue
			}
			if hw, _, ok := l.node.lc.HighWatermark(tp); ok && hw >= 0 {
				hist[tp] = append(hist[tp], mark{w.clock, hw})
			}
			h, tiered := hist[tp], int64(0)
			for len(h) > 0 && !h[0].at.After(w.clock.Add(-lag)) {
				tiered = max(tiered, h[0].hw)
				h = h[1:]
			}
			if tiered > 0 {
				h = append([]mark{{w.clock.Add(-lag), tiered}}, h...)
			}
			hist[tp] = h
			l.node.lc.Tiered(tp, tiered)
		}
	})
}

// startReader starts one reader in a random AZ of a random set of
// partitions; later, at a random offset of each partition's log, else at
// its start.
func (w *world) startReader(rr *rand.Rand, later bool) {
	n := len(w.readers)
	az := azName(rr.IntN(numAZs))
	starts := make(map[metadata.TopicPartition]int64)
	for _, tp := range w.tps {
		if len(starts) > 0 && rr.IntN(3) == 0 {
			continue
		}
		s, truth := w.brokers[w.parts[tp].leader].log.snapshot(tp)
		start := s
		if later {
			start = s + rr.Int64N(end(s, truth)-s+1)
		}
		starts[tp] = start
	}
	var mps []int32
	for mp := range w.meta.Partitions() {
		mps = append(mps, mp)
	}
	// A bound on the entries held as low as a few forgets entries all
	// the time, and reads them again: drawn from the seed, not rr, so
	// that the rest of the reader is what it was without it.
	maxHeld := [...]int{0, 2, 16}[(w.cfg.Seed+uint64(n))%3]
	core, err := readcore.New(readcore.Config{Partitions: starts, Durable: w.cfg.DurableReaders,
		MaxBytes: choose[int64](rr, 2<<10, 64<<10, 4<<20), MetadataPartitions: mps, MaxHeld: maxHeld})
	if err != nil {
		w.violate(KindHarness, "reader %d: %v", n, err)
		return
	}
	st, err := w.cluster.Store(az)
	if err != nil {
		w.violate(KindHarness, "reader %d: %v", n, err)
		return
	}
	pseudo := &broker{w: w, id: readerID(n), az: az}
	pseudo.store = newSimStore(st, w, pseudo)
	mgr, err := newFetcher(pseudo)
	if err != nil {
		w.violate(KindHarness, "reader %d: %v", n, err)
		return
	}
	r := &simReader{w: w, n: n, az: az, core: core, durable: w.cfg.DurableReaders, pseudo: pseudo, mgr: mgr,
		backoff: readerBackoffMin, parts: make(map[metadata.TopicPartition]*readLog)}
	for tp, s := range starts {
		r.parts[tp] = &readLog{next: s}
	}
	seed := w.cfg.Seed ^ uint64(readerID(n))<<40
	r.inbox = make([][]metadata.Record, len(mps))
	r.cursors = make([]metaCursor, len(mps))
	r.proofs = make([][]proof, len(mps))
	for _, mp := range mps {
		r.cursors[mp].ahead = make(map[int64]bool)
		r.reads = append(r.reads, startMetaReader(w, nil, mp, seed, 1, func(recs []metadata.Record) {
			r.inbox[mp] = append(r.inbox[mp], recs...)
		}, func() bool { return true }))
	}
	w.readers = append(w.readers, r)
	w.tracef("reader %d in %s starts at %v, holding at most %d entries (0: the default)", n, az, r.positions(), maxHeld)
	w.after(readLatency, r.poll)
}

func (r *simReader) positions() string {
	var out []string
	for _, tp := range r.core.Partitions() {
		out = append(out, fmt.Sprintf("%s@%d", tp, r.parts[tp].next))
	}
	return fmt.Sprint(out)
}

// poll is one turn of directread.Reader.Poll's loop: serve what the core
// plans, else read the metadata.
func (r *simReader) poll() {
	if r.w.done {
		return
	}
	r.core.Plan()
	rd := r.take()
	wants, pauses := rd.Fetches, rd.Pauses
	for _, p := range pauses {
		r.paused(p)
	}
	if len(wants) == 0 {
		if len(pauses) > 0 {
			r.w.after(readLatency, r.poll)
			return
		}
		r.readMetadata()
		return
	}
	entries := make([]metadata.Entry, len(wants))
	for i, wt := range wants {
		entries[i] = wt.Entry
	}
	results, lat := fetchEntries(r.pseudo, r.mgr, entries, 1)
	r.w.after(lat, func() { r.fetched(wants, results, len(pauses) > 0) })
}

// fetched hands a fetch's results to the core and yields what it gives.
func (r *simReader) fetched(wants []readcore.Want, results []followcore.Result, output bool) {
	for i, wt := range wants {
		r.core.Fetched(r.w.clock, wt, results[i])
	}
	rd := r.take()
	for _, y := range rd.Yields {
		r.yield(y.Partition, y.Batch)
	}
	output = output || len(rd.Yields) > 0
	transient := rd.Retry
	switch {
	case output:
		r.backoff = readerBackoffMin
		r.w.after(readLatency, r.poll)
	case transient:
		d := r.backoff
		r.backoff = min(2*r.backoff, readerBackoffMax)
		r.w.after(d, r.readMetadata)
	default:
		r.readMetadata()
	}
}

// readMetadata is a round of metadata reading, as directread.Reader's:
// it takes the high watermarks the core asks for, learns what was
// delivered since the last round, and tells the core how far it got in
// each metadata partition; then it polls again: soon if it learned
// something, else after the poll interval (a read of the metadata log
// long-polls).
func (r *simReader) readMetadata() {
	if r.w.done {
		return
	}
	r.core.Round()
	rd := r.take()
	round := rd.Round
	for _, rw := range rd.Rewinds {
		// Read again from rw.From: what was learned from there on is
		// delivered again, and the cursor waits for it.
		c := &r.cursors[rw.Partition]
		c.next = min(c.next, rw.From)
		for off := range c.ahead {
			if off >= rw.From {
				delete(c.ahead, off)
			}
		}
		r.reads[rw.Partition].redeliver(rw.From)
	}
	want := rd.Watermarks
	learned := false
	for i, rd := range r.reads {
		mp := int32(i)
		c := &r.cursors[i]
		c.advance(rd.low())
		mr := readcore.MetadataRead{Partition: mp, From: c.next}
		if slices.Contains(want, mp) {
			mr.High, mr.HasHigh = rd.high(), true
			r.proofs[i] = append(r.proofs[i], proof{round, mr.High, true})
		}
		for _, rec := range r.inbox[i] {
			c.learned(rec.Offset)
			if m, err := metadata.DecodeMessage(rec.Value); err == nil {
				r.core.Learn(mp, rec.Offset, m)
			}
		}
		learned = learned || len(r.inbox[i]) > 0
		r.inbox[i] = r.inbox[i][:0]
		c.advance(rd.low())
		mr.Next = c.next
		if mr.AtEnd = c.next >= rd.high(); mr.AtEnd {
			r.proofs[i] = append(r.proofs[i], proof{round, c.next, false})
		}
		if err := r.core.MetadataRead(mr); err != nil {
			r.w.violate(KindHarness, "reader %d: %v", r.n, err)
		}
		// A proof older than the core's latest can never be its latest.
		proven, _ := r.core.Proof(mp)
		r.proofs[i] = slices.DeleteFunc(r.proofs[i], func(p proof) bool { return p.round < proven })
	}
	wait := r.w.p.follower.PollInterval
	if learned {
		wait = readLatency
	}
	r.w.after(wait, r.poll)
}

// take takes the core's Ready and acknowledges it, as directread's
// Reader does.
func (r *simReader) take() readcore.Ready {
	rd := r.core.Ready()
	r.core.Advance()
	r.w.digests(fmt.Sprintf("reader %d", r.n), rd.Mismatches, r.core.Counters().DigestChecks, &r.digestChecks)
	return rd
}

// yield checks a batch the reader yields: it continues what was yielded,
// and it is the partition's log's batch at its offsets.
func (r *simReader) yield(tp metadata.TopicPartition, b storage.Batch) {
	w := r.w
	m := metaOf(b)
	rl := r.parts[tp]
	w.stats.ReaderBatches++
	if w.cfg.Verbose {
		w.tracef("reader %d yields %s %s", r.n, tp, m)
	}
	if m.first > rl.next || m.last < rl.next || rl.exact && m.first != rl.next {
		w.violate(KindReaderSkipped, "reader %d yielded %s of %s where offset %d was due", r.n, m, tp, rl.next)
	}
	rl.next, rl.exact = m.last+1, true
	rl.yields = append(rl.yields, m)
	ps := w.parts[tp]
	if !w.brokers[ps.leader].log.holds(tp, m) {
		w.violate(KindReaderTruncated, "reader %d yielded %s of %s, which the partition's log (leader b%d, epoch %d) does not hold", r.n, m, tp, ps.leader, ps.epoch)
	}
}

// paused handles a partition the core paused, as a consumer would: a
// gone partition's records in between are read from the leader, up to
// what it has committed, and the reader resumes there; a truncated one
// (only with Durable) is consumed again from the truncation.
func (r *simReader) paused(p readcore.Pause) {
	w := r.w
	rl := r.parts[p.Partition]
	if p.Truncated {
		w.tracef("reader %d: %s truncated from %d", r.n, p.Partition, p.Offset)
		if !r.durable {
			w.violate(KindReaderTruncated, "reader %d reports %s truncated from offset %d without Durable", r.n, p.Partition, p.Offset)
		}
		rl.yields = slices.DeleteFunc(rl.yields, func(m batchMeta) bool { return m.last >= p.Offset })
		rl.next, rl.exact = p.Offset, false
		r.seek(p.Partition, p.Offset)
		return
	}
	w.stats.ReaderGone++
	w.tracef("reader %d: %s gone at %d, resume hint %d: %v", r.n, p.Partition, p.Offset, p.ResumeHint, p.Cause)
	r.checkGone(p.Partition, p.Offset)
	resume := p.Offset
	if l := w.brokers[w.parts[p.Partition].leader]; l.node != nil {
		if hw, _, ok := l.node.lc.HighWatermark(p.Partition); ok && hw > p.Offset {
			resume = min(p.ResumeHint, hw)
		}
	}
	// What the leader's log holds of [Offset, resume) is read from it:
	// the reader continues from the batch holding resume.
	rl.next, rl.exact = resume, false
	if s, truth := w.brokers[w.parts[p.Partition].leader].log.snapshot(p.Partition); resume > s {
		if i := covering(truth, resume); i >= 0 {
			rl.next = truth[i].first
		}
	}
	r.seek(p.Partition, resume)
}

func (r *simReader) seek(tp metadata.TopicPartition, offset int64) {
	if err := r.core.Seek(tp, offset); err != nil {
		r.w.violate(KindHarness, "reader %d: %v", r.n, err)
	}
}

// checkGone checks a reader's claim that tp's record at offset is gone
// from object storage: the partition's log holds it, and no entry of any
// metadata partition, still retained below the high watermark the
// judgement rested on there, describes it in a stored object. That high
// watermark is the one the core says proved the partition read to its
// end; the reader checks that it gave the core that one, in that round.
func (r *simReader) checkGone(tp metadata.TopicPartition, offset int64) {
	w := r.w
	highs := make([]int64, len(r.reads))
	busy := false
	for i := range r.reads {
		round, high := r.core.Proof(int32(i))
		k := slices.IndexFunc(r.proofs[i], func(p proof) bool { return p.round == round && p.high == high })
		if k < 0 {
			w.violate(KindHarness, "reader %d judged %s gone at %d on metadata partition %d read to %d in round %d, which it never gave its core (gave %v)",
				r.n, tp, offset, i, high, round, r.proofs[i])
			return
		}
		highs[i] = high
		busy = busy || r.proofs[i][k].taken
	}
	if busy {
		w.stats.ReaderGoneBusy++
	}
	s, truth := w.brokers[w.parts[tp].leader].log.snapshot(tp)
	i := covering(truth, offset)
	if i < 0 {
		if offset >= end(s, truth) {
			w.violate(KindReaderGone, "reader %d reports %s gone at %d, past its log's end %d", r.n, tp, offset, end(s, truth))
		}
		return
	}
	x := truth[i]
	for mp, rd := range r.reads {
		for _, rec := range rd.retained(highs[mp]) {
			m, err := metadata.DecodeMessage(rec.Value)
			if err != nil {
				continue
			}
			for _, e := range m.Entries {
				o := w.objects[e.Object]
				if e.Partition == tp && e.RecordEpoch == x.epoch && e.FirstOffset <= offset && offset <= e.LastOffset && o != nil && !o.deleted {
					w.violate(KindReaderGone, "reader %d reports %s gone at %d, but %s in %s, described at metadata offset %d/%d, holds %s",
						r.n, tp, offset, o.ref, e.Object.AZ, mp, rec.Offset, x)
					return
				}
			}
		}
	}
}

// learnCommits tells the controller of the commits a message just
// appended to the metadata log carries: it elects only replicas that hold
// the log below them, as Kafka's controller elects only in-sync replicas,
// which hold the log below the high watermark.
func (w *world) learnCommits(rec metadata.Record) {
	m, err := metadata.DecodeMessage(rec.Value)
	if err != nil {
		return
	}
	for _, c := range m.Commits {
		if ps := w.parts[c.Partition]; ps != nil {
			ps.committed = max(ps.committed, c.Offset)
		}
	}
}

// checkReadersAfterElection checks that the election that made tp's log
// the one of its new leader, which may be shorter, cut off nothing a
// reader yielded.
func (w *world) checkReadersAfterElection(tp metadata.TopicPartition) {
	e := w.brokers[w.parts[tp].leader].log.end(tp)
	for _, r := range w.readers {
		rl := r.parts[tp]
		if rl == nil || len(rl.yields) == 0 {
			continue
		}
		if last := rl.yields[len(rl.yields)-1]; last.last >= e {
			w.violate(KindReaderTruncated, "reader %d yielded %s of %s, which the election of b%d at epoch %d truncated (the log now ends at %d)",
				r.n, last, tp, w.parts[tp].leader, w.parts[tp].epoch, e)
		}
	}
}

// checkReadersFinal checks every batch every reader yielded against the
// final log of its partition, from the log's start.
func (w *world) checkReadersFinal() {
	for _, r := range w.readers {
		for _, tp := range r.core.Partitions() {
			s, truth := w.brokers[w.parts[tp].leader].log.snapshot(tp)
			for _, m := range r.parts[tp].yields {
				if m.first >= s && !holds(truth, m) {
					w.violate(KindReaderTruncated, "reader %d yielded %s of %s, which is not in its final log", r.n, m, tp)
					return
				}
			}
		}
	}
}

// readersBehind describes every reader that has not reached the end of
// one of its partitions' logs.
func (w *world) readersBehind() []string {
	var out []string
	for _, r := range w.readers {
		for _, tp := range r.core.Partitions() {
			e := w.brokers[w.parts[tp].leader].log.end(tp)
			if next, committed, _ := r.core.Position(tp); next < e {
				out = append(out, fmt.Sprintf("  %s: reader %d in %s at %d, committed %d learned, log end %d", tp, r.n, r.az, next, committed, e))
			}
		}
	}
	return out
}

func (r *simReader) close() { r.mgr.Close() }
