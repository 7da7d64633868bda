package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/directread"
	"github.com/activetier/activetier/internal/cluster"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// Direct consumer readers (--readers N). Each is a consumer application in
// one AZ that reads its partitions' committed records straight from the
// combined objects with a directread.Reader, instead of fetching them from
// each partition's leader. Reader k (from 1) is in the AZ after the k-th
// of the deployment's (az2, az3, az1, ... with three AZs), so that the
// first readers survive --fail-az az1; every reader is in another AZ than
// the leaders of most of its partitions, wherever it is.
//
// The leaders keep an object until the readers have read it: a broker
// whose consumers read directly must, or the objects are deleted as soon
// as the followers applied them, while the readers, which only read what
// is committed (applied by every in-sync follower, then published), are
// still behind. The demo reports the lowest next offset of the running
// readers of each partition to its leader as the partition's tiered mark
// (walstore.Node.ReportTiered), as a broker would report the lowest offset
// its direct consumer groups committed; a reader that went down with its
// AZ no longer holds anything back, as a consumer group member whose
// session expired.
//
// A reader in the AZ that --fail-az takes down stops with it, as the AZ's
// brokers do: a consumer there is down too. What it yielded until then
// must still be the start of the partitions' committed logs.
//
// When the records at a reader's next offset are gone from object storage
// (collected once every follower applied them while the reader lagged, or
// in the failed AZ's bucket, which every GET failed for
// readerUnavailableAfter, and not republished because every follower had
// them), the reader does what directread.GoneError asks: it fetches them
// from the partition's leader, up to the leader's high watermark, as a
// Kafka consumer would, and resumes there. Those bytes are priced as a
// fetch from the leader.
//
// Pricing, per reader:
//   - direct: its GETs and the bytes they returned at the price list's GET
//     and retrieval prices (S3 bills no transfer for a GET from an EC2
//     instance in another AZ of the bucket's region, the same as for the
//     followers), plus the metadata log it read across AZs, plus any
//     bytes fetched from a leader in another AZ after a GoneError;
//   - from the leader: the bytes it yielded of partitions whose leader was
//     in another AZ when it yielded them, compressed as producers would
//     (the report's producer compression ratio, like the replication
//     comparison), at the cross-AZ price out plus in.
//
// A consumer in the leader's AZ, or one fetching from a follower in its
// own AZ (KIP-392, where a replica is there), pays no transfer either way:
// the comparison is with consumers that fetch from the leader.

// readerUnavailableAfter is how long a reader waits for a bucket that
// fails every GET before it reads what only that bucket holds from the
// leader: the failed AZ's, with --fail-az.
const readerUnavailableAfter = 2 * time.Second

// maxDemoReaders bounds --readers: each is a consumer with its own cache
// and metadata reads in the demo's process.
const maxDemoReaders = 32

// readerOptions are the demo's flags for direct readers.
type readerOptions struct {
	n     int
	share float64
}

func (o *readerOptions) register(fs *flag.FlagSet) {
	fs.IntVar(&o.n, "readers", 0, "run `N` direct consumer readers (package directread) in the AZs in turn, from the second: the report gives their lag, GETs and cost next to consuming across AZs from the leaders")
	fs.Float64Var(&o.share, "reader-share", 1, "the `share` of the partitions each direct reader reads (0 to 1; the readers take different ones where they can)")
}

func (o *readerOptions) validate(fs *flag.FlagSet) error {
	switch {
	case o.n < 0 || o.n > maxDemoReaders:
		return flagError(fs, "readers", fmt.Sprintf("must be between 0 and %d", maxDemoReaders))
	case math.IsNaN(o.share) || o.share <= 0 || o.share > 1:
		return flagError(fs, "reader-share", "must be above 0 and at most 1")
	case o.n == 0 && isSet(fs, "reader-share"):
		return flagError(fs, "reader-share", "has no effect without --readers")
	}
	return nil
}

// readerFleet runs the demo's direct readers beside the cluster. The zero
// number of readers is a fleet that does nothing.
type readerFleet struct {
	o       readerOptions
	objects objectBackend // unmetered: the readers' requests are not the brokers'
	s       *sim
	readers []*demoReader
	// counts is every reader's GETs, which the backend counts with the
	// brokers' and backend() takes out again.
	counts requestCounters
	// stopHold and held end the goroutine that holds objects for readers.
	stopHold context.CancelFunc
	held     chan struct{}
}

