package broker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/activetier/activetier/walstore"
)

// The in-sync set, as Kafka keeps it. The controller owns each
// partition's ISR; the leader proposes changes to it (POST /v1/isr on the
// controller, Kafka's AlterPartition) and the controller commits them,
// bumping the partition epoch, and posts the new view to every broker:
//
//   - a follower joins once it has caught up, as the leader's Node judges
//     it (Node.Replicas: its log, as far as it is the leader's, reaches
//     the high watermark and the offset the leader epoch starts at, so it
//     holds every record acknowledged), on reports of its current
//     incarnation (KIP-903: a report from a run before a restart says
//     nothing of the log the broker has now); the joiner is checked again
//     once the Node's high watermark waits for it, before the proposal
//     goes;
//   - a follower leaves once the Node has not seen it caught up with the
//     leader for ReplicaLagTime (replica.lag.time.max.ms), or when the
//     controller learns its broker died.
//
// While a proposal awaits its answer, the leader's Node counts the union
// of the committed and the proposed sets (Kafka's maximal ISR): a
// joining follower holds acks=all back at once, a leaving one until the
// controller has committed that it left, so the controller never elects
// a replica that lacks a record the leader acknowledged.

// minReplicaLagTime bounds ReplicaLagTime from below: a follower whose log
// does not change reports again every NodeConfig.ProgressInterval of its
// Node (1s by default), and must not look lagging between two reports.
const minReplicaLagTime = 2 * time.Second

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

// follower is what a partition's leader knows of one follower beyond
// what its Node knows (Node.Replicas): the run its reports come from.
type follower struct {
	incarnation string
	reported    bool // by this incarnation, in this leadership
	// since is when the leadership began, for an in-sync follower, or
	// when it joined: a follower is not lagging before it had
	// ReplicaLagTime to report (Kafka's makeLeader resets the followers'
	// lastCaughtUpTime).
	since time.Time
}

// proposal is an in-sync set sent to the controller.
type proposal struct {
	req AlterPartition
}

// trackFollower notes the run a follower's report comes from, and wakes
// the in-sync manager when the follower may join.
func (b *Broker) trackFollower(p *partition, s snapshot, rep ProgressReport) {
	p.mu.Lock()
	fs := p.followers[rep.Follower]
	if fs == nil || p.role != roleLeader || p.epoch != s.epoch {
		p.mu.Unlock()
		return
	}
	if fs.incarnation != rep.Incarnation {
		*fs = follower{incarnation: rep.Incarnation, since: fs.since}
	}
	fs.reported = true
	joinable := !slices.Contains(p.isr, rep.Follower)
	p.mu.Unlock()
	if joinable {
		b.isr.wake()
	}
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
	wakeCh waker
}

func newISRManager(b *Broker) *isrManager {
	return &isrManager{b: b, client: &http.Client{Timeout: 5 * time.Second}, wakeCh: newWaker()}
}

// wake asks for a round; it never blocks.
func (m *isrManager) wake() { m.wakeCh.wake() }

func (m *isrManager) run(ctx context.Context) {
	defer m.client.CloseIdleConnections()
	m.wakeCh.every(ctx, m.b.cfg.ReplicaLagTime/4, m.round)
}

