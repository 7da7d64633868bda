package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/internal/cluster"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

// simConfig describes the simulated cluster.
type simConfig struct {
	// partitions are divided among topics by topicPartitions.
	brokers, topics, partitions, rf int
	// azs names the AZs, in the order brokers are spread over them.
	azs         []string
	interval    time.Duration
	objectBytes int
	codec       metadata.Codec
	// profile is memstore's latency model; with an S3 endpoint the latency
	// is the server's.
	profile memstore.Profile
	seed    uint64
	logger  *slog.Logger
	// wrapLog, if set, wraps the metadata log the brokers use (a
	// metering.Meter's Log, so every message is metered).
	wrapLog func(metadata.Log) metadata.Log
	// flippable gives every broker a flippingLog, for --corrupt-follower.
	flippable bool
}

// sim is the demo's cluster: a cluster.Cluster of brokers in one process,
// each with a local log (memstore.LocalLog), a store of its own on the
// object backend and a walstore Node leading some partitions and following
// the others, and the controller cluster.Cluster plays, which owns the
// replica assignment and decides leadership and epochs, as Kafka's
// controller does. The sim adds the demo's placement, tuning and AZ
// failure.
type sim struct {
	cfg     simConfig
	objects objectBackend
	// meta is the metadata log, counting its own traffic; c.Meta is what
	// the brokers use: meta, wrapped by cfg.wrapLog.
	meta *memstore.Log
	c    *cluster.Cluster
	// brokers and tps are c's, in c's order, held here for the producer's
	// and the samplers' loops, which index them without c's lock.
	brokers []*cluster.Broker
	tps     []metadata.TopicPartition
	// locals are the brokers' local logs, in the same order: the producer
	// appends to them with memstore's AppendOne.
	locals []*memstore.LocalLog
	// flips are the brokers' flippingLogs, in the same order, with
	// cfg.flippable; nil otherwise.
	flips []*flippingLog
	// retired are the stats of Nodes a restart replaced, which the
	// report and the progress add to the running ones'. retiredMu holds
	// them and, across a restart, the Node it replaces, so that no sum
	// counts a Node twice or not at all.
	retiredMu sync.Mutex
	retired   []walstore.NodeStats
	// mismatches are the digest mismatches followers reported.
	mismatches mismatchLog
	// paused is the broker whose partitions the producer leaves alone
	// while --corrupt-follower restarts it, 0 for none; pausedTP the
	// partition whose changed batch it is to read back, left alone
	// until it has: a restart that overlaps the fetch of a new entry of
	// the partition reads nothing back.
	paused   atomic.Int32
	pausedTP atomic.Pointer[metadata.TopicPartition]
}

// azNames are the demo's AZs unless --buckets names them: az1, az2, ...
func azNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("az%d", i+1)
	}
	return names
}

// newSim builds the cluster on objects: metadata log, brokers, and a
// rack-aware assignment in which every partition's replicas are in distinct
// AZs and leadership is spread evenly.
func newSim(cfg simConfig, objects objectBackend) (*sim, error) {
	tps, err := topicPartitions(cfg.topics, cfg.partitions)
	if err != nil {
		return nil, err
	}
	meta, err := memstore.NewLog(int32(cfg.brokers))
	if err != nil {
		return nil, err
	}
	var log metadata.Log = meta
	if cfg.wrapLog != nil {
		log = cfg.wrapLog(meta)
	}
	s := &sim{cfg: cfg, objects: objects, meta: meta, c: cluster.New(log), tps: tps}
	for i := range cfg.brokers {
		az := cfg.azs[i%len(cfg.azs)]
		store, err := objects.store(az)
		if err != nil {
			meta.Close()
			return nil, err
		}
		local := memstore.NewLocalLog()
		var l cluster.LocalLog = local
		if cfg.flippable {
			f := &flippingLog{LocalLog: local}
			s.flips, l = append(s.flips, f), f
		}
		s.brokers = append(s.brokers, s.c.AddBroker(int32(i+1), az, store, l))
		s.locals = append(s.locals, local)
	}
	for p, tp := range tps {
		leader := s.brokers[p%cfg.brokers]
		replicas := []int32{leader.ID}
		used := map[string]bool{leader.AZ: true}
		for k := 1; k < cfg.brokers && len(replicas) < cfg.rf; k++ {
			b := s.brokers[(p+k)%cfg.brokers]
			if !used[b.AZ] {
				used[b.AZ] = true
				replicas = append(replicas, b.ID)
			}
		}
		if len(replicas) < cfg.rf {
			meta.Close()
			return nil, fmt.Errorf("cannot place %s: %d replicas in distinct AZs wanted, %d found", tp, cfg.rf, len(replicas))
		}
		s.c.SetReplicas(tp, replicas...)
		s.c.SetLeader(tp, leader.ID, 0)
	}
	return s, nil
}