func newReaderFleet(o readerOptions, objects objectBackend) *readerFleet {
	return &readerFleet{o: o, objects: objects}
}

// backend is the object backend the brokers and the bill see: the
// readers' requests are taken out of its counts, so the run's replication
// cost is the same with readers as without. (A store's own retries, which
// the S3 backend counts and a reader does not see, stay in.)
func (f *readerFleet) backend(b objectBackend) objectBackend {
	if f.o.n == 0 {
		return b
	}
	return withoutReaders{b, f}
}

type withoutReaders struct {
	objectBackend
	f *readerFleet
}

func (w withoutReaders) requests() requestCounts {
	c, r := w.objectBackend.requests(), w.f.counts.load()
	c.gets, c.failed, c.bytesDown = max(0, c.gets-r.gets), max(0, c.failed-r.failed), max(0, c.bytesDown-r.bytesDown)
	return c
}

// demoReader is one consumer and what it yielded.
type demoReader struct {
	id    int
	az    string
	f     *readerFleet
	tps   []metadata.TopicPartition
	r     *directread.Reader
	store *readerStore
	log   *readerLog
	stop  context.CancelFunc
	done  chan struct{}

	mu sync.Mutex
	// logs are digests of the batches yielded, per partition, in order:
	// the readers' logs are compared with the leaders' without holding a
	// copy of each.
	logs map[metadata.TopicPartition][]cluster.BatchDigest
	// gone are the partitions paused by a GoneError, to be read from the
	// leader.
	gone                     map[metadata.TopicPartition]*directread.GoneError
	lag                      walstore.Histogram
	batches, records, bytes  int64
	crossAZBytes             int64 // yielded while the partition's leader was in another AZ
	goneErrors, truncations  int
	brokerBytes, brokerCross int64 // read from the leader after a GoneError; of them, across AZs
	stoppedWith              string
	err                      error
	// mismatches are the first maxMismatches digest mismatches Poll
	// reported.
	mismatches []digestMismatch
}

// running reports whether d still reads: it has neither stopped nor failed.
func (d *demoReader) running() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stoppedWith == "" && d.err == nil
}

// start opens the readers, each from offset 0 of its partitions, and runs
// them until close.
func (f *readerFleet) start(s *sim) error {
	f.s = s
	n := len(s.tps)
	count := min(n, max(1, int(math.Ceil(f.o.share*float64(n)))))
	quiet := slog.New(slog.DiscardHandler)
	for i := range f.o.n {
		d := &demoReader{id: i + 1, az: s.cfg.azs[(i+1)%len(s.cfg.azs)], f: f, done: make(chan struct{}),
			logs: make(map[metadata.TopicPartition][]cluster.BatchDigest), gone: make(map[metadata.TopicPartition]*directread.GoneError)}
		parts := make(map[metadata.TopicPartition]int64, count)
		for j := range count {
			tp := s.tps[(i*count+j)%n]
			d.tps = append(d.tps, tp)
			parts[tp] = 0
		}
		st, err := f.objects.store(d.az)
		if err != nil {
			return fmt.Errorf("direct reader %d: %w", d.id, err)
		}
		d.store = &readerStore{ObjectStore: st, fleet: &f.counts}
		stores := make(map[string]storage.ObjectStore, len(s.cfg.azs))
		for _, az := range s.cfg.azs {
			stores[az] = d.store.reading() // it reads every AZ's bucket
		}
		// The reader reads the metadata log itself, not through the
		// brokers' meter: its reads are its cost, not replication's.
		d.log = &readerLog{Log: s.meta}
		if d.r, err = directread.New(directread.Config{Log: d.log, Stores: stores, Partitions: parts, Logger: quiet,
			UnavailableAfter: readerUnavailableAfter}); err != nil {
			return fmt.Errorf("direct reader %d: %w", d.id, err)
		}
		f.readers = append(f.readers, d)
	}
	if len(f.readers) == 0 {
		return nil
	}
	// Before any record is produced: from the first object on, nothing
	// is deleted before the readers read it.
	f.hold()
	ctx, cancel := context.WithCancel(context.Background())
	f.stopHold, f.held = cancel, make(chan struct{})
	go func() {
		defer close(f.held)
		t := time.NewTicker(holdEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f.hold()
			}
		}
	}()
	for _, d := range f.readers {
		ctx, cancel := context.WithCancel(context.Background())
		d.stop = cancel
		go labelled(ctx, roleReader, d.run) // for the CPU split
	}
	return nil
}

