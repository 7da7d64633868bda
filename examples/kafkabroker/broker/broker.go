package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/activetier/activetier/examples/kafkabroker/disklog"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// Config configures a Broker.
type Config struct {
	// ID is this broker's id, AZ its availability zone (its rack).
	ID int32
	AZ string
	// Kafka and Control are the listeners for Kafka clients and for the
	// control protocol. Required.
	Kafka, Control net.Listener
	// Log is the broker's own log. Required.
	Log *disklog.Log
	// Node configures the broker's walstore.Node: Store and Log are
	// required; BrokerID, Local and OnProgress are set by the broker.
	// The broker logs every digest mismatch at Error and counts them in
	// Status, then calls Node.OnDigestMismatch if set.
	Node walstore.NodeConfig
	// ProgressInterval is how often a follower reports progress that its
	// leader has not yet answered with a high watermark at its log end.
	// Default 10ms.
	ProgressInterval time.Duration
	// ProducerExpiry is how long a partition's leader remembers an
	// idempotent producer that appends nothing (Kafka's
	// producer.id.expiration.ms). Default 24h.
	ProducerExpiry time.Duration
	// ReplicaLagTime is how long an in-sync follower may go without
	// catching up with its leader's log end before the leader asks the
	// controller to take it out of the in-sync set (Kafka's
	// replica.lag.time.max.ms). At least 2s and twice
	// Node.ProgressInterval, how often a follower whose log does
	// not change reports again. Default 30s.
	ReplicaLagTime time.Duration
	// MaxFetchBytes bounds the record bytes of one Fetch answer, whatever
	// the consumer asks for (Kafka's fetch.max.bytes); the first batch
	// comes whole even if it is larger, as in Kafka. Default 55 MiB.
	MaxFetchBytes int
	// Controller is the host:port of the controller's HTTP API, where
	// the broker registers at start (POST /v1/brokers) and again
	// whenever a view does not list it; empty to be registered by
	// whoever builds the view, with Info.
	Controller string
	// Logger receives the broker's logs. Default slog.Default().
	Logger *slog.Logger
}

// defaultMaxFetchBytes is Kafka's fetch.max.bytes default.
const defaultMaxFetchBytes = 55 << 20

// Broker is one Kafka-protocol broker replicating through activetier.
type Broker struct {
	cfg  Config
	node *walstore.Node
	log  *disklog.Log
	lg   *slog.Logger

	// transitions serializes the controller's decisions.
	transitions sync.Mutex

	// incarnation names this run of the broker; see BrokerInfo.
	incarnation string

	mu         sync.Mutex
	controller string // where CreateTopics and in-sync sets go
	// isRegistered: the last view applied lists this run; hasView: a
	// view was applied.
	isRegistered, hasView bool
	brokers               map[int32]BrokerInfo
	topics                map[string]int32 // partition counts
	parts                 map[metadata.TopicPartition]*partition
	changed               chan struct{} // closed and replaced whenever a partition's visible end moves

	reporter  *reporter
	isr       *isrManager
	registrar *registrar
	pids      *producerIDs
	// runCtx and bg are Run's: the goroutines a leadership starts.
	runCtx context.Context
	bg     sync.WaitGroup
	// forward carries CreateTopics to the controller, bounded by each
	// request's timeout.
	forward *http.Client

	// Record bytes served to consumers, as leader and as follower.
	servedLeader, servedFollower atomic.Int64
}

// role of this broker for a partition.
type role int

const (
	roleNone role = iota
	roleLeader
	roleFollower
)

func (r role) String() string {
	return [...]string{"none", "leader", "follower"}[r]
}

