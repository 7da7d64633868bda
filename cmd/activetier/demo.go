package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/activetier/activetier/internal/cputime"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/walstore"
)

// demoOptions are the flags of `activetier demo`.
type demoOptions struct {
	duration     time.Duration
	rate         float64
	partitions   int
	topics       int
	brokers      int
	azs          int
	rf           int
	interval     time.Duration
	objectBytes  byteSize
	batchBytes   byteSize
	codec        string
	profile      string
	failAZ       string
	corrupt      bool
	seed         uint64
	json         bool
	drainTimeout time.Duration
	verbose      bool
	s3           s3DemoOptions
	store        storeFlag
	metricsAddr  string
	report       string
	readers      readerOptions
	prof         profileOptions
}

func demoFlags() (*demoOptions, *flag.FlagSet) {
	o := &demoOptions{objectBytes: 4 << 20, batchBytes: 16 << 10}
	fs := newFlagSet("demo")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long to produce")
	fs.Float64Var(&o.rate, "rate", 10, "produced `MB/s` across the cluster (1 MB = 10^6 bytes)")
	fs.IntVar(&o.partitions, "partitions", 300, "partitions, divided among the topics")
	fs.IntVar(&o.topics, "topics", defaultDemoTopics, "topics, sharing the partitions in proportion N, N-1, ..., 1 so that their traffic differs (unless given, no more than --partitions)")
	fs.IntVar(&o.brokers, "brokers", 3, "brokers, spread over the AZs in turn")
	fs.IntVar(&o.azs, "azs", 0, "availability zones, one bucket each (0: min(3, brokers))")
	fs.IntVar(&o.rf, "rf", 3, "replication factor: replicas of a partition are in distinct AZs")
	fs.DurationVar(&o.interval, "interval", 100*time.Millisecond, "flush interval: the longest a batch waits for its object")
	fs.Var(&o.objectBytes, "object-bytes", "cut an object early at this `size`")
	fs.Var(&o.batchBytes, "batch-bytes", "mean `size` of a producer batch (each between half and one and a half times it)")
	fs.StringVar(&o.codec, "codec", "zstd", "section codec: none, zstd or s2")
	fs.StringVar(&o.profile, "profile", "s3express", "object store latency profile: "+strings.Join(memstore.ProfileNames(), ", ")+" (with --s3-endpoint only the price list)")
	fs.StringVar(&o.failAZ, "fail-az", "", "take this `AZ`'s bucket and brokers down halfway through (az1, az2, ... or an AZ of --buckets)")
	fs.BoolVar(&o.corrupt, "corrupt-follower", false, "a third of the way through, make one follower's local log return a changed byte in the last batch it holds of a partition, and restart that follower from its log: its digest check must report the mismatch, and the run ends inconsistent")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the records, placement choices and simulated latencies")
	fs.BoolVar(&o.json, "json", false, "print only the final report, as one JSON object")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 30*time.Second, "how long to wait, after producing, for followers to catch up")
	fs.BoolVar(&o.verbose, "verbose", false, "log the engines' events (truncations, retries, ...) to stderr")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://`HOST:PORT`/metrics while the demo runs (port 0: any free port, printed on stderr)")
	fs.StringVar(&o.report, "report", "", "write a self-contained HTML report of the run, with charts, to `FILE`")
	o.prof.register(fs)
	o.s3.register(fs)
	o.readers.register(fs)
	fs.Var(&o.store, "store", "keep the buckets in another object store, as `KIND=VALUE`: "+storeKindsUsage())
	return o, fs
}

// defaultDemoTopics is how many topics the demo has unless told.
const defaultDemoTopics = 4

// Limits that keep a demo inside one process's memory and CPU.
const (
	maxDemoPartitions = 100_000
	maxDemoBrokers    = 100
	maxDemoBatchBytes = 1 << 20 // Kafka's default max.request.size
	// maxDemoObjectBytes is the leaders' upload buffer, walstore's default
	// NodeConfig.BufferBytes, which the demo keeps: an object is cut from
	// buffered batches, so it cannot be larger.
	maxDemoObjectBytes = 64 << 20
)