// holdEvery is how often the readers' positions are reported to the
// leaders: often against the leaders' GCInterval (1s), so that an object
// is rarely kept longer than a reader needs it.
const holdEvery = 20 * time.Millisecond

// hold reports, for each partition some running reader reads, the lowest
// of their next offsets to the partition's leader as its tiered mark: the
// leader deletes nothing a running reader has yet to read.
func (f *readerFleet) hold() {
	marks := make(map[metadata.TopicPartition]int64)
	for _, d := range f.readers {
		if !d.running() {
			continue
		}
		for _, tp := range d.tps {
			next, _ := d.r.Position(tp)
			if m, ok := marks[tp]; !ok || next < m {
				marks[tp] = next
			}
		}
	}
	for tp, mark := range marks {
		if l, _ := f.s.leaderFor(tp); l != nil {
			l.CurrentNode().ReportTiered(tp, mark)
		}
	}
}

// failAZ stops the readers in az, which the demo takes down: a consumer
// there goes down with it.
func (f *readerFleet) failAZ(az string) {
	for _, d := range f.readers {
		if d.az == az {
			d.mu.Lock()
			d.stoppedWith = az
			d.mu.Unlock()
			d.stop()
		}
	}
}

// close stops every reader and waits for them; it may be called again.
func (f *readerFleet) close() {
	if f.stopHold != nil {
		f.stopHold()
		<-f.held
	}
	for _, d := range f.readers {
		if d.stop != nil {
			d.stop()
			<-d.done
		}
		if d.r != nil {
			_ = d.r.Close()
		}
	}
}

// drain waits until every running reader has yielded its partitions up to
// their leaders' log ends (all committed once the followers caught up), or
// timeout runs out; it returns how long it waited and whether it ran out.
func (f *readerFleet) drain(ctx context.Context, timeout time.Duration) (time.Duration, bool, error) {
	start := time.Now()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		behind, err := f.behind()
		if err != nil {
			return 0, false, err
		}
		if behind == 0 || time.Since(start) > timeout {
			return time.Since(start), behind > 0, nil
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-t.C:
		}
	}
}

// behind counts the partitions running readers have not read to their
// leader's log end.
func (f *readerFleet) behind() (int, error) {
	n := 0
	for _, d := range f.readers {
		if !d.running() {
			continue
		}
		for _, tp := range d.tps {
			l, _ := f.s.leaderFor(tp)
			if l == nil {
				n++
				continue
			}
			end, err := l.Local.EndOffset(tp)
			if err != nil {
				return 0, err
			}
			if next, _ := d.r.Position(tp); next < end {
				n++
			}
		}
	}
	return n, nil
}

// run polls the reader until ctx ends or it fails.
func (d *demoReader) run(ctx context.Context) {
	defer close(d.done)
	for ctx.Err() == nil {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if d.waitingForLeader() {
			// Poll blocks until the reader has something; a partition
			// waiting for its leader is tried again soon regardless.
			pctx, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
		}
		fetch, err := d.r.Poll(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, context.DeadlineExceeded):
		case errors.Is(err, metadata.ErrClosed):
			return // the demo is shutting down
		case err != nil:
			d.mu.Lock()
			d.err = err
			d.mu.Unlock()
			return
		}
		d.take(fetch, time.Now())
		d.readFromLeaders(ctx)
	}
}

func (d *demoReader) waitingForLeader() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.gone) > 0
}

// take records what one Poll yielded and the partitions it paused.
func (d *demoReader) take(fetch directread.Fetch, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, b := range fetch.Batches {
		d.record(b.Partition, b.Batch, now)
	}
	for _, err := range fetch.Errors {
		var gone *directread.GoneError
		var trunc *directread.TruncatedError
		var mismatch *digest.Mismatch
		switch {
		case errors.As(err, &mismatch):
			// What it yielded differs from what the leader published:
			// not a pause to read around but a finding, which the report
			// lists and its verdict counts (Stats counts them all). The
			// reader has taken the leader's value and reads on.
			if len(d.mismatches) < maxMismatches {
				d.mismatches = append(d.mismatches, newDigestMismatch(fmt.Sprintf("reader %d", d.id), mismatch))
			}
		case errors.As(err, &gone):
			d.goneErrors++
			d.gone[gone.Partition] = gone
		case errors.As(err, &trunc):
			// Never without Config.Durable: a committed record is not
			// truncated. Should it happen, the comparison shows it: keep
			// what was yielded and read on from the new log.
			d.truncations++
			_ = d.r.Seek(trunc.Partition, trunc.Offset)
		default:
			d.err = err
		}
	}
}

