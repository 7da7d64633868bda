// Command s3express runs activetier on Amazon S3 Express One Zone: a leader
// and two followers, each a broker in its own availability zone with its
// own s3express.Store, replicate a few partitions through three directory
// buckets, one per AZ. The program checks that both followers end with
// exactly the leader's log, lets garbage collection delete the objects,
// and prints the requests made and what they cost next to
// broker-to-broker replication of the same bytes.
//
// The three brokers share one process to keep the example small. In a
// deployment each is a broker process in its own AZ, and the metadata log
// they share is a Kafka topic (package metadata/kafkalog), not memory.
//
// Usage:
//
//	go run ./examples/s3express \
//	    -buckets use1-az4=wal--use1-az4--x-s3,use1-az5=wal--use1-az5--x-s3,use1-az6=wal--use1-az6--x-s3
//
// The first AZ listed is the leader's. -buckets defaults to
// $ACTIVETIER_BUCKETS. Credentials and region come from where the AWS SDK
// always finds them (environment, shared config files, instance role);
// -region overrides the region. docs/s3express.md lists the IAM
// permissions, how to create the buckets and what a run costs.
//
// With -endpoint URL the program runs against an S3-compatible server
// (versitygw, MinIO) instead of AWS, with s3express's compatibility option.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/s3express"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// options is the run's configuration, from flags.
type options struct {
	azs        []string          // AZ ids, the leader's first
	buckets    map[string]string // AZ id -> bucket
	region     string
	endpoint   string
	prefix     string
	partitions int
	rounds     int
	batchBytes int
	every      time.Duration
	interval   time.Duration
	keep       bool
	timeout    time.Duration
}

func main() {
	o, err := parseFlags(flag.CommandLine, os.Args[1:], os.Getenv("ACTIVETIER_BUCKETS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3express:", err)
		os.Exit(2)
	}
	if _, err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "s3express:", err)
		os.Exit(1)
	}
}

func parseFlags(fs *flag.FlagSet, args []string, envBuckets string) (options, error) {
	var o options
	buckets := fs.String("buckets", envBuckets, "the three AZs and their buckets, `az=bucket,az=bucket,az=bucket`, the leader's first (default $ACTIVETIER_BUCKETS)")
	fs.StringVar(&o.region, "region", "", "AWS region (default: from AWS_REGION or the profile)")
	fs.StringVar(&o.endpoint, "endpoint", "", "`URL` of an S3-compatible server to use instead of AWS")
	fs.StringVar(&o.prefix, "prefix", "activetier-example/", "key prefix of the objects written")
	fs.IntVar(&o.partitions, "partitions", 8, "partitions the leader leads")
	fs.IntVar(&o.rounds, "rounds", 50, "batches produced to each partition")
	fs.IntVar(&o.batchBytes, "batch-bytes", 16<<10, "bytes per batch")
	fs.DurationVar(&o.every, "every", 10*time.Millisecond, "pause between rounds of batches")
	fs.DurationVar(&o.interval, "interval", 50*time.Millisecond, "longest a batch waits before its object is uploaded")
	fs.BoolVar(&o.keep, "keep", false, "keep the objects instead of letting garbage collection delete them")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.azs, o.buckets, err = parseBuckets(*buckets); err != nil {
		return o, fmt.Errorf("-buckets: %w", err)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"partitions", int64(o.partitions)}, {"rounds", int64(o.rounds)}, {"batch-bytes", int64(o.batchBytes)},
		{"interval", int64(o.interval)}, {"timeout", int64(o.timeout)}} {
		if f.v <= 0 {
			return o, fmt.Errorf("-%s must be positive", f.name)
		}
	}
	if o.every < 0 {
		return o, errors.New("-every must not be negative")
	}
	return o, nil
}

// parseBuckets reads "az=bucket,az=bucket,az=bucket".
func parseBuckets(s string) ([]string, map[string]string, error) {
	if s == "" {
		return nil, nil, errors.New("missing; name three AZ ids and their buckets, the leader's first, as in use1-az4=wal--use1-az4--x-s3")
	}
	var azs []string
	buckets := make(map[string]string)
	for pair := range strings.SplitSeq(s, ",") {
		az, bucket, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || az == "" || bucket == "" {
			return nil, nil, fmt.Errorf("%q is not az=bucket", pair)
		}
		if _, dup := buckets[az]; dup {
			return nil, nil, fmt.Errorf("AZ %q is listed twice", az)
		}
		azs = append(azs, az)
		buckets[az] = bucket
	}
	if len(azs) != 3 {
		return nil, nil, fmt.Errorf("%d AZs listed; the example runs a leader and two followers, one per AZ, so it needs three", len(azs))
	}
	return azs, buckets, nil
}