// validate checks the flags and returns the cluster they describe.
func (o *demoOptions) validate(fs *flag.FlagSet) (simConfig, error) {
	var cfg simConfig
	named, err := o.s3.validate(fs)
	if err != nil {
		return cfg, err
	}
	if err := o.validateStore(fs); err != nil {
		return cfg, err
	}
	if err := o.readers.validate(fs); err != nil {
		return cfg, err
	}
	// The AZs are --azs of them, or those --buckets names.
	azsFrom := "--azs"
	switch {
	case named != nil && isSet(fs, "azs") && o.azs != len(named):
		return cfg, flagError(fs, "azs", fmt.Sprintf("must be the number of AZs --buckets names (%d), or left out", len(named)))
	case named != nil:
		o.azs, azsFrom = len(named), "the AZs of --buckets"
		if o.azs > o.brokers {
			return cfg, flagError(fs, "buckets", fmt.Sprintf("names %d AZs, more than --brokers (%d): each AZ needs a broker", o.azs, o.brokers))
		}
	case !isSet(fs, "azs"):
		o.azs = min(3, o.brokers)
	}
	if !isSet(fs, "topics") {
		o.topics = min(defaultDemoTopics, o.partitions)
	}
	switch {
	case o.duration <= 0:
		return cfg, flagError(fs, "duration", "must be positive")
	case o.partitions < 1 || o.partitions > maxDemoPartitions:
		return cfg, flagError(fs, "partitions", fmt.Sprintf("must be between 1 and %d", maxDemoPartitions))
	case o.topics < 1 || o.topics > o.partitions:
		return cfg, flagError(fs, "topics", fmt.Sprintf("must be between 1 and --partitions (%d): each topic has a partition at least", o.partitions))
	case o.brokers < 1 || o.brokers > maxDemoBrokers:
		return cfg, flagError(fs, "brokers", fmt.Sprintf("must be between 1 and %d", maxDemoBrokers))
	case o.azs < 1 || o.azs > o.brokers:
		return cfg, flagError(fs, "azs", fmt.Sprintf("must be between 1 and --brokers (%d)", o.brokers))
	case o.rf < 2:
		return cfg, flagError(fs, "rf", "must be at least 2: with one replica nothing is replicated")
	case o.rf > o.brokers:
		return cfg, flagError(fs, "rf", fmt.Sprintf("must be at most --brokers (%d): replicas are on distinct brokers", o.brokers))
	case o.rf > o.azs:
		return cfg, flagError(fs, "rf", fmt.Sprintf("must be at most %s (%d): replicas are in distinct AZs", azsFrom, o.azs))
	case o.interval < time.Millisecond:
		return cfg, flagError(fs, "interval", "must be at least 1ms")
	case o.objectBytes <= 0 || o.objectBytes > maxDemoObjectBytes:
		return cfg, flagError(fs, "object-bytes", "must be between 1 and "+formatBytes(maxDemoObjectBytes)+", the leaders' upload buffer")
	case o.batchBytes <= 0 || o.batchBytes > maxDemoBatchBytes:
		return cfg, flagError(fs, "batch-bytes", "must be between 1 and 1MiB")
	case o.drainTimeout <= 0:
		return cfg, flagError(fs, "drain-timeout", "must be positive")
	}
	if err := checkMBPerSec(fs, "rate", o.rate); err != nil {
		return cfg, err
	}
	codec, err := metadata.ParseCodec(o.codec)
	if err != nil {
		return cfg, flagError(fs, "codec", "unknown codec (want none, zstd or s2)")
	}
	profile, err := memstore.ParseProfile(o.profile)
	if err != nil {
		return cfg, flagError(fs, "profile", "unknown profile (want "+strings.Join(memstore.ProfileNames(), ", ")+")")
	}
	azs := named
	if azs == nil {
		azs = azNames(o.azs)
	}
	if o.failAZ != "" && !slices.Contains(azs, o.failAZ) {
		return cfg, flagError(fs, "fail-az", "no such AZ (want one of "+strings.Join(azs, ", ")+")")
	}
	logger := slog.New(slog.DiscardHandler)
	return simConfig{
		brokers: o.brokers, azs: azs, topics: o.topics, partitions: o.partitions, rf: o.rf,
		interval: o.interval, objectBytes: int(o.objectBytes), codec: codec, profile: profile,
		seed: o.seed, logger: logger, flippable: o.corrupt,
	}, nil
}

