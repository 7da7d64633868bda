package broker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/walstore"
)

// The in-sync set, as Kafka keeps it. The controller owns each
// partition's ISR; the leader proposes changes to it (POST /v1/isr on the
// controller, Kafka's AlterPartition) and the controller commits them,
// bumping the partition epoch, and posts the new view to every broker:
//
//   - a follower joins once it has caught up: its log, a prefix of the
//     leader's, reaches the high watermark of the current leadership and
//     the leader's log end when that leadership began (which holds every
//     record acknowledged before; the high watermark is not known until
//     every in-sync follower has reported), as reported by its current
//     incarnation (KIP-903: a report from a run before a restart says
//     nothing of the log the broker has now);
//   - a follower leaves once it has not caught up with the leader's log
//     end for ReplicaLagTime (replica.lag.time.max.ms), or when the
//     controller learns its broker died.
//
// While a proposal awaits its answer, the leader's Node counts the union
// of the committed and the proposed sets (Kafka's maximal ISR): a
// joining follower holds acks=all back at once, a leaving one until the
// controller has committed that it left, so the controller never elects
// a replica that lacks a record the leader acknowledged.

// minReplicaLagTime bounds ReplicaLagTime from below: a follower whose log
// does not change reports every progressHeartbeat, and must not look
// lagging between two reports.
const (
	progressHeartbeat = 500 * time.Millisecond
	minReplicaLagTime = time.Second
)

// ReplicaRef names one run of a broker.
type ReplicaRef struct {
	ID          int32  `json:"id"`
	Incarnation string `json:"incarnation"`
}

// AlterPartition is a leader's proposal of a partition's new in-sync set:
// the leader epoch and partition epoch it was made at, the set, and the
// incarnations of the followers it adds, whose reports it judged.
type AlterPartition struct {
	Topic          string       `json:"topic"`
	Partition      int32        `json:"partition"`
	Leader         int32        `json:"leader"`
	LeaderEpoch    int32        `json:"leaderEpoch"`
	PartitionEpoch int32        `json:"partitionEpoch"`
	ISR            []int32      `json:"isr"`
	Joining        []ReplicaRef `json:"joining,omitempty"`
}

// AlterPartitionAnswer is the controller's answer to one proposal: a Kafka
// error code (0 when the set is the one proposed) and why, and the
// partition's placement after it, whatever the outcome.
type AlterPartitionAnswer struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Code      int16     `json:"code"`
	Message   string    `json:"message,omitempty"`
	Placement Placement `json:"placement"`
}

// follower is what a partition's leader knows of one follower.
type follower struct {
	incarnation string
	reported    bool  // by this incarnation, in this leadership
	end         int64 // its log end, when its log is a prefix of the leader's
	prefix      bool  // its log is a prefix of the leader's
	// caughtUpAt is the last time its log end reached the leader's
	// (Kafka's lastCaughtUpTime); prevAt and prevLeaderEnd, when its
	// previous report came and the leader's log end then, for a
	// follower that keeps up with a log that grows.
	caughtUpAt, prevAt time.Time
	prevLeaderEnd      int64
}

// proposal is an in-sync set sent to the controller.
type proposal struct {
	req AlterPartition
}

// trackFollower takes a follower's report into the leader's view of it,
// and wakes the in-sync manager when the follower may join.
func (b *Broker) trackFollower(p *partition, s snapshot, rep ProgressReport) error {
	leaderEnd, err := b.log.EndOffset(p.tp)
	if err != nil {
		return err
	}
	prefix, err := b.isPrefix(p, s.epoch, rep.EndOffset, rep.LastEpoch, leaderEnd)
	if err != nil {
		return err
	}
	now := time.Now()
	p.mu.Lock()
	fs := p.followers[rep.Follower]
	if fs == nil || p.role != roleLeader || p.epoch != s.epoch {
		p.mu.Unlock()
		return nil
	}
	if fs.incarnation != rep.Incarnation {
		*fs = follower{incarnation: rep.Incarnation, caughtUpAt: fs.caughtUpAt}
	}
	fs.reported, fs.end, fs.prefix = true, rep.EndOffset, prefix
	if prefix {
		switch {
		case rep.EndOffset >= leaderEnd:
			fs.caughtUpAt = now
		case !fs.prevAt.IsZero() && rep.EndOffset >= fs.prevLeaderEnd && fs.prevAt.After(fs.caughtUpAt):
			fs.caughtUpAt = fs.prevAt
		}
	}
	fs.prevAt, fs.prevLeaderEnd = now, leaderEnd
	joinable := prefix && !slices.Contains(p.isr, rep.Follower)
	p.mu.Unlock()
	if joinable {
		b.isr.wake()
	}
	return nil
}