// partition is the broker's state of one partition.
type partition struct {
	tp metadata.TopicPartition

	// appendMu serializes produce appends with each other and with role
	// changes, so offsets are assigned in order and no append straddles
	// a transition.
	appendMu sync.Mutex

	mu             sync.Mutex
	role           role
	leader         int32
	epoch          int32
	partitionEpoch int32
	replicas       []int32
	isr            []int32 // the in-sync replicas the controller committed
	// hw is the high watermark this broker learned as a follower, and
	// the floor of the one it serves as leader until its Node's passes
	// it: every in-sync replica holds the log below it.
	hw int64
	// The leader's view of its followers and its proposal of an in-sync
	// set awaiting the controller's answer (nil when none is); see
	// isr.go.
	followers map[int32]*follower
	pending   *proposal

	// producers is the leader's idempotent producer state, nil when it
	// does not lead; guarded by appendMu.
	producers *producers
}

// New validates cfg and returns a Broker. Nothing runs until Run.
func New(cfg Config) (*Broker, error) {
	if cfg.Kafka == nil || cfg.Control == nil || cfg.Log == nil {
		return nil, errors.New("broker: Kafka, Control and Log are required")
	}
	if cfg.ID < 0 || cfg.ID > maxBrokerID {
		return nil, fmt.Errorf("broker: ID %d is not between 0 and %d", cfg.ID, maxBrokerID)
	}
	if cfg.ProgressInterval < 0 || cfg.ProducerExpiry < 0 || cfg.MaxFetchBytes < 0 {
		return nil, fmt.Errorf("broker: ProgressInterval %v, ProducerExpiry %v or MaxFetchBytes %d is negative", cfg.ProgressInterval, cfg.ProducerExpiry, cfg.MaxFetchBytes)
	}
	if cfg.MaxFetchBytes == 0 {
		cfg.MaxFetchBytes = defaultMaxFetchBytes
	}
	if cfg.ReplicaLagTime == 0 {
		cfg.ReplicaLagTime = 30 * time.Second
	}
	if cfg.ReplicaLagTime < max(minReplicaLagTime, 2*cfg.Node.ProgressInterval) {
		return nil, fmt.Errorf("broker: ReplicaLagTime %v is below %v or twice Node.ProgressInterval %v",
			cfg.ReplicaLagTime, minReplicaLagTime, cfg.Node.ProgressInterval)
	}
	if cfg.ProgressInterval == 0 {
		cfg.ProgressInterval = 10 * time.Millisecond
	}
	if cfg.ProducerExpiry == 0 {
		cfg.ProducerExpiry = 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &Broker{
		cfg: cfg, log: cfg.Log, lg: cfg.Logger.With("broker", cfg.ID),
		brokers:     make(map[int32]BrokerInfo),
		topics:      make(map[string]int32),
		parts:       make(map[metadata.TopicPartition]*partition),
		changed:     make(chan struct{}),
		pids:        newProducerIDs(cfg.Log.Dir(), cfg.ID, time.Now),
		forward:     &http.Client{},
		incarnation: newIncarnation(time.Now()),
	}
	b.reporter = newReporter(b)
	b.isr = newISRManager(b)
	b.registrar = newRegistrar(b)
	nc := cfg.Node
	nc.BrokerID, nc.Local = cfg.ID, cfg.Log
	nc.OnProgress = func(pr walstore.Progress) { b.reporter.due(pr.Partition) }
	nc.OnDigestMismatch = b.digestMismatch(cfg.Node.OnDigestMismatch)
	if nc.Logger == nil {
		nc.Logger = b.lg
	}
	node, err := walstore.NewNode(nc)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	b.node = node
	return b, nil
}

// Node returns the broker's Node, for its stats.
func (b *Broker) Node() *walstore.Node { return b.node }

// Info returns the broker as the controller's view lists it: its id,
// rack, addresses and this run's incarnation.
func (b *Broker) Info() BrokerInfo {
	return BrokerInfo{ID: b.cfg.ID, AZ: b.cfg.AZ, Kafka: b.cfg.Kafka.Addr().String(), Control: b.cfg.Control.Addr().String(), Incarnation: b.incarnation}
}

// Run serves until ctx ends, then closes the listeners and waits for
// every goroutine it started.
func (b *Broker) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b.runCtx = ctx
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Go(func() { errs <- b.node.Run(ctx) })
	wg.Go(func() { errs <- b.serveKafka(ctx) })
	wg.Go(func() { errs <- b.serveControl(ctx) })
	wg.Go(func() { b.reporter.run(ctx) })
	wg.Go(func() { b.isr.run(ctx) })
	wg.Go(func() { b.registrar.run(ctx) })
	var first error
	select {
	case <-ctx.Done():
	case first = <-errs:
		cancel()
	}
	wg.Wait()
	b.bg.Wait() // no placement starts more once the control server stopped
	b.forward.CloseIdleConnections()
	return first
}

