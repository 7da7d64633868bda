package sim

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/internal/hedge"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// Config selects one simulation run.
type Config struct {
	// Seed drives every choice the run makes: the cluster's shape, the
	// engines' settings, the schedule of work and faults, the latencies.
	Seed uint64
	// Verbose adds the engines' own logs (Info and above) to the trace.
	Verbose bool
	// WeakFencing replaces each broker's follower core with the reference
	// follower of this package with one fencing rule disabled: an entry
	// that fencing drops as fenced by a newer epoch is applied anyway. It
	// exists to show that the invariants catch a follower that breaks
	// fencing; see TestWeakenedFencingIsCaught. The cores then only lead.
	WeakFencing bool
	// ReferenceFollower replaces each broker's follower core with the
	// reference follower with fencing intact: the control for WeakFencing.
	ReferenceFollower bool
	// DurableReaders makes the direct readers serve every record
	// published, not only the committed ones (directread's Durable): their
	// commit check is off. It exists to show that the reader invariants
	// catch a reader that yields what a later leader truncates; see
	// TestWeakenedReaderIsCaught.
	DurableReaders bool
	// Attacks adds the adversarial broker (adversary.go): calls of the
	// Node's contract made late, early, refused, cancelled or out of
	// date, local-log calls failing, metadata outages with Sweep,
	// followers brought back behind the store, judged by the contract's
	// model (model.go). Its steps draw from a generator of their own, so
	// a seed without attacks runs as it did.
	Attacks bool
	// Weaken undoes, one flag per contract item, a fix of the library
	// (in the sim's mirror of walstore.Node, or behind leadcore's
	// SweepUnpublished), to show the model catches it; see
	// TestWeakened...IsCaught.
	Weaken Weakening
	// TraceWriter, if set, receives the whole trace, one line per event,
	// as the run makes it (Result.Trace keeps at most its first 200,000
	// lines).
	TraceWriter io.Writer
}

// Weakening selects the library fixes a run undoes, one per item of the
// broker contract (see model.go).
type Weakening struct {
	// Late: a wait is answered by whatever leadership is current, not
	// only the one that held its epoch, and BecomeLeader takes an epoch
	// not above the one followed.
	Late bool
	// Sweep: Sweep deletes objects a live leadership still means to
	// publish.
	Sweep bool
	// Refused: BecomeLeader stops following before it can be refused.
	Refused bool
	// Cancelled: BecomeFollower resigns before it waits, so giving up
	// leaves the partition neither led nor followed.
	Cancelled bool
	// Append: an Append blocked on a full buffer wakes only when space
	// frees, not when its leadership ends.
	Append bool
	// Health: the leader side's failing partitions do not show in
	// Health or PartitionError.
	Health bool
	// CatchUp: followers report progress only when their log changes,
	// never again while idle, and leaders never republish for a
	// follower that lags behind what the store retains (leadcore's
	// SkipCatchUp).
	CatchUp bool
}

// Kind names an invariant.
type Kind string