// topicPartitions divides partitions among topics named topic1, topic2,
// ...: one each, and the rest in proportion to topics, topics-1, ..., 1
// (largest remainders rounded up, earlier topics first). A cluster's
// topics differ in traffic, and the producer spreads it evenly over
// partitions, so the first topic is the busiest and the report's ranking
// of topics by cost has something to rank.
func topicPartitions(topics, partitions int) ([]metadata.TopicPartition, error) {
	if topics < 1 || topics > partitions {
		return nil, fmt.Errorf("%d topics cannot share %d partitions: each needs one", topics, partitions)
	}
	// Topic k weighs topics-k; the weights sum to w. The products fit in
	// an int: the demo's limits keep both counts at most 100,000.
	rest, w := partitions-topics, topics*(topics+1)/2
	counts, rems := make([]int, topics), make([]int, topics)
	left := rest
	for k := range counts {
		counts[k], rems[k] = 1+rest*(topics-k)/w, rest*(topics-k)%w
		left -= counts[k] - 1
	}
	order := make([]int, topics)
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rems[b], rems[a]) })
	for _, k := range order[:left] {
		counts[k]++
	}
	tps := make([]metadata.TopicPartition, 0, partitions)
	for k, n := range counts {
		for p := range n {
			tps = append(tps, metadata.TopicPartition{Topic: fmt.Sprintf("topic%d", k+1), Partition: int32(p)})
		}
	}
	return tps, nil
}

// start runs every broker's Node and makes each partition's leader
// publish its first epoch, as brokers do when a topic is created.
func (s *sim) start(ctx context.Context) error {
	for _, b := range s.brokers {
		if _, err := b.Start(s.nodeConfig(b)); err != nil {
			return err
		}
	}
	for _, tp := range s.tps {
		if err := s.c.StartPartition(ctx, tp); err != nil {
			return err
		}
	}
	return nil
}

// nodeConfig is b's Node's tuning, and where its digest mismatches go.
func (s *sim) nodeConfig(b *cluster.Broker) walstore.NodeConfig {
	replica := fmt.Sprintf("broker %d", b.ID)
	return walstore.NodeConfig{
		Codec: s.cfg.codec, Interval: s.cfg.interval, ObjectBytes: s.cfg.objectBytes,
		Backoff: walstore.Backoff{Initial: 5 * time.Millisecond, Max: 500 * time.Millisecond},
		Seed:    s.cfg.seed + uint64(b.ID), Logger: s.cfg.logger.With("broker", b.ID),
		OnDigestMismatch: func(m *digest.Mismatch) {
			s.cfg.logger.Warn("activetier demo: digest mismatch", "broker", b.ID, "err", m)
			s.mismatches.add(newDigestMismatch(replica, m))
		},
	}
}

// nodeStats are every Node's stats: the running ones' and those a
// restart replaced.
func (s *sim) nodeStats() []walstore.NodeStats {
	s.retiredMu.Lock()
	defer s.retiredMu.Unlock()
	out := append([]walstore.NodeStats(nil), s.retired...)
	for _, b := range s.brokers {
		out = append(out, b.CurrentNode().Stats())
	}
	return out
}

// close stops every broker still running and the metadata log, and returns
// the errors engines stopped with.
func (s *sim) close() error { return s.c.Close() }

// failed returns an error an engine stopped with by itself, if any: an
// engine returns early only when it cannot go on (its local log failed).
func (s *sim) failed() error { return s.c.Failed() }

// leaderFor returns tp's leader for producing, or nil while tp is offline.
func (s *sim) leaderFor(tp metadata.TopicPartition) (*cluster.Broker, int32) { return s.c.Leader(tp) }

// local returns b's local log.
func (s *sim) local(b *cluster.Broker) *memstore.LocalLog { return s.locals[b.ID-1] }

// lastLeader returns tp's leader, or while tp is offline the one that
// crashed.
func (s *sim) lastLeader(tp metadata.TopicPartition) *cluster.Broker {
	l, _ := s.c.Leadership(tp)
	return s.c.Broker(l.Broker)
}