// record adds a yielded batch; d.mu is held.
func (d *demoReader) record(tp metadata.TopicPartition, b storage.Batch, now time.Time) {
	d.logs[tp] = append(d.logs[tp], cluster.Digest(b))
	d.lag.Observe(now.Sub(time.UnixMilli(b.MaxTimestamp)))
	d.batches++
	d.records += b.LastOffset - b.FirstOffset + 1
	d.bytes += int64(len(b.Data))
	if d.f.s.leaderAZ(tp) != d.az {
		d.crossAZBytes += int64(len(b.Data))
	}
}

// errStopVisit ends a visit of a leader's log that has read what it wanted.
var errStopVisit = errors.New("visit done")

// readFromLeaders reads each gone partition's missing records from its
// leader's log, up to the leader's high watermark and the GoneError's
// ResumeHint, and resumes the reader after them. A partition without a
// leader (during a failover), or whose leader's high watermark is not past
// the offset yet, is tried again later.
func (d *demoReader) readFromLeaders(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for tp, g := range d.gone {
		if ctx.Err() != nil {
			return
		}
		l, _ := d.f.s.leaderFor(tp)
		if l == nil {
			continue
		}
		limit := l.CurrentNode().HighWatermark(tp)
		if g.ResumeHint > g.Offset && !errors.Is(g, storage.ErrUnavailable) {
			// Past ResumeHint the objects are readable; after an AZ
			// went down the next ones are likely in it too, so read
			// all the leader has committed instead.
			limit = min(limit, g.ResumeHint)
		}
		if limit <= g.Offset {
			continue
		}
		next, now := g.Offset, time.Now()
		_ = l.Local.EachBatch(tp, next, func(b storage.Batch) error {
			if b.FirstOffset != next || b.LastOffset >= limit {
				return errStopVisit
			}
			d.record(tp, b, now)
			d.brokerBytes += int64(len(b.Data))
			if l.AZ != d.az {
				d.brokerCross += int64(len(b.Data))
			}
			next = b.LastOffset + 1
			return nil
		})
		if next > g.Offset {
			if err := d.r.Seek(tp, next); err != nil {
				d.err = err
				return
			}
			delete(d.gone, tp)
		}
	}
}

// leaderAZ is the AZ of tp's current leader, or of its last one while it
// has none.
func (s *sim) leaderAZ(tp metadata.TopicPartition) string {
	return s.lastLeader(tp).AZ
}

// readerStore counts a reader's GETs, as the backend counts them.
type readerStore struct {
	storage.ObjectStore
	own   requestCounters
	fleet *requestCounters

	mu      sync.Mutex
	objects map[metadata.ObjectRef]struct{} // read from
}