// The invariants, and the two ways a run itself can go wrong.
const (
	// KindCorruptAppend: a follower appended bytes no leader produced for
	// that (partition, epoch, offset): a checksum failure got through.
	KindCorruptAppend Kind = "corrupt-append"
	// KindFencedAppend: a follower appended a record of epoch e at an
	// offset at or past the start of a newer epoch e' after it had handled
	// the marker of e': something a zombie (or a lost tail) sent after its
	// fence was applied.
	KindFencedAppend Kind = "fenced-append"
	// KindDivergenceKept: a follower still holds a record that a marker it
	// has handled fences: it did not truncate its divergent tail.
	KindDivergenceKept Kind = "divergence-kept"
	// KindDurableLost: an offset a leader reported durable (DurableOffset,
	// WaitDurable) is in the true log yet neither in any stored object nor
	// on every follower.
	KindDurableLost Kind = "durable-lost"
	// KindGCNeeded: garbage collection deleted an object a follower still
	// needed.
	KindGCNeeded Kind = "gc-needed"
	// KindNoProgress: once faults stopped, a follower did not catch up
	// with its leader (or a leader did not make its data durable) within
	// the bound.
	KindNoProgress Kind = "no-progress"
	// KindEngineError: an engine returned an error it should not have.
	KindEngineError Kind = "engine-error"
	// KindReaderTruncated: a direct reader yielded a batch that is not, or
	// is no longer, the partition's log's batch at its offsets: it served
	// a record that a later leader truncated.
	KindReaderTruncated Kind = "reader-truncated"
	// KindReaderSkipped: a direct reader's yields of a partition are not
	// contiguous from where it started or resumed.
	KindReaderSkipped Kind = "reader-skipped"
	// KindReaderGone: a direct reader reported a partition gone at an
	// offset whose record the retained metadata describes in a stored
	// object.
	KindReaderGone Kind = "reader-gone"
	// KindAckLost: a wait returned nil from a leadership other than the
	// one that held its epoch, or a WaitReplicated that returned nil
	// covers a batch some replica does not hold at the end.
	KindAckLost Kind = "ack-lost"
	// KindBadTransition: a transition took effect that the contract
	// refuses, or one that did not take effect misstated the role in
	// effect, or the cores do other than the role in effect says.
	KindBadTransition Kind = "bad-transition"
	// KindRoleLost: after a transition, the cores neither lead nor
	// follow a partition whose role in effect is leading or following.
	KindRoleLost Kind = "role-lost"
	// KindAppendOutlived: an Append waiting for buffer space still waits
	// after the leadership it waits in ended.
	KindAppendOutlived Kind = "append-outlived"
	// KindSweptUnpublished: Sweep deleted an object a live leadership
	// still means to publish.
	KindSweptUnpublished Kind = "swept-unpublished"
	// KindFailureHidden: a leadership's background failure does not show
	// in Health (PartitionError).
	KindFailureHidden Kind = "failure-hidden"
	// KindFollowerStuck: under attacks, once faults stopped, a follower
	// in the placement did not catch up with its leader.
	KindFollowerStuck Kind = "follower-stuck"
	// KindDigestMismatch: a follower's or reader's rolling digest of what
	// it applied differed from the one its leader published at the same
	// offset (package digest): the replica's log differs from the
	// leader's, and the replica itself noticed, while it ran.
	KindDigestMismatch Kind = "digest-mismatch"
	// KindHarness: the simulation itself failed; not a finding about the
	// engines.
	KindHarness Kind = "harness"
)

// Violation is one broken invariant.
type Violation struct {
	// At is the simulated time since the run started.
	At     time.Duration
	Kind   Kind
	Detail string
}

func (v Violation) String() string {
	return fmt.Sprintf("t=%.3fs %s: %s", v.At.Seconds(), v.Kind, v.Detail)
}

// Stats counts what a run did, to show that a seed exercised something.
type Stats struct {
	Steps, Produced, Rejected       int
	ZombieProduced                  int
	Elections, Zombies, Crashes     int
	FollowerRestarts, Reassignments int
	Outages, Faults, Trims          int
	Applied, Truncations            int
	Objects, Deleted, NotFound      int
	FencedAppends                   int
	DurableClaims                   int
	ReaderBatches, ReaderGone       int
	// ReaderGoneBusy counts the gone judgements that rested on a high
	// watermark a reader took, not on empty reads alone.
	ReaderGoneBusy int
	// DigestChecks counts the digests followers and readers compared
	// with their leaders' (each difference is a KindDigestMismatch).
	DigestChecks uint64
	Converged    time.Duration
}

// Result is what one run found.
type Result struct {
	Seed uint64
	// Violations are the broken invariants, in the order found; the run
	// stops soon after the first.
	Violations []Violation
	// Trace is the run's event trace, one line per event.
	Trace []string
	Stats Stats
	// SimTime is how much simulated time the run took.
	SimTime time.Duration
	// Shape describes the cluster and settings the seed chose.
	Shape string
}

// Failed reports whether the run broke an invariant.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

// world is one simulated cluster and everything the checks know about it.
// Everything runs on one goroutine, one event at a time (see loop.go), so
// nothing here is locked.
type world struct {
	cfg Config
	p   params
	rng *rand.Rand // the driver's steps draw from it, in event order

	start, clock time.Time // when the run began; the simulated now
	events       eventHeap
	seq          uint64 // orders events scheduled for the same instant
	done         bool   // the run is over: converged, or given up

	meta    *memstore.Log
	cluster *memstore.Cluster
	chaos   *chaos
	brokers map[int32]*broker
	ids     []int32
	tps     []metadata.TopicPartition

	quiet bool // no more disorder: the quiet phase began

	parts    map[metadata.TopicPartition]*partState
	registry map[batchKey]batchMeta
	objects  map[metadata.ObjectRef]*object
	sections map[metadata.TopicPartition][]storedSection
	readers  []*simReader
	model    *model // nil unless the run checks the contract
	// lostTail are, per partition, the followers that came back with
	// their log's tail lost (the adversary's doing) and have not reported
	// since: their leader cannot know what they lack, so its deletions
	// are not judged against them until they do.
	lostTail   map[metadata.TopicPartition]map[int32]bool
	adv        *adversary // nil unless the run has attacks
	violations []Violation
	stats      Stats
	trace      []string
	// sink, when set, receives every trace line as it is made, past
	// maxTrace too.
	sink func(string)
}