// notify wakes fetches and produce waits: some partition's visible end or
// role changed.
func (b *Broker) notify() {
	b.mu.Lock()
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// changes returns the channel the next notify closes.
func (b *Broker) changes() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// unknownTP is the error for a partition the broker does not know:
// errNotLeader, which clients retry at the leader, until it has applied a
// view, since it just started.
func (b *Broker) unknownTP() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.hasView {
		return errNotLeader
	}
	return errUnknownTP
}

// partitions returns every partition the broker knows.
func (b *Broker) partitions() []*partition {
	b.mu.Lock()
	defer b.mu.Unlock()
	parts := make([]*partition, 0, len(b.parts))
	for _, p := range b.parts {
		parts = append(parts, p)
	}
	return parts
}

// waker asks a loop for a round; wakes while one is pending are one.
type waker chan struct{}

func newWaker() waker { return make(waker, 1) }

// wake asks for a round; it never blocks.
func (w waker) wake() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// every calls round at each wake and every interval until ctx ends.
func (w waker) every(ctx context.Context, interval time.Duration, round func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w:
		case <-t.C:
		}
		round(ctx)
	}
}

func (b *Broker) partition(tp metadata.TopicPartition) *partition {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.parts[tp]
}

// snapshot is a consistent copy of a partition's replication state.
type snapshot struct {
	role           role
	leader         int32
	epoch          int32
	partitionEpoch int32
	replicas       []int32
	isr            []int32
	hw             int64
}

func (p *partition) snapshot() snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return snapshot{p.role, p.leader, p.epoch, p.partitionEpoch, slices.Clone(p.replicas), slices.Clone(p.isr), p.hw}
}

// highWatermark is the high watermark tp's consumers and followers are
// served: a leader's Node computes it over the in-sync set, and until it
// passes what this broker learned as a follower, that is served; a
// follower serves what its leader last answered.
func (b *Broker) highWatermark(tp metadata.TopicPartition, s snapshot) int64 {
	if s.role == roleLeader {
		return max(s.hw, b.node.HighWatermark(tp))
	}
	return s.hw
}

// errNotLeader and friends map to Kafka error codes in the handlers.
var (
	errNotLeader = errors.New("broker: not the partition's leader")
	errUnknownTP = errors.New("broker: unknown topic or partition")
	errTimedOut  = errors.New("broker: timed out waiting for followers")
)