// validateStore checks --store against the flags it excludes.
func (o *demoOptions) validateStore(fs *flag.FlagSet) error {
	if o.store.kind == "" {
		if isSet(fs, "keep-objects") && o.s3.endpoint == "" {
			return flagError(fs, "keep-objects", "needs --s3-endpoint or --store")
		}
		return nil
	}
	switch {
	case isSet(fs, "s3-endpoint"):
		return flagError(fs, "store", "cannot be combined with --s3-endpoint: the buckets are in one store")
	case isSet(fs, "profile"):
		return flagError(fs, "profile", "has no effect with --store: the latency is the store's own, the prices its own")
	}
	return nil
}

func runDemo(ctx context.Context, e env, args []string) error {
	o, fs := demoFlags()
	if help, err := parseFlags(e, fs, "demo [flags]", args); help || err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	cfg, err := o.validate(fs)
	if err != nil {
		return err
	}
	if o.verbose {
		cfg.logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	var metrics *metricsServer
	if o.metricsAddr != "" {
		if metrics, err = serveMetrics(o.metricsAddr); err != nil {
			return err
		}
		defer metrics.close()
		fmt.Fprintf(e.stderr, "serving metrics at http://%s/metrics\n", metrics.addr)
	}

	// Progress goes where a person is looking: stdout normally; with
	// --json, stdout is for the report, so stderr if it is a terminal.
	var prog *progress
	switch {
	case !o.json:
		prog = newProgress(e.stdout, e.terminal)
	case e.stderrTerminal:
		prog = newProgress(e.stderr, true)
	default:
		prog = newProgress(io.Discard, false)
	}
	cpuOut, err := o.prof.openCPU()
	if err != nil {
		return err
	}
	rep, err := runSimulation(ctx, o, cfg, prog, metrics)
	if err == nil {
		err = writeCPUProfile(cpuOut, rep.cpuProfile)
	}
	if err := errors.Join(err, closeCPU(cpuOut)); err != nil {
		return err
	}
	if o.report != "" {
		if err := writeHTMLReport(o.report, rep); err != nil {
			return err
		}
	}
	if o.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else if err := rep.writeText(e.stdout); err != nil {
		return err
	}
	if !rep.FollowersConsistent {
		err = fmt.Errorf("%d of %d follower logs differ from their leader's (first: %s)", rep.ReplicasDiverged, rep.ReplicasCompared, rep.Diverged[0])
		if rep.DrainTimedOut {
			// Most likely replication had not finished: say so, rather
			// than let it read as data lost.
			err = fmt.Errorf("%w; followers were still catching up when --drain-timeout %v ran out: raise it to let them finish", err, o.drainTimeout)
		}
		if o.interval >= o.drainTimeout {
			// Then the last batches may still be waiting for their object.
			err = fmt.Errorf("%w; --interval %v is not shorter than --drain-timeout %v", err, o.interval, o.drainTimeout)
		}
	}
	if ok := rep.ReadersConsistent; ok != nil && !*ok {
		err = errors.Join(err, rep.Readers.inconsistency())
	}
	err = errors.Join(err, rep.Digests.inconsistency())
	return errors.Join(err, rep.cleanupErr)
}

// runSimulation runs the whole demo: start the cluster, produce for the
// duration (failing an AZ halfway if asked), drain, compare, and report.
// Its goroutine, and those it starts, are labelled demo for the CPU split
// (the engines' relabel themselves).
func runSimulation(ctx context.Context, o *demoOptions, cfg simConfig, prog *progress, metrics *metricsServer) (rep *demoReport, err error) {
	labelled(ctx, roleDemo, func(ctx context.Context) { rep, err = simulate(ctx, o, cfg, prog, metrics) })
	return rep, err
}

// simulate is runSimulation, on a goroutine labelled demo.
func simulate(ctx context.Context, o *demoOptions, cfg simConfig, prog *progress, metrics *metricsServer) (rep *demoReport, err error) {
	var objects objectBackend
	var onS3 *s3Objects
	var onStore storeBackend
	where := o.profile + " latency"
	switch {
	case o.store.kind != "":
		kind, _ := findStoreKind(o.store.kind)
		if onStore, err = kind.open(ctx, o.store.value, cfg.azs); err != nil {
			return nil, err
		}
		objects, where = onStore, onStore.describe()
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			left, cerr := onStore.cleanup(cctx, o.s3.keep)
			closeErr := onStore.close()
			if rep == nil {
				err = errors.Join(err, cerr, closeErr)
				return
			}
			rep.Store.ObjectsLeft, rep.Store.ObjectsKept, rep.cleanupErr = left, o.s3.keep, errors.Join(cerr, closeErr)
			if cerr != nil {
				rep.Store.CleanupError = cerr.Error()
			}
		}()
	case o.s3.endpoint == "":
		mem, err := newMemObjects(cfg.azs, cfg.profile, cfg.seed)
		if err != nil {
			return nil, err
		}
		objects = mem
	default:
		if onS3, err = openS3Objects(ctx, &o.s3, cfg.azs); err != nil {
			return nil, err
		}
		objects, where = onS3, onS3.describe()
		// The objects are on someone's server: remove them after a
		// failure or an interrupt too, with a context of their own.
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			left, cerr := onS3.cleanup(cctx, o.s3.keep)
			onS3.close()
			if rep == nil {
				err = errors.Join(err, cerr)
				return
			}
			rep.S3.ObjectsLeft, rep.S3.ObjectsKept, rep.cleanupErr = left, o.s3.keep, cerr
			if cerr != nil {
				rep.S3.CleanupError = cerr.Error()
			}
		}()
	}
	prices := demoPrices(o, onStore)
	meter, err := metering.New(metering.Config{Prices: prices})
	if err != nil {
		return nil, err
	}
	sample, err := newCompressionSample(cfg.codec)
	if err != nil {
		return nil, err
	}
	defer sample.close()
	breakdown := &breakdownLog{}
	cfg.wrapLog = func(l metadata.Log) metadata.Log {
		breakdown.Log = meter.Log(l)
		return breakdown
	}
	readers := newReaderFleet(o.readers, objects)
	s, err := newSim(cfg, readers.backend(meteredObjects{objects, meter}))
	if err != nil {
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		return nil, errors.Join(err, s.close())
	}
	defer readers.close() // on every return; the readers stop before the metadata log closes
	if err := readers.start(s); err != nil {
		readers.close()
		return nil, errors.Join(err, s.close())
	}
	if metrics != nil {
		if err := metrics.register(meter, s); err != nil {
			return nil, errors.Join(err, s.close())
		}
	}
	prog.header(o, cfg, where)
	p := &producer{
		s: s, gen: newRecordGen(o.seed), pick: rand.New(rand.NewPCG(o.seed, 0x7069636b)), // "pick"
		rate: o.rate * 1e6, batchBytes: int(o.batchBytes), sample: sample,
		leaderLabels: pprof.WithLabels(ctx, pprof.Labels(cpuLabel, roleLeader)), demoLabels: ctx,
	}
	// CPU from here: producing and draining, not setting up the cluster,
	// which at 100,000 partitions costs as much as a short run.
	cpu0, cpuOK := cputime.Process()
	prof := startCPUProfiler()
	defer prof.stop()
	start := time.Now()
	prog.start(s, p, start)
	var tl *timeline
	if o.report != "" {
		tl = startTimeline(s, p, meter, start, o.duration)
		defer tl.stop()
	}

	// The failover runs beside the producer, which keeps producing to the
	// partitions that still have a leader, as clients do.
	type foResult struct {
		fo  *failover
		err error
	}
	var foDone chan foResult
	type corruptResult struct {
		c   *corruption
		err error
	}
	var corruptDone chan corruptResult
	corrupt := func(now time.Time) {
		if !o.corrupt || corruptDone != nil || now.Sub(start) < o.duration/3 {
			return
		}
		f, tp, err := s.corruptTarget()
		switch {
		case err != nil && now.Before(start.Add(o.duration)):
			return // no follower holds records yet: at a later step
		case err != nil:
			corruptDone = make(chan corruptResult, 1)
			corruptDone <- corruptResult{nil, fmt.Errorf("%w by the end of --duration %v: run longer", err, o.duration)}
			return
		}
		corruptDone = make(chan corruptResult, 1)
		// Set on the producer's goroutine, between its batches: none
		// is on its way to f, nor to tp, when f stops.
		s.paused.Store(f.ID)
		s.pausedTP.Store(&tp)
		prog.event(fmt.Sprintf("broker %d's log of %s changes a byte; restarting broker %d from it", f.ID, tp, f.ID))
		if tl != nil {
			tl.mark(now, fmt.Sprintf("broker %d restarts", f.ID))
		}
		go func() {
			c, n, err := s.corruptFollower(ctx, f, tp, o.drainTimeout, start)
			s.paused.Store(0)
			if err == nil {
				err = c.detect(ctx, n, o.drainTimeout)
			}
			s.pausedTP.Store(nil)
			corruptDone <- corruptResult{c, err}
		}()
	}
	trigger := func(now time.Time) {
		corrupt(now)
		if o.failAZ == "" || foDone != nil || now.Sub(start) < o.duration/2 {
			return
		}
		foDone = make(chan foResult, 1)
		how := "its bucket is unreachable"
		if onS3 != nil || onStore != nil {
			how = "every store refuses requests to its bucket (a simulated outage)"
		}
		prog.event(fmt.Sprintf("%s goes down: %s and its brokers crash", o.failAZ, how))
		readers.failAZ(o.failAZ)
		if tl != nil {
			tl.mark(now, o.failAZ+" down")
		}
		go func() {
			fo, done, err := s.failAZ(ctx, o.failAZ, failureDetection, start)
			if err == nil && tl != nil {
				tl.mark(time.Now(), "new leaders")
			}
			if err == nil {
				prog.event(fmt.Sprintf("%d partitions have new leaders at epoch %d after %.0f ms offline; republishing what followers may lack",
					fo.PartitionsMoved, fo.NewEpoch, fo.OfflineMS))
				err = <-done
			}
			foDone <- foResult{fo, err}
		}()
	}
	err = p.produce(ctx, start, start.Add(o.duration), trigger)
	produced := time.Since(start)
	var fo *failover
	if foDone != nil {
		r := <-foDone
		fo, err = r.fo, errors.Join(err, r.err)
	}
	var corrupted *corruption
	if corruptDone != nil {
		r := <-corruptDone
		corrupted, err = r.c, errors.Join(err, r.err)
	}
	prog.stop()
	var drain time.Duration
	var timedOut bool
	if err == nil {
		prog.event("producing stopped; waiting for followers to catch up")
		drain, timedOut, err = waitCaughtUp(ctx, s, o.drainTimeout)
	}
	if tl != nil {
		tl.stop()
	}
	if err == nil {
		err = writeHeapProfile(o.prof.mem)
	}
	var readersDrain time.Duration
	var readersTimedOut bool
	if err == nil && len(readers.readers) > 0 {
		prog.event("waiting for the direct readers to catch up")
		readersDrain, readersTimedOut, err = readers.drain(ctx, o.drainTimeout)
	}
	readers.close()
	if err != nil {
		return nil, errors.Join(err, s.close())
	}
	compared, diffs := s.c.Compare()
	for _, b := range s.brokers {
		_ = b.Stop() // an error it stopped with is s.close()'s
	}
	rep = newDemoReport(o, s, p, meter, produced, drain, fo)
	rep.DrainTimedOut = timedOut
	if tl != nil {
		rep.timeline, rep.marks = tl.result()
	}
	if onS3 != nil {
		rep.S3 = onS3.report()
	}
	if onStore != nil {
		rep.Store, rep.Profile = onStore.report(), ""
	}
	rep.ReplicasCompared, rep.ReplicasDiverged = compared, len(diffs)
	rep.Diverged = diffs[:min(len(diffs), maxDiverged)]
	rep.FollowersConsistent = len(diffs) == 0
	if err := s.close(); err != nil {
		return nil, err
	}
	if err := rep.price(); err != nil {
		return nil, err
	}
	rep.addLedger(meter)
	if rep.Readers, err = readers.report(rep.prices, rep.ProducerCompressionRatio, readersDrain, readersTimedOut); err != nil {
		return nil, err
	}
	rep.ReadersConsistent = rep.Readers.consistent()
	rep.Digests = digestsOf(s, rep.Readers, corrupted)
	rep.Consistent = rep.verdict()
	rep.MetadataBreakdown = breakdown.breakdown()
	prof.stop()
	if cpu1, ok := cputime.Process(); ok && cpuOK {
		rep.CPUSeconds = (cpu1 - cpu0).Seconds()
	}
	rep.PeakRSSBytes = peakRSS()
	if rep.cpuProfile, rep.CPUSplit, err = prof.result(); err != nil {
		rep.CPUSplitNote = "not measured: " + err.Error()
	}
	// The floor after the run, its CPU outside cpu_s.
	if rep.CPUFloor, err = measureFloor(cfg.codec, p.floor, cfg.rf); err != nil {
		return nil, err
	}
	if s := rep.CPUSplit; s != nil && rep.BytesReplicated > 0 {
		f := rep.CPUFloor
		f.EnginesSPerReplicatedGB = s.replicationS() / (float64(rep.BytesReplicated) / 1e9)
		if f.SPerReplicatedGB > 0 {
			f.Ratio = f.EnginesSPerReplicatedGB / f.SPerReplicatedGB
		}
	}
	return rep, nil
}