// partState is the controller's record of one partition: its replicas, its
// leader and epoch, every epoch start it ever decided, and the brokers that
// still believe they lead it. The true log is the log of the leader: a new
// leader is always one whose log is a prefix of the current leader's, so a
// record once out of the true log never comes back.
type partState struct {
	tp       metadata.TopicPartition
	replicas []int32
	leader   int32
	epoch    int32
	starts   map[int32]int64
	zombies  map[int32]int32 // broker -> the epoch it still leads at
	// durChecked is the offset below which the current leader's durable
	// claims have been checked.
	durChecked int64
	// committed is the highest commit any leader published or high
	// watermark the controller's leader reached: every replica the
	// controller elects holds the log below it (Kafka's rule of electing
	// from the in-sync replicas).
	committed int64
}

func (w *world) now() time.Duration { return w.clock.Sub(w.start) }

func (w *world) tracef(format string, args ...any) {
	line := fmt.Sprintf("t=%9.3fs ", w.now().Seconds()) + fmt.Sprintf(format, args...)
	if w.sink != nil {
		w.sink(line)
	}
	if len(w.trace) < maxTrace {
		w.trace = append(w.trace, line)
	}
}

// maxTrace bounds the trace kept for a run.
const maxTrace = 200_000

func (w *world) violate(kind Kind, format string, args ...any) {
	v := Violation{At: w.now(), Kind: kind, Detail: fmt.Sprintf(format, args...)}
	if len(w.violations) < 20 {
		w.violations = append(w.violations, v)
	}
	w.tracef("VIOLATION %s: %s", kind, v.Detail)
}

func (w *world) failed() bool { return len(w.violations) > 0 }

// digests takes what a replica's core said of its digests: each mismatch
// is a violation, and its count of checks, now, goes to the run's since
// last.
func (w *world) digests(who string, ms []digest.Mismatch, now uint64, last *uint64) {
	for i := range ms {
		w.violate(KindDigestMismatch, "%s: %v", who, &ms[i])
	}
	w.stats.DigestChecks += now - *last
	*last = now
}

func (w *world) disorderNow() disorder {
	if w.quiet {
		return disorder{}
	}
	return w.p.disorder
}

// logger returns the logger for one engine: the trace when verbose, else
// nothing.
func (w *world) logger(name string) *slog.Logger {
	if !w.cfg.Verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(&traceHandler{w: w, prefix: name})
}

func (w *world) result() *Result {
	return &Result{
		Seed: w.cfg.Seed, Violations: w.violations, Trace: w.trace, Stats: w.stats,
		SimTime: w.now(), Shape: w.p.String(),
	}
}

// String summarizes the parameters for the trace and failure reports.
func (p params) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d brokers, %d partitions at RF %d, %d metadata partitions; ", p.brokers, p.partitions, p.rf, p.metaPartitions)
	fmt.Fprintf(&b, "latency %q; faulty for %v, a step every %v on average; ", p.profile.Name, p.faultyFor, p.stepMean)
	fmt.Fprintf(&b, "leader interval %v, objects %d bytes, %d partitions max, buffer %d, %d in flight, codec %s, markers every %v, GC every %v; ",
		p.leader.Interval, p.leader.ObjectBytes, p.leader.MaxPartitions, p.leader.BufferBytes, p.leader.MaxInflight, p.leader.Codec, p.leader.MarkerRefresh, p.leader.GCInterval)
	fmt.Fprintf(&b, "follower fetch %d, readahead %d, read batch %d, poll %v, gap %d; ",
		p.follower.FetchConcurrency, p.follower.Readahead, p.follower.ReadBatch, p.follower.PollInterval, p.follower.CoalesceGap)
	fmt.Fprintf(&b, "hedged GETs %+v, hedged PUTs %+v; ", p.getHedge, p.putHedge)
	fmt.Fprintf(&b, "metadata delayed p=%.2f up to %v, duplicated p=%.2f; ", p.disorder.delayP, p.disorder.maxDelay, p.disorder.dupP)
	return strings.TrimSuffix(b.String(), "; ")
}

