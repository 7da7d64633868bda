package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/activetier/activetier/election"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
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
}

// sim is a cluster of brokers in one process: each broker has a local log
// (memstore.LocalLog), a store of its own on the object backend, and runs a
// walstore Leader for the partitions it leads and a walstore Follower for
// the others. The sim also plays the controller: it owns the replica
// assignment and decides leadership and epochs, as Kafka's controller does.
type sim struct {
	cfg     simConfig
	objects objectBackend
	// meta is the metadata log, counting its own traffic; log is what the
	// brokers use: meta, wrapped by cfg.wrapLog.
	meta    *memstore.Log
	log     metadata.Log
	brokers []*simBroker
	tps     []metadata.TopicPartition

	mu sync.Mutex
	// replicas is the fixed assignment; leaders the controller's current
	// choice; offline the partitions without a leader (during failover).
	replicas map[metadata.TopicPartition][]*simBroker
	leaders  map[metadata.TopicPartition]leadership
	offline  map[metadata.TopicPartition]bool

	// errs receives the error of any engine that stopped by itself.
	errs chan error
}

type leadership struct {
	broker *simBroker
	epoch  int32
}

// simBroker is one broker of the sim.
type simBroker struct {
	s     *sim
	id    int32
	az    string
	store storage.ObjectStore
	local *memstore.LocalLog
	node  *walstore.Node

	stop     context.CancelFunc
	done     chan struct{}
	haltOnce sync.Once
	crashed  bool // under s.mu
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
	s := &sim{
		cfg: cfg, objects: objects, meta: meta, log: meta,
		replicas: make(map[metadata.TopicPartition][]*simBroker),
		leaders:  make(map[metadata.TopicPartition]leadership),
		offline:  make(map[metadata.TopicPartition]bool),
		errs:     make(chan error, 2*cfg.brokers),
	}
	if cfg.wrapLog != nil {
		s.log = cfg.wrapLog(meta)
	}
	for i := range cfg.brokers {
		az := cfg.azs[i%len(cfg.azs)]
		store, err := objects.store(az)
		if err != nil {
			meta.Close()
			return nil, err
		}
		s.brokers = append(s.brokers, &simBroker{s: s, id: int32(i + 1), az: az, store: store, local: memstore.NewLocalLog()})
	}
	s.tps = tps
	for p, tp := range tps {
		leader := s.brokers[p%cfg.brokers]
		replicas := []*simBroker{leader}
		used := map[string]bool{leader.az: true}
		for k := 1; k < cfg.brokers && len(replicas) < cfg.rf; k++ {
			b := s.brokers[(p+k)%cfg.brokers]
			if !used[b.az] {
				used[b.az] = true
				replicas = append(replicas, b)
			}
		}
		if len(replicas) < cfg.rf {
			meta.Close()
			return nil, fmt.Errorf("cannot place %s: %d replicas in distinct AZs wanted, %d found", tp, cfg.rf, len(replicas))
		}
		s.replicas[tp] = replicas
		s.leaders[tp] = leadership{broker: leader, epoch: 0}
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

// start runs every broker's engines and makes each partition's leader
// publish its first epoch, as brokers do when a topic is created.
func (s *sim) start(ctx context.Context) error {
	for _, b := range s.brokers {
		if err := b.start(); err != nil {
			return err
		}
	}
	for _, tp := range s.tps {
		l := s.leaders[tp]
		if err := l.broker.local.AssignEpoch(tp, l.epoch, 0); err != nil {
			return err
		}
		if err := l.broker.node.BecomeLeader(ctx, tp, l.epoch, s.followerIDs(tp), -1); err != nil {
			return fmt.Errorf("broker %d leading %s: %w", l.broker.id, tp, err)
		}
		for _, r := range s.replicas[tp] {
			if r != l.broker {
				if err := r.node.BecomeFollower(ctx, tp, l.epoch, l.broker.id); err != nil {
					return fmt.Errorf("broker %d following %s: %w", r.id, tp, err)
				}
			}
		}
	}
	return nil
}

// close stops every broker still running and the metadata log, and returns
// the errors engines stopped with.
func (s *sim) close() error {
	for _, b := range s.brokers {
		b.halt()
	}
	errs := []error{s.log.Close()}
	for {
		select {
		case err := <-s.errs:
			errs = append(errs, err)
		default:
			return errors.Join(errs...)
		}
	}
}

func (b *simBroker) start() error {
	s := b.s
	backoff := walstore.Backoff{Initial: 5 * time.Millisecond, Max: 500 * time.Millisecond}
	var err error
	b.node, err = walstore.NewNode(walstore.NodeConfig{
		BrokerID: b.id, Store: b.store, Log: s.log, Local: b.local,
		Codec: s.cfg.codec, Interval: s.cfg.interval, ObjectBytes: s.cfg.objectBytes, Backoff: backoff,
		OnProgress: b.onProgress,
		Seed:       s.cfg.seed + uint64(b.id), Logger: s.cfg.logger.With("broker", b.id),
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.stop, b.done = cancel, make(chan struct{})
	go func() {
		defer close(b.done)
		if err := b.node.Run(ctx); err != nil {
			s.errs <- fmt.Errorf("broker %d: %w", b.id, err)
		}
	}()
	return nil
}

// halt stops b's engines, as a crash or a shutdown does; its log remains.
func (b *simBroker) halt() {
	b.haltOnce.Do(func() {
		if b.stop != nil {
			b.stop()
			<-b.done
		}
	})
}

// failed returns an error an engine stopped with by itself, if any: an
// engine returns early only when it cannot go on (its local log failed).
func (s *sim) failed() error {
	select {
	case err := <-s.errs:
		return err
	default:
		return nil
	}
}

// followerIDs is the placement the leaders publish by: a partition's
// replicas other than its current leader. A crashed replica stays in it,
// as in Kafka's assignment: it is out of sync, not unassigned.
func (s *sim) followerIDs(tp metadata.TopicPartition) []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.leaders[tp]
	var ids []int32
	for _, r := range s.replicas[tp] {
		if r != l.broker {
			ids = append(ids, r.id)
		}
	}
	return ids
}

// onProgress relays a follower's progress to the partition's leader, as
// Kafka's fetch requests carry it, so the leader's collector can delete
// objects every follower has applied.
func (b *simBroker) onProgress(p walstore.Progress) {
	for _, o := range b.s.brokers {
		if o.id == p.Leader && o.node != nil {
			o.node.RecordProgress(p)
		}
	}
}

// leaderFor returns tp's leader for producing, or nil while tp is offline.
func (s *sim) leaderFor(tp metadata.TopicPartition) (*simBroker, int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.offline[tp] {
		return nil, 0
	}
	l := s.leaders[tp]
	return l.broker, l.epoch
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
	leader    *simBroker
	tp        metadata.TopicPartition
	epoch     int32
	from, end int64
}

// waitDurable waits until b's leadership of tp is durable up to end: its
// republish, which BecomeLeader started, is done.
func (b *simBroker) waitDurable(ctx context.Context, tp metadata.TopicPartition, epoch int32, end int64) error {
	if end <= 0 {
		return nil
	}
	return b.node.WaitDurable(ctx, tp, epoch, end-1)
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
	var crashed []*simBroker
	var moved []metadata.TopicPartition
	s.mu.Lock()
	for _, b := range s.brokers {
		if b.az == az {
			b.crashed = true
			crashed = append(crashed, b)
			fo.CrashedBrokers = append(fo.CrashedBrokers, b.id)
		}
	}
	for _, tp := range s.tps {
		if s.leaders[tp].broker.crashed {
			s.offline[tp] = true
			moved = append(moved, tp)
		}
	}
	s.mu.Unlock()
	for _, b := range crashed {
		b.halt()
	}
	select {
	case <-time.After(detect):
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}

	var jobs []republishJob
	for _, tp := range moved {
		job, epoch, lost, err := s.elect(ctx, tp)
		if err != nil {
			return nil, nil, err
		}
		fo.NewEpoch = max(fo.NewEpoch, epoch)
		fo.RecordsLost += lost
		if job.from >= 0 {
			jobs = append(jobs, job)
		}
	}
	if err := s.shrinkInSync(); err != nil {
		return nil, nil, err
	}
	fo.PartitionsMoved = len(moved)
	fo.OfflineMS = ms(time.Since(t0))

	// Each new leader republishes its partitions one after another; the
	// leaders work in parallel.
	byLeader := make(map[*simBroker][]republishJob)
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
					if err := j.leader.waitDurable(ctx, j.tp, j.epoch, j.end); err != nil {
						errs <- fmt.Errorf("broker %d republishing %s from %d: %w", j.leader.id, j.tp, j.from, err)
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

// shrinkInSync drops the crashed brokers from the in-sync set of every
// partition they replicate, as Kafka's controller shrinks the ISR when a
// broker's session expires: the high watermark (what acks=all producers
// and direct readers wait for) then moves on without them.
func (s *sim) shrinkInSync() error {
	for _, tp := range s.tps {
		s.mu.Lock()
		l := s.leaders[tp].broker
		var inSync []int32
		shrunk := false
		for _, r := range s.replicas[tp] {
			switch {
			case r.crashed:
				shrunk = true
			case r != l:
				inSync = append(inSync, r.id)
			}
		}
		s.mu.Unlock()
		if shrunk {
			if err := l.node.SetInSync(tp, inSync); err != nil {
				return fmt.Errorf("broker %d shrinking the in-sync set of %s: %w", l.id, tp, err)
			}
		}
	}
	return nil
}

// elect moves tp, whose leader crashed, to a surviving replica by package
// election's rule, preferring the longest log (all logs are prefixes of
// the old leader's, so it has every record any survivor has; every
// survivor is in sync, as the demo's Nodes count it). It returns the new
// leader's republishing job, the new epoch, and how many of the old
// leader's records the new leader does not have.
func (s *sim) elect(ctx context.Context, tp metadata.TopicPartition) (job republishJob, epoch int32, lost int64, err error) {
	s.mu.Lock()
	old, replicas := s.leaders[tp], s.replicas[tp]
	part := election.Partition{Leader: old.broker.id, Epoch: old.epoch}
	for _, r := range replicas {
		part.Replicas = append(part.Replicas, election.Replica{ID: r.id, Live: !r.crashed, InSync: true})
	}
	s.mu.Unlock()
	var survivors []*simBroker
	for i, r := range replicas {
		if part.Replicas[i].Live {
			survivors = append(survivors, r)
			if part.Replicas[i].End, err = r.local.EndOffset(tp); err != nil {
				return republishJob{}, 0, 0, err
			}
		}
	}
	if len(survivors) == 0 {
		return republishJob{}, 0, 0, fmt.Errorf("%s: every replica is in the failed AZ", tp)
	}
	d, err := election.Elect(part, election.Options{Longest: true})
	if err != nil {
		return republishJob{}, 0, 0, fmt.Errorf("%s: %w", tp, err)
	}
	best := replicas[slices.IndexFunc(replicas, func(r *simBroker) bool { return r.id == d.Leader })]
	epoch = d.Epoch

	// The new leader's follower side stops before its log is read: the end
	// offset read next is where the new epoch starts.
	if err := best.node.StopReplica(ctx, tp); err != nil {
		return republishJob{}, 0, 0, err
	}
	end, err := best.local.EndOffset(tp)
	if err != nil {
		return republishJob{}, 0, 0, err
	}
	// Followers may lack anything from their own log end: the objects
	// that held it are in the bucket that went down.
	job = republishJob{leader: best, tp: tp, epoch: epoch, from: -1, end: end}
	var followers []int32
	for _, r := range s.replicas[tp] {
		if r == best {
			continue
		}
		followers = append(followers, r.id)
		if r.crashed {
			continue
		}
		fend, err := r.local.EndOffset(tp)
		if err != nil {
			return republishJob{}, 0, 0, err
		}
		if fend < end && (job.from < 0 || fend < job.from) {
			job.from = fend
		}
	}
	if err := best.local.AssignEpoch(tp, epoch, end); err != nil {
		return republishJob{}, 0, 0, err
	}
	s.mu.Lock()
	s.leaders[tp] = leadership{broker: best, epoch: epoch}
	s.mu.Unlock()
	if err := best.node.BecomeLeader(ctx, tp, epoch, followers, job.from); err != nil {
		return republishJob{}, 0, 0, fmt.Errorf("broker %d leading %s at epoch %d: %w", best.id, tp, epoch, err)
	}
	for _, r := range survivors {
		if r != best {
			if err := r.node.BecomeFollower(ctx, tp, epoch, best.id); err != nil {
				return republishJob{}, 0, 0, err
			}
		}
	}
	s.mu.Lock()
	delete(s.offline, tp)
	s.mu.Unlock()

	oldEnd, err := old.broker.local.EndOffset(tp)
	if err != nil {
		return republishJob{}, 0, 0, err
	}
	s.cfg.logger.Info("activetier demo: new leader elected", "partition", tp.String(), "broker", best.id, "epoch", epoch,
		"start_offset", end, "republish_from", job.from, "old_leader", old.broker.id, "old_leader_end", oldEnd)
	return job, epoch, max(0, oldEnd-end), nil
}

// replica is one follower's copy of a partition, for the final comparison.
type replica struct {
	tp       metadata.TopicPartition
	leader   *simBroker
	follower *simBroker
}

// liveReplicas lists every (partition, follower) pair whose follower has
// not crashed.
func (s *sim) liveReplicas() []replica {
	out := make([]replica, 0, 2*len(s.tps))
	_ = s.eachLiveReplica(func(r replica) error {
		out = append(out, r)
		return nil
	})
	return out
}

// eachLiveReplica calls fn for each pair liveReplicas lists, without
// building the list, and stops at fn's first error: the progress line
// samples it every second, and at 100,000 partitions a list a sample was
// a third of everything the demo allocated, and its garbage collections
// showed in the lag.
func (s *sim) eachLiveReplica(fn func(replica) error) error {
	var buf [8]replica
	for _, tp := range s.tps {
		s.mu.Lock()
		l := s.leaders[tp].broker
		reps := buf[:0]
		for _, r := range s.replicas[tp] {
			if r != l && !r.crashed {
				reps = append(reps, replica{tp: tp, leader: l, follower: r})
			}
		}
		s.mu.Unlock()
		for _, r := range reps {
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// behind returns how many live replicas have not reached their leader's
// log end offset, and the offsets they lack in total.
func (s *sim) behind() (replicas int, offsets int64, err error) {
	err = s.eachLiveReplica(func(r replica) error {
		n, err := r.lacks()
		if err != nil {
			return err
		}
		if n != 0 {
			replicas++
			offsets += max(0, n)
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return replicas, offsets, nil
}

// lacks returns how many offsets r's follower lacks of its leader's log;
// negative if it has more.
func (r replica) lacks() (int64, error) {
	le, err := r.leader.local.EndOffset(r.tp)
	if err != nil {
		return 0, err
	}
	fe, err := r.follower.local.EndOffset(r.tp)
	if err != nil {
		return 0, err
	}
	return le - fe, nil
}

// compare checks every live follower's log against its leader's, batch by
// batch and byte for byte, and describes the first differences.
func (s *sim) compare() (compared int, diffs []string) {
	for _, r := range s.liveReplicas() {
		compared++
		if d := diffLogs(r.leader.local.Batches(r.tp), r.follower.local.Batches(r.tp)); d != "" {
			diffs = append(diffs, fmt.Sprintf("%s: broker %d differs from leader %d: %s", r.tp, r.follower.id, r.leader.id, d))
		}
	}
	return compared, diffs
}

func diffLogs(want, got []storage.Batch) string {
	for i := range min(len(want), len(got)) {
		w, g := want[i], got[i]
		switch {
		case w.FirstOffset != g.FirstOffset || w.LastOffset != g.LastOffset:
			return fmt.Sprintf("batch %d holds offsets %d-%d, the leader's %d-%d", i, g.FirstOffset, g.LastOffset, w.FirstOffset, w.LastOffset)
		case w.Epoch != g.Epoch:
			return fmt.Sprintf("batch %d (offsets %d-%d) has epoch %d, the leader's %d", i, g.FirstOffset, g.LastOffset, g.Epoch, w.Epoch)
		case !bytes.Equal(w.Data, g.Data):
			return fmt.Sprintf("batch %d (offsets %d-%d) has different bytes", i, g.FirstOffset, g.LastOffset)
		}
	}
	if len(want) != len(got) {
		return fmt.Sprintf("%d batches, the leader has %d", len(got), len(want))
	}
	return ""
}