// maxDiverged is how many differing logs the report describes.
const maxDiverged = 10

// failureDetection is how long the controller takes to notice the brokers
// of a failed AZ are gone; Kafka's default session timeout is far longer.
const failureDetection = 200 * time.Millisecond

// waitCaughtUp waits until every live follower's log ends where its
// leader's does, and returns how long that took, and whether timeout ran
// out first. A follower that cannot catch up within timeout is not an
// error here: the comparison that follows reports it. Producing has
// stopped, so a replica caught up stays so: each poll resumes at the first
// replica still behind, and the whole wait visits each replica about once
// however many partitions there are.
func waitCaughtUp(ctx context.Context, s *sim, timeout time.Duration) (time.Duration, bool, error) {
	start := time.Now()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	reps := s.c.LiveReplicas()
	next := 0
	for {
		if err := s.failed(); err != nil {
			return 0, false, err
		}
		for next < len(reps) {
			n, err := reps[next].Lacks()
			if err != nil {
				return 0, false, err
			}
			if n != 0 {
				break
			}
			next++
		}
		if next == len(reps) || time.Since(start) > timeout {
			return time.Since(start), next < len(reps), nil
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-t.C:
		}
	}
}

// producer appends generated batches to the partitions' leaders at a
// steady rate, as acks=1 clients would: to the leader's local log, then to
// its leader engine.
type producer struct {
	s          *sim
	gen        *recordGen
	pick       *rand.Rand
	rate       float64 // bytes per second
	batchBytes int
	// sample measures what the batches would be compressed by producers.
	sample *compressionSample

	// bytes, batches and records count what leader engines accepted.
	bytes, batches, records atomic.Int64
	// floor holds the first floorSampleBytes of the batches produced, the
	// local logs' immutable copies, for the CPU floor.
	floor      [][]byte
	floorBytes int
	// leaderLabels and demoLabels are the pprof labels of the producer's
	// goroutine inside a leader's Node.Append and outside it.
	leaderLabels, demoLabels context.Context
}