// params are the seed's choices of shape and settings.
type params struct {
	brokers        int
	partitions     int
	rf             int
	metaPartitions int32
	profile        memstore.Profile
	faultyFor      time.Duration
	stepMean       time.Duration
	maxRecords     int
	largeP         float64
	ackP           float64
	leader         walstore.NodeConfig
	follower       walstore.NodeConfig
	// getHedge and putHedge are the followers' and leaders' hedging.
	getHedge, putHedge hedge.Policy
	disorder           disorder
	// weights of the step kinds
	weights [numSteps]float64
}

func choose[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }

func drawParams(rng *rand.Rand, cfg Config) params {
	p := params{}
	p.brokers = 4 + rng.IntN(2)
	p.partitions = 1 + rng.IntN(6)
	p.rf = 2 + rng.IntN(2)
	p.metaPartitions = int32(1 + rng.IntN(4))
	var err error
	p.profile, err = memstore.ParseProfile(choose(rng, "none", "s3express", "s3express", "s3standard"))
	if err != nil {
		panic(err) // the names are ParseProfile's own
	}
	p.faultyFor = time.Duration(4+rng.IntN(9)) * time.Second
	p.stepMean = time.Duration(5+rng.IntN(25)) * time.Millisecond
	p.maxRecords = choose(rng, 1, 5, 20)
	p.largeP = choose(rng, 0, 0.02, 0.1)
	p.ackP = choose(rng, 0, 0.1, 0.5)
	p.leader = walstore.NodeConfig{
		Interval:      choose[time.Duration](rng, 2, 10, 50, 200) * time.Millisecond,
		ObjectBytes:   choose(rng, 2<<10, 16<<10, 256<<10),
		MaxPartitions: choose(rng, 1, 2, 1000),
		MaxInflight:   1 + rng.IntN(4),
		Backoff:       walstore.Backoff{Initial: choose[time.Duration](rng, 1, 10) * time.Millisecond, Max: choose[time.Duration](rng, 50, 500) * time.Millisecond},
		MarkerRefresh: choose(rng, 300*time.Millisecond, time.Second, 3*time.Second),
		GCInterval:    choose(rng, 50*time.Millisecond, 300*time.Millisecond, time.Second),
		DegradedAfter: time.Second,
		Codec:         choose(rng, metadata.CodecNone, metadata.CodecNone, metadata.CodecS2, metadata.CodecZstd),
		Overflow:      walstore.Reject,
	}
	p.leader.BufferBytes = p.leader.ObjectBytes * choose(rng, 4, 64)
	p.follower = walstore.NodeConfig{
		FetchConcurrency: 1 + rng.IntN(8),
		Readahead:        choose(rng, 1, 4, 16),
		ReadBatch:        choose(rng, 1, 8, 256),
		PollInterval:     choose[time.Duration](rng, 2, 10, 30) * time.Millisecond,
		CoalesceGap:      choose[int64](rng, -1, 0, 1<<10),
		Backoff:          walstore.Backoff{Initial: choose[time.Duration](rng, 1, 10) * time.Millisecond, Max: choose[time.Duration](rng, 50, 500) * time.Millisecond},
	}
	// Hedging is drawn from a generator of its own, so that the draws
	// above, and the seeds that reproduce their findings, stay as they were.
	hrng := rand.New(rand.NewPCG(cfg.Seed, 0x6865646765))
	policies := []hedge.Policy{
		{}, // off
		{Quantile: 0.95, Min: 5 * time.Millisecond, Max: 500 * time.Millisecond, Budget: 0.05, Burst: 3}, // walstore's defaults
		{Quantile: 0.5, Min: time.Millisecond, Max: 20 * time.Millisecond, Budget: 1, Burst: 3},          // hedging nearly everything
	}
	p.getHedge, p.putHedge = choose(hrng, policies...), choose(hrng, policies...)
	p.disorder = choose(rng,
		disorder{},
		disorder{delayP: 0.2, maxDelay: 200 * time.Millisecond, dupP: 0.05},
		disorder{delayP: 0.5, maxDelay: 2 * time.Second, dupP: 0.2},
	)
	p.weights = [numSteps]float64{
		stepProduce:       60,
		stepZombieProduce: 20,
		stepFault:         choose(rng, 0.5, 3.0),
		stepOutage:        choose(rng, 0.2, 1.0),
		stepElection:      choose(rng, 0.5, 2.0),
		stepFollowerCrash: choose(rng, 0.3, 1.5),
		stepBrokerCrash:   choose(rng, 0.1, 0.5),
		stepReassign:      choose(rng, 0.1, 0.7),
	}
	return p
}