// produce appends one partition's batch as its leader: it gets the next
// offsets and the leadership's epoch, goes to the local log, then to the
// Node. It returns the batch's base offset, its last offset and the epoch
// it was appended at: acks=1 needs nothing more, acks=all waits for the
// high watermark to pass the last offset in that epoch. The retry of an
// idempotent producer's batch is not appended again: it answers with the
// offsets the batch got the first time.
func (b *Broker) produce(ctx context.Context, tp metadata.TopicPartition, pb producedBatch) (base, last int64, epoch int32, err error) {
	p := b.partition(tp)
	if p == nil {
		return 0, 0, 0, b.unknownTP()
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	s := p.snapshot()
	if s.role != roleLeader {
		return 0, 0, 0, errNotLeader
	}
	if pb.idempotent() {
		dup, err := p.producers.check(pb.batchHeader)
		if err != nil {
			return 0, 0, 0, err
		}
		if dup != nil {
			return dup.firstOffset, dup.lastOffset, s.epoch, nil
		}
	}
	next, err := b.log.EndOffset(tp)
	if err != nil {
		return 0, 0, 0, err
	}
	pb.stamp(next, s.epoch)
	cb := storage.Batch{Epoch: s.epoch, FirstOffset: next, LastOffset: next + pb.lastDelta, MaxTimestamp: pb.maxTimestamp, Data: pb.data}
	if err := b.log.Append(ctx, tp, []storage.Batch{cb}); err != nil {
		return 0, 0, 0, err
	}
	if err := b.node.Append(ctx, tp, cb); err != nil {
		// Nothing acknowledged it and the Node does not have it:
		// take it out of the log, or every later append would
		// fail the Node's contiguity check.
		if terr := b.log.Truncate(context.WithoutCancel(ctx), tp, cb.FirstOffset); terr != nil {
			b.lg.Error("undoing an append the Node refused", "partition", tp.String(), "err", terr)
		}
		if errors.Is(err, walstore.ErrNotLeader) {
			return 0, 0, 0, errNotLeader
		}
		return 0, 0, 0, err
	}
	if pb.idempotent() {
		p.producers.record(pb.batchHeader, cb.FirstOffset, cb.LastOffset)
	}
	return cb.FirstOffset, cb.LastOffset, s.epoch, nil
}

// waitReplicated waits until every in-sync replica holds tp's offset
// last, appended at epoch, as acks=all does: the Node's high watermark
// passes it in the leadership that appended it.
func (b *Broker) waitReplicated(ctx context.Context, tp metadata.TopicPartition, epoch int32, last int64) error {
	err := b.node.WaitReplicated(ctx, tp, epoch, last)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, walstore.ErrNotLeader):
		return fmt.Errorf("%w: %w", errNotLeader, err)
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %w", errTimedOut, err)
	}
	return err
}

// watchHW wakes fetches whenever the high watermark of p's leadership at
// epoch moves, until that leadership ends.
func (b *Broker) watchHW(p *partition, epoch int32) {
	b.bg.Go(func() {
		for at := int64(-1); ; {
			if err := b.node.WaitReplicated(b.runCtx, p.tp, epoch, at); err != nil {
				return
			}
			if s := p.snapshot(); s.role != roleLeader || s.epoch != epoch {
				return
			}
			at = b.node.HighWatermark(p.tp)
			b.notify()
		}
	})
}

// recordProgress takes a follower's report, made while it followed the
// leader of epoch, as the leader's fetch handling does: the Node's high
// watermark and garbage collection take it, and the leader's tracking of
// the follower for the in-sync set. It returns the high watermark to
// answer with.
func (b *Broker) recordProgress(rep ProgressReport) (int64, error) {
	tp := metadata.TopicPartition{Topic: rep.Topic, Partition: rep.Partition}
	p := b.partition(tp)
	if p == nil {
		return 0, errUnknownTP
	}
	s := p.snapshot()
	if s.role != roleLeader {
		return 0, errNotLeader
	}
	if rep.Epoch != s.epoch {
		return 0, fmt.Errorf("%w: %d, the leader's is %d", errStaleEpoch, rep.Epoch, s.epoch)
	}
	b.node.RecordProgress(walstore.Progress{Partition: tp, Leader: b.cfg.ID, Follower: rep.Follower, EndOffset: rep.EndOffset, LastEpoch: rep.LastEpoch})
	b.trackFollower(p, s, rep)
	return b.highWatermark(tp, s), nil
}

// followerHW takes the high watermark a leader answered with.
func (b *Broker) followerHW(tp metadata.TopicPartition, leader, epoch int32, hw int64) {
	p := b.partition(tp)
	if p == nil {
		return
	}
	end, err := b.log.EndOffset(tp)
	if err != nil {
		return
	}
	hw = min(hw, end)
	p.mu.Lock()
	moved := p.role == roleFollower && p.leader == leader && p.epoch == epoch && hw > p.hw
	if moved {
		p.hw = hw
	}
	p.mu.Unlock()
	if moved {
		b.notify()
	}
}