// produce runs until deadline or ctx ends, calling tick at every step and
// once at the deadline. It
// is a token bucket: credit accrues at rate and bursts up to 100 ms of it,
// so a stall is not followed by a flood.
func (p *producer) produce(ctx context.Context, start, deadline time.Time, tick func(time.Time)) error {
	const step = 5 * time.Millisecond
	t := time.NewTicker(step)
	defer t.Stop()
	credit, last := 0.0, start
	for {
		now := time.Now()
		if !now.Before(deadline) {
			// A last tick, so that what is due by the end (the failure
			// halfway through a run shorter than a step) still happens.
			tick(now)
			return nil
		}
		if err := p.s.failed(); err != nil {
			return err
		}
		credit = min(credit+p.rate*now.Sub(last).Seconds(), p.rate/10)
		last = now
		for tries := 0; credit > 0 && tries < 2*len(p.s.tps); tries++ {
			n, err := p.one(ctx, now)
			if err != nil {
				return err
			}
			credit -= float64(n)
		}
		tick(now)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// one produces one batch to a random partition and returns its size, or 0
// when the partition has no leader at the moment.
func (p *producer) one(ctx context.Context, now time.Time) (int, error) {
	tp := p.s.tps[p.pick.IntN(len(p.s.tps))]
	b, epoch := p.s.leaderFor(tp)
	if b == nil || b.ID == p.s.paused.Load() {
		return 0, nil
	}
	if paused := p.s.pausedTP.Load(); paused != nil && *paused == tp {
		return 0, nil
	}
	end, err := b.Local.EndOffset(tp)
	if err != nil {
		return 0, err
	}
	size := p.batchBytes/2 + p.pick.IntN(p.batchBytes+1)
	// The Node uploads the log's copy of the batch, which the log never
	// modifies, so the generator can reuse its buffer at once.
	batch, err := p.s.local(b).AppendOne(ctx, tp, p.gen.next(epoch, end, now, size))
	if err != nil {
		return 0, fmt.Errorf("broker %d appending to %s: %w", b.ID, tp, err)
	}
	if p.leaderLabels != nil { // a producer made without them labels nothing
		pprof.SetGoroutineLabels(p.leaderLabels)
	}
	err = b.CurrentNode().Append(ctx, tp, batch)
	if p.demoLabels != nil {
		pprof.SetGoroutineLabels(p.demoLabels)
	}
	if err != nil {
		if errors.Is(err, walstore.ErrStopped) || errors.Is(err, walstore.ErrNotLeader) {
			// The leader crashed between leaderFor and here: the batch
			// is in its log only, acks=1 data that dies with it.
			return len(batch.Data), nil
		}
		return 0, fmt.Errorf("broker %d producing to %s: %w", b.ID, tp, err)
	}
	p.sample.add(batch.Data)
	if p.floorBytes < floorSampleBytes {
		p.floor = append(p.floor, batch.Data)
		p.floorBytes += len(batch.Data)
	}
	p.bytes.Add(int64(len(batch.Data)))
	p.batches.Add(1)
	p.records.Add(batch.LastOffset - batch.FirstOffset + 1)
	return len(batch.Data), nil
}