// failover is what taking an AZ down did.
type failover struct {
	AZ string `json:"az"`
	// AtS is when the AZ went down, in seconds since production started.
	AtS            float64 `json:"at_s"`
	CrashedBrokers []int32 `json:"crashed_brokers"`
	// PartitionsMoved is how many partitions got a new leader, at epoch
	// NewEpoch.
	PartitionsMoved int   `json:"partitions_moved"`
	NewEpoch        int32 `json:"new_epoch"`
	// OfflineMS is how long the moved partitions could not be produced to:
	// failure detection plus electing and announcing new leaders.
	OfflineMS float64 `json:"offline_ms"`
	// RepublishMS is how long the new leaders took to republish what
	// surviving followers might lack, from the AZ going down.
	RepublishMS float64 `json:"republish_ms"`
	// RepublishedEntries counts the entries the new leaders published again.
	RepublishedEntries uint64 `json:"republished_entries"`
	// RecordsLost counts records the crashed leaders had taken (acks=1)
	// beyond where their successors' logs end: still buffered for upload,
	// or uploaded to the failed bucket but not yet applied by any follower.
	RecordsLost int64 `json:"records_lost"`
}

// republishJob is one new leader's duty after a failover: copy its log of
// tp from offset from into its own AZ's bucket.
type republishJob struct {
	leader    *cluster.Broker
	tp        metadata.TopicPartition
	epoch     int32
	from, end int64
}

// wait waits until j's leadership is durable up to its end: its
// republish, which BecomeLeader started, is done.
func (j republishJob) wait(ctx context.Context) error {
	if j.end <= 0 {
		return nil
	}
	return j.leader.CurrentNode().WaitDurable(ctx, j.tp, j.epoch, j.end-1)
}

// failAZ takes az's bucket down and crashes its brokers, waits detect (the
// controller's failure detection), and moves each partition they led to the
// surviving replica with the longest log, at the next epoch. It returns
// once every moved partition has a leader again; the new leaders then
// republish in the background, and done receives the outcome when they
// finish.
func (s *sim) failAZ(ctx context.Context, az string, detect time.Duration, started time.Time) (fo *failover, done <-chan error, err error) {
	t0 := time.Now()
	fo = &failover{AZ: az, AtS: t0.Sub(started).Seconds()}
	if err := s.objects.setOutage(az); err != nil {
		return nil, nil, err
	}
	crashed, moved := s.c.Crash(az)
	for _, b := range crashed {
		fo.CrashedBrokers = append(fo.CrashedBrokers, b.ID)
	}
	select {
	case <-time.After(detect):
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}

	var jobs []republishJob
	for _, tp := range moved {
		e, err := s.c.Elect(ctx, tp)
		if err != nil {
			return nil, nil, err
		}
		s.cfg.logger.Info("activetier demo: new leader elected", "partition", tp.String(), "broker", e.Leader.ID, "epoch", e.Epoch,
			"start_offset", e.Start, "republish_from", e.RepublishFrom, "old_leader", e.OldLeader.ID, "old_leader_end", e.OldEnd)
		fo.NewEpoch = max(fo.NewEpoch, e.Epoch)
		fo.RecordsLost += e.Lost()
		if e.RepublishFrom >= 0 {
			jobs = append(jobs, republishJob{leader: e.Leader, tp: tp, epoch: e.Epoch, from: e.RepublishFrom, end: e.Start})
		}
	}
	if err := s.c.ShrinkInSync(); err != nil {
		return nil, nil, err
	}
	fo.PartitionsMoved = len(moved)
	fo.OfflineMS = ms(time.Since(t0))

	// Each new leader republishes its partitions one after another; the
	// leaders work in parallel.
	byLeader := make(map[*cluster.Broker][]republishJob)
	for _, j := range jobs {
		byLeader[j.leader] = append(byLeader[j.leader], j)
	}
	ch := make(chan error, 1)
	go func() {
		var wg sync.WaitGroup
		errs := make(chan error, len(byLeader))
		for _, js := range byLeader {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, j := range js {
					if err := j.wait(ctx); err != nil {
						errs <- fmt.Errorf("broker %d republishing %s from %d: %w", j.leader.ID, j.tp, j.from, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		fo.RepublishMS = ms(time.Since(t0))
		ch <- <-errs // nil when errs is empty
	}()
	return fo, ch, nil
}