// isPrefix reports whether a follower's log, ending at end with its last
// record at lastEpoch, is a prefix of this leader's: an empty log is, one
// whose last record is of the current epoch is (it applied this
// leadership's records), and one of an earlier epoch is if that epoch's
// records end here at or after its log end (Kafka's divergence check).
func (b *Broker) isPrefix(p *partition, epoch int32, end int64, lastEpoch int32, leaderEnd int64) (bool, error) {
	switch {
	case end == 0:
		return true, nil
	case lastEpoch == epoch:
		return end <= leaderEnd, nil
	case lastEpoch < 0:
		return false, nil
	}
	entries, err := b.log.Epochs(p.tp)
	if err != nil {
		return false, err
	}
	lin, err := fencing.NewLineage(entries...)
	if err != nil {
		return false, err
	}
	e, epochEnd := lin.EndOffsetFor(lastEpoch, leaderEnd)
	return e == lastEpoch && end <= epochEnd, nil
}

// syncInSync gives p's Node the followers its high watermark waits for:
// the committed in-sync set, with a pending proposal's members added.
func (b *Broker) syncInSync(p *partition) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != roleLeader {
		return nil
	}
	in := slices.Clone(p.isr)
	if p.pending != nil {
		in = append(in, p.pending.req.ISR...)
	}
	in = slices.DeleteFunc(slices.Compact(slices.Sorted(slices.Values(in))), func(r int32) bool { return r == b.cfg.ID })
	if err := b.node.SetInSync(p.tp, in); err != nil && !errors.Is(err, walstore.ErrNotLeader) {
		return err
	}
	return nil
}

// isrManager proposes the in-sync sets of the partitions this broker
// leads: on a ticker, for followers that lag, and when a report says a
// follower may join.
type isrManager struct {
	b      *Broker
	client *http.Client
	wakeCh chan struct{}
}

func newISRManager(b *Broker) *isrManager {
	return &isrManager{b: b, client: &http.Client{Timeout: 5 * time.Second}, wakeCh: make(chan struct{}, 1)}
}

// wake asks for a round; it never blocks.
func (m *isrManager) wake() {
	select {
	case m.wakeCh <- struct{}{}:
	default:
	}
}

func (m *isrManager) run(ctx context.Context) {
	t := time.NewTicker(m.b.cfg.ReplicaLagTime / 4)
	defer t.Stop()
	defer m.client.CloseIdleConnections()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wakeCh:
		case <-t.C:
		}
		m.round(ctx)
	}
}

// round sends every proposal that is due, in one request, and settles
// what the controller answers. A proposal that got no answer stays
// pending, and is sent again next round: the controller may have
// committed it.
func (m *isrManager) round(ctx context.Context) {
	b := m.b
	b.mu.Lock()
	parts := make([]*partition, 0, len(b.parts))
	for _, p := range b.parts {
		parts = append(parts, p)
	}
	controller := b.controller
	if controller == "" {
		controller = b.cfg.Controller
	}
	b.mu.Unlock()
	var reqs []AlterPartition
	var props []*proposal
	var from []*partition
	for _, p := range parts {
		if pr := b.propose(p, time.Now()); pr != nil {
			if err := b.syncInSync(p); err != nil {
				b.lg.Warn("setting the in-sync followers", "partition", p.tp.String(), "err", err)
			}
			reqs, props, from = append(reqs, pr.req), append(props, pr), append(from, p)
		}
	}
	if len(reqs) == 0 || controller == "" {
		return
	}
	body, err := json.Marshal(reqs)
	if err != nil {
		return
	}
	var answers []AlterPartitionAnswer
	if err := postJSON(ctx, m.client, controller, "/v1/isr", body, &answers); err != nil || len(answers) != len(reqs) {
		if ctx.Err() == nil {
			b.lg.Warn("proposing in-sync sets to the controller", "partitions", len(reqs), "answers", len(answers), "err", err)
		}
		return
	}
	for i, a := range answers {
		b.settle(from[i], props[i], a)
	}
}