func (r *readerStore) GetRange(ctx context.Context, ref metadata.ObjectRef, offset, length int64) ([]byte, error) {
	var b []byte
	err := r.get(ref, func() (n int, err error) {
		b, err = r.ObjectStore.GetRange(ctx, ref, offset, length)
		return len(b), err
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// get counts one GET of ref, which read makes.
func (r *readerStore) get(ref metadata.ObjectRef, read func() (int, error)) error {
	r.own.gets.Add(1)
	r.fleet.gets.Add(1)
	r.mu.Lock()
	if r.objects == nil {
		r.objects = make(map[metadata.ObjectRef]struct{})
	}
	r.objects[ref] = struct{}{}
	r.mu.Unlock()
	n, err := read()
	if err != nil {
		r.own.failed.Add(1)
		r.fleet.failed.Add(1)
		return err
	}
	r.own.bytesDown.Add(int64(n))
	r.fleet.bytesDown.Add(int64(n))
	return nil
}

// reading returns the store to read through: r, and a storage.RangeReader
// when the store it wraps is one.
func (r *readerStore) reading() storage.ObjectStore {
	if rr, ok := r.ObjectStore.(storage.RangeReader); ok {
		return &readerRangeStore{r, rr}
	}
	return r
}

// readerRangeStore is a readerStore over a storage.RangeReader.
type readerRangeStore struct {
	*readerStore
	rr storage.RangeReader
}

func (r *readerRangeStore) ReadRange(ctx context.Context, ref metadata.ObjectRef, offset int64, dst []byte) (int, error) {
	var n int
	err := r.get(ref, func() (int, error) {
		var err error
		n, err = r.rr.ReadRange(ctx, ref, offset, dst)
		return n, err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// readerLog counts the metadata a reader reads. It does not close the
// brokers' log.
type readerLog struct {
	metadata.Log
	read atomic.Int64
}

func (l *readerLog) Read(ctx context.Context, partition int32, from int64, max int) ([]metadata.Record, error) {
	recs, err := l.Log.Read(ctx, partition, from, max)
	for _, r := range recs {
		l.read.Add(int64(len(r.Value)))
	}
	return recs, err
}

func (l *readerLog) Close() error { return nil }

// readersReport is what the direct readers did and cost.
type readersReport struct {
	// Pricing says what the two costs count.
	Pricing string         `json:"pricing"`
	Readers []readerReport `json:"readers"`
	// CostUSD is the readers' direct reads; CrossAZCostUSD what consuming
	// the same bytes from the leaders across AZs would have cost.
	CostUSD        float64 `json:"cost_usd"`
	CrossAZCostUSD float64 `json:"cross_az_cost_usd"`
	SavingsRatio   float64 `json:"savings_ratio"`
	DrainMS        float64 `json:"drain_ms"`
	DrainTimedOut  bool    `json:"drain_timed_out"`
	// mismatches are the readers' first digest mismatches, which the
	// run's digests report lists.
	mismatches []digestMismatch
}

// readerReport is one reader's part of the report.
type readerReport struct {
	ID         int    `json:"id"`
	AZ         string `json:"az"`
	Partitions int    `json:"partitions"`
	// StoppedWith is the failed AZ the reader went down with.
	StoppedWith string `json:"stopped_with_az,omitempty"`
	Error       string `json:"error,omitempty"`

	Records int64 `json:"records"`
	Batches int64 `json:"batches"`
	Bytes   int64 `json:"bytes"`
	// Lag is from a batch's produce time to the reader yielding it.
	LagP50MS float64 `json:"lag_p50_ms"`
	LagP99MS float64 `json:"lag_p99_ms"`
	LagMaxMS float64 `json:"lag_max_ms"`

	Gets            int64   `json:"gets"`
	FailedGets      int64   `json:"failed_gets"`
	BytesDownloaded int64   `json:"bytes_downloaded"`
	ObjectsRead     int     `json:"objects_read"`
	GetsPerObject   float64 `json:"gets_per_object"`
	MetadataBytes   int64   `json:"metadata_bytes_read"`
	// GoneErrors counts the directread.GoneErrors it had, BytesFromLeader
	// what it then read from the leaders.
	GoneErrors      int   `json:"gone_errors"`
	BytesFromLeader int64 `json:"bytes_from_leader"`
	Truncations     int   `json:"truncations"`
	// DigestChecks counts its comparisons of the rolling digest of what
	// it yielded with the one the leader published, DigestMismatches
	// those that differed, DigestsTaken the values it took unchecked to
	// check what came next.
	DigestChecks     uint64 `json:"digest_checks"`
	DigestMismatches uint64 `json:"digest_mismatches"`
	DigestsTaken     uint64 `json:"digests_taken"`

	// The direct reads' cost, by line, and that of consuming the bytes
	// from the leaders: CrossAZBytes of them came from a leader in
	// another AZ, CrossAZBytesCompressed as producers would send them.
	GetUSD                 float64 `json:"get_usd"`
	RetrievalUSD           float64 `json:"retrieval_usd"`
	MetadataUSD            float64 `json:"metadata_usd"`
	FromLeaderUSD          float64 `json:"from_leader_usd"`
	CostUSD                float64 `json:"cost_usd"`
	CrossAZBytes           int64   `json:"cross_az_bytes"`
	CrossAZBytesCompressed int64   `json:"cross_az_bytes_compressed"`
	CrossAZCostUSD         float64 `json:"cross_az_cost_usd"`

	// Consistent: what it yielded is its partitions' committed logs, as
	// their leaders have them at the end, byte for byte, from offset 0
	// (up to where it stopped, for a reader in the failed AZ).
	Consistent bool   `json:"consistent"`
	Diverged   string `json:"diverged,omitempty"`
}

// report compares what each reader yielded with the leaders' final logs
// and prices it; call it after close. ratio is the producers' compression
// ratio.
func (f *readerFleet) report(p costmodel.Prices, ratio float64, drain time.Duration, timedOut bool) (*readersReport, error) {
	if len(f.readers) == 0 {
		return nil, nil
	}
	crossAZ := (p.CrossAZOutPerGB + p.CrossAZInPerGB) / p.BytesPerGB
	rep := &readersReport{DrainMS: ms(drain), DrainTimedOut: timedOut,
		Pricing: fmt.Sprintf("direct: GETs and retrieval at %s prices (no transfer fee for a GET from another AZ of the region), "+
			"the metadata log read across AZs, and what was read from a leader in another AZ after a GoneError, at %s/GB (out plus in); "+
			"from the leader: the bytes of partitions led from another AZ, compressed as producers would (%.1f%%), at %s/GB (out plus in). "+
			"A consumer in the leader's AZ, or fetching from a replica in its own (KIP-392), pays no transfer either way",
			p.Name, usd(crossAZ*p.BytesPerGB), 100*ratio, usd(crossAZ*p.BytesPerGB))}
	want := make(map[metadata.TopicPartition][]cluster.BatchDigest)
	for _, d := range f.readers {
		d.mu.Lock()
		r := readerReport{ID: d.id, AZ: d.az, Partitions: len(d.tps), StoppedWith: d.stoppedWith,
			Records: d.records, Batches: d.batches, Bytes: d.bytes,
			LagP50MS: ms(d.lag.Quantile(0.5)), LagP99MS: ms(d.lag.Quantile(0.99)), LagMaxMS: ms(d.lag.Max),
			MetadataBytes: d.log.read.Load(), GoneErrors: d.goneErrors, BytesFromLeader: d.brokerBytes, Truncations: d.truncations,
			CrossAZBytes: d.crossAZBytes, CrossAZBytesCompressed: int64(float64(d.crossAZBytes) * ratio), Consistent: true}
		if d.err != nil {
			r.Error, r.Consistent = d.err.Error(), false
		}
		if d.r != nil {
			ds := d.r.Stats()
			r.DigestChecks, r.DigestMismatches, r.DigestsTaken = ds.DigestChecks, ds.DigestMismatches, ds.DigestsTaken
		}
		for _, m := range d.mismatches {
			if len(rep.mismatches) < maxMismatches {
				rep.mismatches = append(rep.mismatches, m)
			}
		}
		st := d.store.counts()
		r.Gets, r.FailedGets, r.BytesDownloaded, r.ObjectsRead = st.gets, st.failed, st.bytesDown, st.objects
		if st.objects > 0 {
			r.GetsPerObject = float64(st.gets) / float64(st.objects)
		}
		b, err := costmodel.PriceShare(p, costmodel.Share{Gets: float64(st.gets), BytesDown: float64(st.bytesDown), MetadataBytes: float64(r.MetadataBytes)})
		if err != nil {
			d.mu.Unlock()
			return nil, err
		}
		r.GetUSD, r.RetrievalUSD, r.MetadataUSD = b.GetUSD, b.RetrievalUSD, b.MetadataUSD
		r.FromLeaderUSD = float64(d.brokerCross) * ratio * crossAZ
		r.CostUSD = b.TotalUSD + r.FromLeaderUSD
		r.CrossAZCostUSD = float64(r.CrossAZBytesCompressed) * crossAZ
		for _, tp := range d.tps {
			w, ok := want[tp]
			if !ok {
				w = f.leaderLog(tp)
				want[tp] = w
			}
			if diff := cluster.DiffDigests(w, d.logs[tp], d.stoppedWith != ""); diff != "" && r.Diverged == "" {
				r.Consistent, r.Diverged = false, fmt.Sprintf("%s: %s", tp, diff)
			}
		}
		d.mu.Unlock()
		rep.Readers = append(rep.Readers, r)
		rep.CostUSD += r.CostUSD
		rep.CrossAZCostUSD += r.CrossAZCostUSD
	}
	if rep.CrossAZCostUSD > 0 {
		rep.SavingsRatio = (rep.CrossAZCostUSD - rep.CostUSD) / rep.CrossAZCostUSD
	}
	return rep, nil
}

// consistent reports whether every reader ended consistent, and nil
// without readers.
func (r *readersReport) consistent() *bool {
	if r == nil {
		return nil
	}
	ok := !r.DrainTimedOut
	for _, rd := range r.Readers {
		ok = ok && rd.Consistent
	}
	return &ok
}

// leaderLog is the digest of tp's log as its leader has it at the end.
func (f *readerFleet) leaderLog(tp metadata.TopicPartition) []cluster.BatchDigest {
	return cluster.DigestLog(f.s.lastLeader(tp).Local, tp)
}

type readerCounts struct {
	gets, failed, bytesDown int64
	objects                 int
}

// counts are the GETs of this reader's store alone.
func (r *readerStore) counts() readerCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return readerCounts{gets: r.own.gets.Load(), failed: r.own.failed.Load(), bytesDown: r.own.bytesDown.Load(), objects: len(r.objects)}
}

// writeText adds the readers' lines to the text report.
func (r *readersReport) writeText(w io.Writer) error {
	if r == nil {
		return nil
	}
	var b strings.Builder
	var notes []string
	fmt.Fprintf(&b, "\ndirect readers\tpartitions\tyielded\tlag p50/p99\tGETs (per object)\tdirect cost\tfrom the leader\tconsistent\n")
	for _, rd := range r.Readers {
		consistent := "yes"
		switch {
		case !rd.Consistent && rd.Error != "":
			consistent = "NO: " + rd.Error
		case !rd.Consistent:
			consistent = "NO: " + rd.Diverged
		case rd.StoppedWith != "":
			consistent = "yes, up to where it went down with " + rd.StoppedWith
		}
		fmt.Fprintf(&b, "  reader %d in %s\t%d\t%s\t%.0f/%.0f ms\t%s (%.2f)\t%s\t%s\t%s\n", rd.ID, rd.AZ, rd.Partitions,
			humanBytes(float64(rd.Bytes)), rd.LagP50MS, rd.LagP99MS, thousands(rd.Gets), rd.GetsPerObject, usd(rd.CostUSD), usd(rd.CrossAZCostUSD), consistent)
		if rd.GoneErrors > 0 {
			notes = append(notes, fmt.Sprintf("reader %d: %d times gone from object storage (an AZ down, or collected): %s read from the leaders instead",
				rd.ID, rd.GoneErrors, humanBytes(float64(rd.BytesFromLeader))))
		}
	}
	fmt.Fprintf(&b, "  total\t\t\t\t\t%s\t%s\n", usd(r.CostUSD), usd(r.CrossAZCostUSD))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if _, err := io.WriteString(tw, b.String()); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		if _, err := fmt.Fprintf(w, "  %s\n", n); err != nil {
			return err
		}
	}
	drain := ""
	if r.DrainTimedOut {
		drain = fmt.Sprintf(" The readers had not caught up when --drain-timeout ran out (%.0f ms).", r.DrainMS)
	}
	_, err := fmt.Fprintf(w, "(%s; consuming directly cost %s than from the leaders.%s)\n", r.Pricing, lessOrMore(r.SavingsRatio), drain)
	return err
}

// facts are the readers' lines of the HTML report.
func (r *readersReport) facts() []reportFact {
	if r == nil {
		return nil
	}
	var out []reportFact
	for _, rd := range r.Readers {
		v := fmt.Sprintf("in %s, %d partitions: %s yielded, lag p50 %.0f ms, p99 %.0f ms, %s GETs (%.2f per object), %s against %s from the leaders; consistent: %v",
			rd.AZ, rd.Partitions, humanBytes(float64(rd.Bytes)), rd.LagP50MS, rd.LagP99MS, thousands(rd.Gets), rd.GetsPerObject, usd(rd.CostUSD), usd(rd.CrossAZCostUSD), rd.Consistent)
		if rd.StoppedWith != "" {
			v += " (down with " + rd.StoppedWith + ")"
		}
		out = append(out, reportFact{fmt.Sprintf("direct reader %d", rd.ID), v})
	}
	return out
}

// inconsistency is the error a run ends with when a reader did not end
// consistent.
func (r *readersReport) inconsistency() error {
	for _, rd := range r.Readers {
		switch {
		case rd.Error != "":
			return fmt.Errorf("direct reader %d failed: %s", rd.ID, rd.Error)
		case !rd.Consistent:
			return fmt.Errorf("direct reader %d yielded what its leaders' committed logs do not hold: %s", rd.ID, rd.Diverged)
		}
	}
	return fmt.Errorf("direct readers had not caught up when --drain-timeout ran out after %.0f ms: raise it to let them finish", r.DrainMS)
}