// broker is one of the three brokers: its AZ, its store and its log.
type broker struct {
	id    int32
	az    string
	store *s3express.Store
	log   *memstore.LocalLog
}

// result is what a run did, for the test.
type result struct {
	produced        int64 // bytes
	objects         uint64
	objectsDeleted  uint64
	requests        map[string]opCount
	cost            costmodel.Comparison
	followerBatches map[int32]int
}

func run(ctx context.Context, o options, w io.Writer) (*result, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	// The SDK finds credentials by itself; the program never reads them.
	var loadOpts []func(*config.LoadOptions) error
	if o.region != "" {
		loadOpts = append(loadOpts, config.WithRegion(o.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("no AWS region: set -region, AWS_REGION or a region in the profile")
	}
	if o.endpoint != "" {
		cfg.BaseEndpoint = aws.String(o.endpoint)
	}

	// Three brokers, one per AZ, each with its own store (and so its own
	// S3 client and connections), all metered.
	m := newMeter()
	brokers := make([]*broker, len(o.azs))
	for i, az := range o.azs {
		store, err := s3express.New(cfg, s3express.Options{
			Buckets: o.buckets, LocalAZ: az, KeyPrefix: o.prefix,
			S3Compatible:  o.endpoint != "",
			ClientOptions: []func(*s3.Options){m.clientOption},
		})
		if err != nil {
			return nil, err
		}
		defer store.CloseIdleConnections()
		brokers[i] = &broker{id: int32(i + 1), az: az, store: store, log: memstore.NewLocalLog()}
	}
	leaderBroker, followerBrokers := brokers[0], brokers[1:]
	if err := checkBuckets(ctx, leaderBroker.store, o); err != nil {
		return nil, err
	}

	// The metadata log: memstore's here, a Kafka topic in a deployment.
	meta, err := memstore.NewLog(4, memstore.WithMaxPollWait(50*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer meta.Close()

	engines := newEngines(ctx)
	defer engines.stop()
	followerIDs := make([]int32, len(followerBrokers))
	for i, b := range followerBrokers {
		followerIDs[i] = b.id
	}
	// One Node per broker. A broker delivers its followers' progress to
	// the leader's Node (Kafka's fetch requests carry it); garbage
	// collection waits for it.
	var leader *walstore.Node
	onProgress := func(p walstore.Progress) { leader.RecordProgress(p) }
	leader, err = walstore.NewNode(walstore.NodeConfig{
		BrokerID: leaderBroker.id, Store: leaderBroker.store, Log: meta, Local: leaderBroker.log,
		Interval: o.interval,
	})
	if err != nil {
		return nil, err
	}
	engines.start("leader", leader.Run)
	followers := make([]*walstore.Node, len(followerBrokers))
	for i, b := range followerBrokers {
		followers[i], err = walstore.NewNode(walstore.NodeConfig{
			BrokerID: b.id, Store: b.store, Log: meta, Local: b.log, OnProgress: onProgress,
		})
		if err != nil {
			return nil, err
		}
		engines.start(fmt.Sprintf("follower %d", b.id), followers[i].Run)
	}

	fmt.Fprintf(w, "leader    broker %d in %s writes to %s\n", leaderBroker.id, leaderBroker.az, o.buckets[leaderBroker.az])
	for _, b := range followerBrokers {
		fmt.Fprintf(w, "follower  broker %d in %s reads its partitions' byte ranges from the leader's bucket\n", b.id, b.az)
	}

	// The controller makes broker 1 leader of every partition at epoch 1
	// and the others its followers; broker 1 produces rounds of batches.
	tps := make([]metadata.TopicPartition, o.partitions)
	for i := range tps {
		tps[i] = metadata.TopicPartition{Topic: "orders", Partition: int32(i)}
		if err := leaderBroker.log.AssignEpoch(tps[i], 1, 0); err != nil {
			return nil, err
		}
		if err := leader.BecomeLeader(ctx, tps[i], 1, followerIDs, -1); err != nil {
			return nil, err
		}
		for j := range followerBrokers {
			if err := followers[j].BecomeFollower(ctx, tps[i], 1, leaderBroker.id); err != nil {
				return nil, err
			}
		}
	}
	const recordsPerBatch = 10
	res := &result{followerBatches: make(map[int32]int)}
	start := time.Now()
	for r := range o.rounds {
		for _, tp := range tps {
			b := makeBatch(tp, int64(r)*recordsPerBatch, recordsPerBatch, o.batchBytes)
			if err := leaderBroker.log.Append(ctx, tp, []storage.Batch{b}); err != nil {
				return nil, err
			}
			if err := leader.Append(ctx, tp, b); err != nil {
				return nil, err
			}
			res.produced += int64(len(b.Data))
		}
		if err := sleep(ctx, o.every); err != nil {
			return nil, err
		}
	}
	end := int64(o.rounds) * recordsPerBatch
	producedIn := time.Since(start)
	fmt.Fprintf(w, "produced  %s in %d batches to %d partitions in %v\n",
		mb(res.produced), o.rounds*o.partitions, o.partitions, producedIn.Round(time.Millisecond))

	// acks on upload: the leader's data is stored in its AZ's bucket and
	// announced in the metadata log.
	for _, tp := range tps {
		if err := leader.WaitDurable(ctx, tp, 1, end-1); err != nil {
			return nil, fmt.Errorf("waiting for %s to be durable: %w", tp, err)
		}
	}
	ls := leader.Stats().Leader
	fmt.Fprintf(w, "durable   after %v: %d objects (%s) uploaded, upload p50 %v, p99 %v\n",
		time.Since(start).Round(time.Millisecond), ls.Objects, mb(int64(ls.ObjectBytes)),
		ms(ls.UploadLatency.Quantile(0.5)), ms(ls.UploadLatency.Quantile(0.99)))

	// Each follower catches up and holds exactly the leader's log.
	for i, b := range followerBrokers {
		err := engines.waitFor(ctx, func() bool {
			for _, tp := range tps {
				if leo, _ := b.log.EndOffset(tp); leo < end {
					return false
				}
			}
			return true
		})
		if err != nil {
			return nil, fmt.Errorf("waiting for broker %d to catch up: %w", b.id, err)
		}
		for _, tp := range tps {
			if err := sameLog(leaderBroker.log.Batches(tp), b.log.Batches(tp)); err != nil {
				return nil, fmt.Errorf("broker %d's log of %s differs from the leader's: %w", b.id, tp, err)
			}
			res.followerBatches[b.id] += len(b.log.Batches(tp))
		}
		fs := followers[i].Stats().Follower
		fmt.Fprintf(w, "replicated to broker %d after %v: identical logs; lag p50 %v, p99 %v; %d entries applied\n",
			b.id, time.Since(start).Round(time.Millisecond), ms(fs.ApplyLag.Quantile(0.5)), ms(fs.ApplyLag.Quantile(0.99)), fs.Applied)
	}

	// Once followers have applied an object and the broker has tiered its
	// data (here: at once), garbage collection deletes it.
	if !o.keep {
		for _, tp := range tps {
			leader.ReportTiered(tp, end)
		}
		err := engines.waitFor(ctx, func() bool {
			_, _ = leader.CollectGarbage(ctx)
			s := leader.Stats().Leader
			return s.ObjectsDeleted >= s.Objects
		})
		if err != nil {
			return nil, fmt.Errorf("waiting for garbage collection: %w", err)
		}
		fmt.Fprintf(w, "deleted   %d objects once both followers had applied them\n", leader.Stats().Leader.ObjectsDeleted)
	}
	if err := engines.stop(); err != nil {
		return nil, err
	}
	ls = leader.Stats().Leader
	res.objects, res.objectsDeleted = ls.Objects, ls.ObjectsDeleted

	// What the requests cost, next to broker-to-broker replication.
	res.requests = m.snapshot()
	var applied uint64
	for _, f := range followers {
		applied += f.Stats().Follower.Applied
	}
	ml := meta.Stats().Total
	usage := costmodel.Usage{
		Puts: res.requests["PutObject"].Attempts, Gets: res.requests["GetObject"].Attempts,
		BytesUp: res.requests["PutObject"].BytesUp, BytesDown: res.requests["GetObject"].BytesDown,
		// Each published byte crosses AZs to the Kafka partition leader and
		// its other replicas, and once more for each read.
		MetadataBytes: ml.AppendedBytes*costmodel.DefaultMetadataRF + ml.BytesRead,
		ControlBytes:  int64(applied) * costmodel.DefaultControlBytesPerPartition,
		ProducedBytes: res.produced,
		RF:            len(brokers),
	}
	prices := costmodel.S3Express2025()
	if !allDirectoryBuckets(o.buckets) {
		prices = costmodel.S3Standard2025()
	}
	if res.cost, err = costmodel.RunCost(prices, usage); err != nil {
		return nil, err
	}
	writeReport(w, res, prices)
	return res, nil
}

// checkBuckets fails fast, with a message naming the bucket, when a bucket
// is missing or out of reach: the engines would retry such failures until
// an operator acts, the leader reporting itself degraded meanwhile.
func checkBuckets(ctx context.Context, store *s3express.Store, o options) error {
	for _, az := range o.azs {
		_, err := store.Client().HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(o.buckets[az])})
		if err != nil {
			return fmt.Errorf("bucket %s of AZ %s: %w (create it first; see docs/s3express.md)", o.buckets[az], az, err)
		}
	}
	return nil
}

// makeBatch returns a batch of n records of tp from offset first, about
// size bytes of text standing for a Kafka record batch.
func makeBatch(tp metadata.TopicPartition, first int64, n, size int) storage.Batch {
	var buf bytes.Buffer
	for i := range int64(n) {
		line := fmt.Sprintf("%s offset=%d order=%08d ", tp, first+i, (first+i)*7919%100_000_000)
		buf.WriteString(line)
		buf.WriteString(strings.Repeat("x", max(0, size/n-len(line)-1)))
		buf.WriteByte('\n')
	}
	return storage.Batch{Epoch: 1, FirstOffset: first, LastOffset: first + int64(n) - 1,
		MaxTimestamp: time.Now().UnixMilli(), Data: buf.Bytes()}
}

// sameLog reports where two logs first differ.
func sameLog(want, got []storage.Batch) error {
	for i := range min(len(want), len(got)) {
		w, g := want[i], got[i]
		if w.Epoch != g.Epoch || w.FirstOffset != g.FirstOffset || w.LastOffset != g.LastOffset || !bytes.Equal(w.Data, g.Data) {
			return fmt.Errorf("batch %d: want epoch %d [%d, %d], got epoch %d [%d, %d] (or different bytes)",
				i, w.Epoch, w.FirstOffset, w.LastOffset, g.Epoch, g.FirstOffset, g.LastOffset)
		}
	}
	if len(want) != len(got) {
		return fmt.Errorf("%d batches, want %d", len(got), len(want))
	}
	return nil
}

func allDirectoryBuckets(buckets map[string]string) bool {
	for _, b := range buckets {
		if !strings.HasSuffix(b, "--x-s3") {
			return false
		}
	}
	return true
}

func writeReport(w io.Writer, res *result, prices costmodel.Prices) {
	fmt.Fprintf(w, "\n%-16s %9s %9s %10s %11s\n", "S3 request", "requests", "attempts", "bytes up", "bytes down")
	for _, op := range slices.Sorted(maps.Keys(res.requests)) {
		c := res.requests[op]
		fmt.Fprintf(w, "%-16s %9d %9d %10s %11s\n", op, c.Requests, c.Attempts, mb(c.BytesUp), mb(c.BytesDown))
	}

	at, bb := res.cost.ActiveTier, res.cost.BrokerToBroker
	perGB := 1e9 / float64(res.produced)
	fmt.Fprintf(w, "\n%-36s %12s %16s\n", "cost at "+prices.Name+" prices", "this run", "per GB produced")
	for _, l := range []struct {
		name string
		usd  float64
	}{
		{"PUT requests", at.PutUSD}, {"GET requests", at.GetUSD},
		{"upload (per GB)", at.UploadUSD}, {"retrieval (per GB)", at.RetrievalUSD},
		{"metadata log across AZs", at.MetadataUSD}, {"follower fetches to the leader", at.ControlUSD},
		{"activetier total", at.TotalUSD},
		{"broker-to-broker replication, RF=3", bb.TotalUSD},
	} {
		fmt.Fprintf(w, "%-36s %12s %16s\n", l.name, fmt.Sprintf("$%.7f", l.usd), fmt.Sprintf("$%.4f", l.usd*perGB))
	}
	fmt.Fprintf(w, "activetier saves %.0f%% of what cross-AZ replication of these bytes costs\n", 100*res.cost.SavingsRatio)
}

func mb(n int64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f MB", float64(n)/1e6)
}

func ms(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// engines runs the walstore engines' Run methods and owns their
// goroutines: stop cancels them and waits.
type engines struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	failed chan error
	once   sync.Once
	err    error
}

func newEngines(ctx context.Context) *engines {
	ctx, cancel := context.WithCancel(ctx)
	return &engines{ctx: ctx, cancel: cancel, failed: make(chan error, 8)}
}

func (e *engines) start(name string, run func(context.Context) error) {
	e.wg.Go(func() {
		if err := run(e.ctx); err != nil {
			e.failed <- fmt.Errorf("%s stopped: %w", name, err)
		}
	})
}

// waitFor polls cond until it holds, ctx ends or an engine fails.
func (e *engines) waitFor(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-e.failed:
			return err
		case <-tick.C:
		}
	}
	return nil
}

// stop stops the engines, once, and returns the first failure, if any.
func (e *engines) stop() error {
	e.once.Do(func() {
		e.cancel()
		e.wg.Wait()
		select {
		case e.err = <-e.failed:
		default:
		}
	})
	return e.err
}