// propose returns p's pending proposal, to send again, or a new one if
// the in-sync set should change, or nil.
func (b *Broker) propose(p *partition, now time.Time) *proposal {
	s := p.snapshot()
	if s.role != roleLeader {
		return nil
	}
	hw := b.node.HighWatermark(p.tp)
	b.mu.Lock()
	live := make(map[int32]string, len(b.brokers))
	for id, bi := range b.brokers {
		live[id] = bi.Incarnation
	}
	b.mu.Unlock()

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != roleLeader || p.epoch != s.epoch {
		return nil
	}
	if p.pending != nil {
		return p.pending
	}
	next := []int32{b.cfg.ID}
	var joining []ReplicaRef
	for _, f := range p.replicas {
		fs := p.followers[f]
		if f == b.cfg.ID || fs == nil {
			continue
		}
		if slices.Contains(p.isr, f) {
			if now.Sub(fs.caughtUpAt) <= b.cfg.ReplicaLagTime {
				next = append(next, f)
			}
			continue
		}
		if inc, ok := live[f]; ok && inc == fs.incarnation && fs.reported && fs.prefix && fs.end >= max(hw, p.epochStart) {
			next = append(next, f)
			joining = append(joining, ReplicaRef{ID: f, Incarnation: fs.incarnation})
		}
	}
	slices.Sort(next)
	if slices.Equal(next, p.isr) {
		return nil
	}
	for _, j := range joining {
		p.followers[j.ID].caughtUpAt = now // it reached the high watermark just now
	}
	p.pending = &proposal{req: AlterPartition{
		Topic: p.tp.Topic, Partition: p.tp.Partition, Leader: b.cfg.ID, LeaderEpoch: p.epoch,
		PartitionEpoch: p.partitionEpoch, ISR: next, Joining: joining,
	}}
	b.lg.Info("proposing an in-sync set", "partition", p.tp.String(), "epoch", p.epoch, "isr", p.isr, "proposed", next, "hw", hw)
	return p.pending
}

// settle takes the controller's answer to pr: the placement it answers
// with is the partition's, at the leader epoch pr was made at, and pr is
// no longer pending. An answer from a later leader epoch settles nothing:
// the view that ends this leadership will.
func (b *Broker) settle(p *partition, pr *proposal, a AlterPartitionAnswer) {
	p.mu.Lock()
	if p.pending != pr || p.role != roleLeader || a.Placement.Epoch != p.epoch {
		p.mu.Unlock()
		return
	}
	p.pending = nil
	if a.Placement.PartitionEpoch > p.partitionEpoch {
		p.partitionEpoch, p.isr = a.Placement.PartitionEpoch, slices.Clone(a.Placement.ISR)
	}
	p.mu.Unlock()
	if a.Code != 0 {
		b.lg.Info("the controller refused an in-sync set", "partition", p.tp.String(), "proposed", pr.req.ISR,
			"err", kerr.ErrorForCode(a.Code), "why", a.Message, "isr", a.Placement.ISR)
	}
	if err := b.syncInSync(p); err != nil {
		b.lg.Warn("setting the in-sync followers", "partition", p.tp.String(), "err", err)
	}
	b.isr.wake() // a refused proposal may be made again from the new state
}

// registrar registers this run of the broker with the controller at
// start, and again whenever a view does not list it.
type registrar struct {
	b      *Broker
	client *http.Client
	wakeCh chan struct{}
}

func newRegistrar(b *Broker) *registrar {
	return &registrar{b: b, client: &http.Client{Timeout: 10 * time.Second}, wakeCh: make(chan struct{}, 1)}
}

// wake asks for a registration; it never blocks.
func (r *registrar) wake() {
	select {
	case r.wakeCh <- struct{}{}:
	default:
	}
}

func (r *registrar) run(ctx context.Context) {
	if r.b.cfg.Controller == "" {
		return
	}
	defer r.client.CloseIdleConnections()
	body, err := json.Marshal(r.b.Info())
	if err != nil {
		return
	}
	for backoff := 100 * time.Millisecond; ; {
		select { // a view from before this registration asks for nothing
		case <-r.wakeCh:
		default:
		}
		err := postJSON(ctx, r.client, r.b.cfg.Controller, "/v1/brokers", body, nil)
		var retry <-chan time.Time
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.b.lg.Warn("registering with the controller", "controller", r.b.cfg.Controller, "err", err)
			retry = time.After(backoff)
			backoff = min(2*backoff, 2*time.Second)
		} else {
			backoff = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wakeCh:
		case <-retry:
		}
	}
}