// round sends every proposal that is due, in one request, and settles
// what the controller answers. A proposal that got no answer stays
// pending, and is sent again next round: the controller may have
// committed it.
func (m *isrManager) round(ctx context.Context) {
	b := m.b
	parts := b.partitions()
	b.mu.Lock()
	controller := b.controller
	if controller == "" {
		controller = b.cfg.Controller
	}
	b.mu.Unlock()
	var reqs []AlterPartition
	var props []*proposal
	var from []*partition
	for _, p := range parts {
		pr, fresh := b.propose(p, time.Now())
		if pr == nil {
			continue
		}
		if err := b.syncInSync(p); err != nil {
			b.lg.Warn("setting the in-sync followers", "partition", p.tp.String(), "err", err)
			continue
		}
		if fresh && !b.confirm(p, pr) {
			continue
		}
		reqs, props, from = append(reqs, pr.req), append(props, pr), append(from, p)
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

// propose returns p's pending proposal, to send again, or a new one
// (fresh) if the in-sync set should change, or nil: an in-sync follower
// leaves once its Node has not seen it caught up for ReplicaLagTime, a
// follower joins once its Node says it has caught up, as reported by the
// run of it the controller lists.
func (b *Broker) propose(p *partition, now time.Time) (pr *proposal, fresh bool) {
	if p.snapshot().role != roleLeader {
		return nil, false
	}
	replicas := make(map[int32]walstore.ReplicaState)
	for _, r := range b.node.Replicas(p.tp) {
		replicas[r.Broker] = r
	}
	b.mu.Lock()
	live := make(map[int32]string, len(b.brokers))
	for id, bi := range b.brokers {
		live[id] = bi.Incarnation
	}
	b.mu.Unlock()

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != roleLeader {
		return nil, false
	}
	if p.pending != nil {
		return p.pending, false
	}
	next := []int32{b.cfg.ID}
	var joining []ReplicaRef
	for _, f := range p.replicas {
		fs, rs := p.followers[f], replicas[f]
		if f == b.cfg.ID || fs == nil {
			continue
		}
		if slices.Contains(p.isr, f) {
			if now.Sub(fs.since) <= b.cfg.ReplicaLagTime || now.Sub(rs.LastCaughtUp) <= b.cfg.ReplicaLagTime {
				next = append(next, f)
			}
			continue
		}
		if inc, ok := live[f]; ok && inc == fs.incarnation && fs.reported && rs.CaughtUp {
			next = append(next, f)
			joining = append(joining, ReplicaRef{ID: f, Incarnation: fs.incarnation})
		}
	}
	slices.Sort(next)
	if slices.Equal(next, p.isr) {
		return nil, false
	}
	p.pending = &proposal{req: AlterPartition{
		Topic: p.tp.Topic, Partition: p.tp.Partition, Leader: b.cfg.ID, LeaderEpoch: p.epoch,
		PartitionEpoch: p.partitionEpoch, ISR: next, Joining: joining,
	}}
	b.lg.Info("proposing an in-sync set", "partition", p.tp.String(), "epoch", p.epoch, "isr", p.isr, "proposed", next)
	return p.pending, true
}

// confirm checks a fresh proposal's joiners again, now that the Node's
// high watermark waits for them: before, it could have passed one of them
// after it was found caught up. A joiner no longer caught up is left out;
// confirm reports whether anything is left to propose.
func (b *Broker) confirm(p *partition, pr *proposal) bool {
	if len(pr.req.Joining) == 0 {
		return true
	}
	caughtUp := make(map[int32]bool)
	for _, r := range b.node.Replicas(p.tp) {
		caughtUp[r.Broker] = r.CaughtUp
	}
	p.mu.Lock()
	if p.pending != pr {
		p.mu.Unlock()
		return false
	}
	now := time.Now()
	var joining []ReplicaRef
	for _, j := range pr.req.Joining {
		if caughtUp[j.ID] {
			joining = append(joining, j)
			p.followers[j.ID].since = now // it has ReplicaLagTime to show it keeps up
			continue
		}
		pr.req.ISR = slices.DeleteFunc(pr.req.ISR, func(r int32) bool { return r == j.ID })
	}
	pr.req.Joining = joining
	left := !slices.Equal(pr.req.ISR, p.isr)
	if !left {
		p.pending = nil
	}
	p.mu.Unlock()
	if !left {
		if err := b.syncInSync(p); err != nil {
			b.lg.Warn("setting the in-sync followers", "partition", p.tp.String(), "err", err)
		}
	}
	return left
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
	wakeCh waker
}

func newRegistrar(b *Broker) *registrar {
	return &registrar{b: b, client: &http.Client{Timeout: 10 * time.Second}, wakeCh: newWaker()}
}

// wake asks for a registration; it never blocks.
func (r *registrar) wake() { r.wakeCh.wake() }

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
