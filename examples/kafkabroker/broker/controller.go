package broker

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/activetier/activetier/election"
	"github.com/activetier/activetier/examples/kafkabroker/disklog"
	"github.com/activetier/activetier/metadata"
)

// Topic creation's limits and defaults: Kafka's num.partitions default
// (1) for a request that leaves the count to the broker, and all of the
// brokers, up to three, for one that leaves the replication factor.
const (
	defaultPartitions        = 1
	maxDefaultReplication    = 3
	maxPartitionsPerTopic    = 10_000 // bounds what one request makes every broker hold
	controllerRequestTimeout = 30 * time.Second
	// maxViewBytes bounds the view's JSON: a broker reads at most
	// maxControlBody of a POST /v1/cluster, so a larger view would be
	// refused by every broker, and with it every later decision. Half,
	// for the epochs' digits and the brokers that may still come.
	maxViewBytes = maxControlBody / 2
)

// TopicRequest is one topic to create, as a broker forwards a CreateTopics
// request to the controller (POST /v1/topics): Kafka's fields, -1 for the
// defaults.
type TopicRequest struct {
	Name              string       `json:"name"`
	Partitions        int32        `json:"partitions"`
	ReplicationFactor int16        `json:"replicationFactor"`
	Assignment        []Assignment `json:"assignment,omitempty"`
	Configs           []string     `json:"configs,omitempty"` // the names of the configs asked for
}

// Assignment is a partition's replicas as a CreateTopics request may
// give them, the leader first.
type Assignment struct {
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

// TopicsRequest is the body of POST /v1/topics.
type TopicsRequest struct {
	Topics       []TopicRequest `json:"topics"`
	ValidateOnly bool           `json:"validateOnly"`
}

// TopicAnswer is the controller's answer for one topic: the Kafka error
// code (0 when created, or when it would be with ValidateOnly) and why,
// and the partitions and replication factor it has.
type TopicAnswer struct {
	Name              string `json:"name"`
	Code              int16  `json:"code"`
	Message           string `json:"message,omitempty"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int16  `json:"replicationFactor"`
}

// Controller is the cluster's controller, as small as the example needs:
// it holds the cluster view, posts every change of it to every broker in
// it (POST /v1/cluster), and serves its Handler: brokers register there
// at start (POST /v1/brokers, Register), leaders propose in-sync sets
// (POST /v1/isr, AlterPartition) and brokers forward topic creations
// (POST /v1/topics, CreateTopics, placing replicas as PlaceTopic does).
// It elects a partition's leader only from its in-sync replicas. Changes
// are serialized, so requests racing each other are decided one after
// the other. A production controller would also persist the view and
// detect failed brokers itself (Kafka's broker heartbeats); here the test
// (or an operator) tells it, with BrokerFailed.
type Controller struct {
	client *http.Client

	mu   sync.Mutex
	view Cluster
}

// NewController returns a controller holding view, which it has not yet
// posted to anyone (see Update). The view's Controller field is the
// address the Handler is served at, for brokers to forward CreateTopics
// to.
func NewController(view Cluster) (*Controller, error) {
	if err := view.validate(); err != nil {
		return nil, fmt.Errorf("broker: controller: %w", err)
	}
	return &Controller{client: &http.Client{Timeout: controllerRequestTimeout}, view: view.clone()}, nil
}

// View returns a copy of the cluster view.
func (c *Controller) View() Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.view.clone()
}

// Update changes the view with change, applied to a copy, and posts the
// result to every broker it lists; the change holds even if a post fails
// (a broker that was down gets the view with the next one), and the
// error names the brokers that did not take it.
func (c *Controller) Update(ctx context.Context, change func(*Cluster)) error {
	return c.update(ctx, func(v *Cluster) error { change(v); return nil })
}

// update is Update with a change that may refuse.
func (c *Controller) update(ctx context.Context, change func(*Cluster) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.view.clone()
	if err := change(&next); err != nil {
		return fmt.Errorf("broker: controller: %w", err)
	}
	if err := next.validate(); err != nil {
		return fmt.Errorf("broker: controller: %w", err)
	}
	c.view = next
	return c.post(ctx)
}

// post sends the view to every broker at once, each post bounded by
// controllerRequestTimeout on its own, so that a broker that accepts the
// connection but never answers delays no other broker's view; c.mu is
// held, so a broker gets the views in the order they were decided.
func (c *Controller) post(ctx context.Context) error {
	body, err := json.Marshal(c.view)
	if err != nil {
		return err
	}
	errs := make([]error, len(c.view.Brokers))
	var wg sync.WaitGroup
	for i, b := range c.view.Brokers {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, controllerRequestTimeout)
			defer cancel()
			if err := postJSON(pctx, c.client, b.Control, "/v1/cluster", body, nil); err != nil {
				errs[i] = fmt.Errorf("broker %d: %w", b.ID, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Register adds a broker that started, at the incarnation info names, to
// the live brokers, and posts the view: Kafka's broker registration. The
// broker follows every partition it is a replica of and is in no in-sync
// set, so it leads nothing until a leader has found it caught up, except
// where it is the last in-sync replica of a partition that has no
// leader: it holds every record the partition acknowledged, and is
// elected. A run of the broker the view still lists, from before a crash
// the controller did not notice, is failed first (see BrokerFailed); the
// same run registering again changes nothing and gets the view again. A
// registration of a run older than the live one (its incarnation sorts
// before the listed one's: a delayed or replayed request of a run that is
// gone) is refused with ErrStaleIncarnation and changes nothing: Kafka's
// controller refuses a registration while the broker's session is alive,
// and this controller, without heartbeats, tells a restart from a stale
// run by the incarnations' order.
func (c *Controller) Register(ctx context.Context, info BrokerInfo) error {
	if info.ID < 0 || info.ID > maxBrokerID || info.Incarnation == "" || info.Kafka == "" || info.Control == "" {
		return fmt.Errorf("broker: controller: registering %+v: id, incarnation and addresses are required", info)
	}
	return c.update(ctx, func(v *Cluster) error {
		if err := v.register(info); err != nil {
			return err
		}
		// As for topics: a view past what brokers read would be
		// refused by all of them, and every later one with it.
		if n, err := viewSize(v); err != nil || n > maxViewBytes {
			return fmt.Errorf("registering broker %d would make the view %d bytes, more than the %d brokers take (%v)", info.ID, n, maxViewBytes, err)
		}
		return nil
	})
}

// ErrStaleIncarnation is a registration refused because the view lists
// a later run of the broker (see Register).
var ErrStaleIncarnation = errors.New("a registration of a run older than the broker's live run")

// register is Register on the view.
func (v *Cluster) register(info BrokerInfo) error {
	i := slices.IndexFunc(v.Brokers, func(b BrokerInfo) bool { return b.ID == info.ID })
	if i >= 0 && v.Brokers[i].Incarnation == info.Incarnation {
		return nil
	}
	if i >= 0 && info.Incarnation < v.Brokers[i].Incarnation {
		return fmt.Errorf("broker %d: %w: incarnation %q, live %q", info.ID, ErrStaleIncarnation, info.Incarnation, v.Brokers[i].Incarnation)
	}
	if i >= 0 {
		if err := v.fail(info.ID); err != nil {
			return err
		}
	}
	v.Brokers = append(v.Brokers, info)
	slices.SortFunc(v.Brokers, func(a, b BrokerInfo) int { return cmp.Compare(a.ID, b.ID) })
	return v.forEach(func(pl *Placement) error {
		if pl.Leader >= 0 {
			return nil
		}
		changed, err := v.elect(pl, -1)
		if err != nil {
			return err
		}
		if changed {
			pl.PartitionEpoch++
		}
		return nil
	})
}

// BrokerFailed takes a broker the controller learned is down out of the
// live brokers and out of every in-sync set but where it is the last
// member (Kafka keeps that one, which holds every acknowledged record),
// and elects a new leader, at the next leader epoch, from the remaining
// in-sync replicas of every partition it led: none there leaves the
// partition without a leader (-1) until one returns. There is no unclean
// election.
//
// The failed broker gets the view too, if it can still be reached (a
// broker wrongly thought dead): it finds itself unlisted, gives up its
// leaderships and registers again.
func (c *Controller) BrokerFailed(ctx context.Context, id int32) error {
	var failed []BrokerInfo
	for _, b := range c.View().Brokers {
		if b.ID == id {
			failed = append(failed, b)
		}
	}
	err := c.update(ctx, func(v *Cluster) error { return v.fail(id) })
	if len(failed) > 0 {
		c.mu.Lock()
		defer c.mu.Unlock()
		if body, merr := json.Marshal(c.view); merr == nil {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_ = postJSON(pctx, c.client, failed[0].Control, "/v1/cluster", body, nil) // most likely down
			cancel()
		}
	}
	return err
}

// fail is BrokerFailed on the view.
func (v *Cluster) fail(id int32) error {
	v.Brokers = slices.DeleteFunc(v.Brokers, func(b BrokerInfo) bool { return b.ID == id })
	return v.forEach(func(pl *Placement) error {
		changed := false
		if slices.Contains(pl.ISR, id) && len(pl.ISR) > 1 {
			pl.ISR = slices.DeleteFunc(pl.ISR, func(r int32) bool { return r == id })
			changed = true
		}
		if pl.Leader == id {
			elected, err := v.elect(pl, id)
			if err != nil {
				return err
			}
			changed = changed || elected
		}
		if changed {
			pl.PartitionEpoch++
		}
		return nil
	})
}

// elect makes the first live in-sync replica other than not the leader of
// pl at the next leader epoch, or none (-1), by package election's rule,
// trying the replicas from the one at pl's partition number so that
// leaderships spread across brokers. It reports whether pl changed; an
// error (no leader epoch left) leaves pl as it was.
func (v *Cluster) elect(pl *Placement, not int32) (bool, error) {
	part := election.Partition{Leader: pl.Leader, Epoch: pl.Epoch}
	for i := range pl.Replicas {
		r := pl.Replicas[(int(pl.Partition)+i)%len(pl.Replicas)]
		live := slices.ContainsFunc(v.Brokers, func(b BrokerInfo) bool { return b.ID == r })
		part.Replicas = append(part.Replicas, election.Replica{ID: r, Live: live, InSync: slices.Contains(pl.ISR, r)})
	}
	d, err := election.Elect(part, election.Options{Exclude: []int32{not}})
	if err != nil {
		return false, err
	}
	pl.Leader, pl.Epoch = d.Leader, d.Epoch
	return d.Changed, nil
}

// forEach calls f with every placement of the view, and stops at f's
// first error, which it returns naming the partition.
func (v *Cluster) forEach(f func(*Placement) error) error {
	for ti := range v.Topics {
		for pi := range v.Topics[ti].Partitions {
			if err := f(&v.Topics[ti].Partitions[pi]); err != nil {
				return fmt.Errorf("%s: %w", metadata.TopicPartition{Topic: v.Topics[ti].Name, Partition: int32(pi)}, err)
			}
		}
	}
	return nil
}

// AlterPartition decides leaders' proposals of in-sync sets, as Kafka's
// controller decides AlterPartition: a proposal from a leader or leader
// epoch that is no longer the partition's gets FENCED_LEADER_EPOCH; one
// made from another partition epoch, INVALID_UPDATE_VERSION (unless it
// proposes the set the partition has, which it then gets, so that a
// leader that lost the answer and asks again learns it); a set without
// the leader or with a broker not among the replicas, INVALID_REQUEST;
// one that adds a broker that is not live at the incarnation the leader
// judged, INELIGIBLE_REPLICA. The others are committed, each at the next
// partition epoch, and the view is posted to every broker before the
// answers, which carry each partition's placement, whatever the outcome.
func (c *Controller) AlterPartition(ctx context.Context, reqs []AlterPartition) []AlterPartitionAnswer {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.view.clone()
	answers := make([]AlterPartitionAnswer, len(reqs))
	changed := false
	for i, r := range reqs {
		a := &answers[i]
		a.Topic, a.Partition = r.Topic, r.Partition
		pl := next.placement(r.Topic, r.Partition)
		if pl == nil {
			a.Code, a.Message = kerr.UnknownTopicOrPartition.Code, "no such partition"
			continue
		}
		isr := slices.Sorted(slices.Values(r.ISR))
		code, why := next.judge(pl, r, isr)
		a.Code, a.Message = code, why
		if code == 0 && !slices.Equal(isr, pl.ISR) {
			pl.ISR = isr
			pl.PartitionEpoch++
			changed = true
		}
		a.Placement = *pl
		a.Placement.Replicas, a.Placement.ISR = slices.Clone(pl.Replicas), slices.Clone(pl.ISR)
	}
	if !changed {
		return answers
	}
	c.view = next
	_ = c.post(ctx) // the change holds; a broker that missed it gets the next view
	return answers
}

// judge returns the Kafka error code for proposal r of isr (sorted) on
// pl, and why; 0 to commit it.
func (v *Cluster) judge(pl *Placement, r AlterPartition, isr []int32) (int16, string) {
	switch {
	case r.Leader != pl.Leader || r.LeaderEpoch != pl.Epoch:
		return kerr.FencedLeaderEpoch.Code, fmt.Sprintf("broker %d at leader epoch %d proposed; the leader is %d at epoch %d", r.Leader, r.LeaderEpoch, pl.Leader, pl.Epoch)
	case slices.Equal(isr, pl.ISR):
		return 0, ""
	case r.PartitionEpoch != pl.PartitionEpoch:
		return kerr.InvalidUpdateVersion.Code, fmt.Sprintf("proposed at partition epoch %d; it is %d", r.PartitionEpoch, pl.PartitionEpoch)
	case !slices.Contains(isr, r.Leader) || hasDuplicates(isr) || !subset(isr, pl.Replicas):
		return kerr.InvalidRequest.Code, fmt.Sprintf("in-sync set %v: want the leader and others of the replicas %v, each once", isr, pl.Replicas)
	}
	for _, id := range isr {
		if slices.Contains(pl.ISR, id) {
			continue
		}
		j := slices.IndexFunc(r.Joining, func(j ReplicaRef) bool { return j.ID == id })
		b := slices.IndexFunc(v.Brokers, func(b BrokerInfo) bool { return b.ID == id })
		if j < 0 || b < 0 || v.Brokers[b].Incarnation != r.Joining[j].Incarnation {
			return kerr.IneligibleReplica.Code, fmt.Sprintf("broker %d is not live at the incarnation the leader judged", id)
		}
	}
	return 0, ""
}

// placement returns the view's placement of a partition, or nil.
func (v *Cluster) placement(topic string, partition int32) *Placement {
	for ti := range v.Topics {
		if t := &v.Topics[ti]; t.Name == topic && partition >= 0 && int(partition) < len(t.Partitions) {
			return &t.Partitions[partition]
		}
	}
	return nil
}

// CloseIdleConnections closes the connections to the brokers the
// controller is not using.
func (c *Controller) CloseIdleConnections() { c.client.CloseIdleConnections() }

// Handler serves the controller's API: POST /v1/brokers (a broker's
// BrokerInfo, see Register), POST /v1/isr (a leader's AlterPartition
// proposals, answered with AlterPartitionAnswers) and POST /v1/topics (the
// topics a broker was asked to create, see CreateTopics).
func (c *Controller) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/brokers", applyJSON(c.Register))
	mux.Handle("/v1/isr", answerJSON(c.AlterPartition))
	mux.Handle("/v1/topics", answerJSON(c.CreateTopics))
	return mux
}

// CreateTopics decides each topic as Kafka's controller does, creates the
// ones that pass (unless req.ValidateOnly), and posts the new view to
// every broker before it answers, so a client finds the topics on any
// broker once it has the answer.
func (c *Controller) CreateTopics(ctx context.Context, req TopicsRequest) []TopicAnswer {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.view.clone()
	answers := make([]TopicAnswer, len(req.Topics))
	names := make(map[string]int)
	for _, t := range req.Topics {
		names[t.Name]++
	}
	created := 0
	size, err := viewSize(next)
	if err != nil {
		for i := range answers {
			answers[i] = TopicAnswer{Name: req.Topics[i].Name, Code: kerr.UnknownServerError.Code, Message: err.Error(), Partitions: -1, ReplicationFactor: -1}
		}
		return answers
	}
	for i, t := range req.Topics {
		a := &answers[i]
		a.Name, a.Partitions, a.ReplicationFactor = t.Name, -1, -1
		if names[t.Name] > 1 {
			a.Code, a.Message = kerr.InvalidRequest.Code, fmt.Sprintf("topic %q is listed more than once", t.Name)
			continue
		}
		top, err := next.planTopic(t)
		if err != nil {
			var ke *kerr.Error
			a.Code, a.Message = kerr.UnknownServerError.Code, err.Error()
			if errors.As(err, &ke) {
				a.Code = ke.Code
			}
			continue
		}
		grown, err := viewSize(top)
		if err == nil && size+grown+1 > maxViewBytes {
			err = fmt.Errorf("%d partitions would make the cluster's view %d bytes, more than the %d brokers take", len(top.Partitions), size+grown+1, maxViewBytes)
		}
		if err != nil {
			a.Code, a.Message = kerr.InvalidPartitions.Code, err.Error()
			continue
		}
		size += grown + 1 // and a comma
		a.Partitions, a.ReplicationFactor = int32(len(top.Partitions)), int16(len(top.Partitions[0].Replicas))
		if !req.ValidateOnly {
			next.Topics = append(next.Topics, top)
			created++
		}
	}
	if created == 0 {
		return answers
	}
	c.view = next
	if err := c.post(ctx); err != nil {
		for i := range answers {
			if a := &answers[i]; a.Code == 0 {
				a.Code, a.Message = kerr.RequestTimedOut.Code, fmt.Sprintf("created, but not every broker has it yet: %v", err)
			}
		}
	}
	return answers
}

// viewSize is the length of v's JSON, as the view is posted.
func viewSize(v any) (int, error) {
	b, err := json.Marshal(v)
	return len(b), err
}

// planTopic validates t against the view and places it, or returns an
// error wrapping the Kafka error the request gets.
func (v *Cluster) planTopic(t TopicRequest) (Topic, error) {
	refuse := func(ke *kerr.Error, format string, args ...any) (Topic, error) {
		return Topic{}, fmt.Errorf("%w: "+format, append([]any{ke}, args...)...)
	}
	if err := disklog.ValidPartition(metadata.TopicPartition{Topic: t.Name}); err != nil {
		return refuse(kerr.InvalidTopicException, "%q is not a legal topic name: at most 249 of [a-zA-Z0-9._-], and not \".\" or \"..\"", t.Name)
	}
	collides := func(a string) string { return strings.ReplaceAll(a, ".", "_") }
	for _, have := range v.Topics {
		switch {
		case have.Name == t.Name:
			return refuse(kerr.TopicAlreadyExists, "topic %q already exists", t.Name)
		case collides(have.Name) == collides(t.Name):
			return refuse(kerr.InvalidTopicException, "topic %q collides with existing topic %q ('.' and '_' are the same in metric names)", t.Name, have.Name)
		}
	}
	if len(t.Configs) > 0 {
		return refuse(kerr.InvalidConfig, "topic configs are not supported (asked for %s)", strings.Join(t.Configs, ", "))
	}
	if len(t.Assignment) > 0 {
		if t.Partitions != -1 || t.ReplicationFactor != -1 {
			return refuse(kerr.InvalidRequest, "both a replica assignment and a partition count or replication factor")
		}
		return v.assignTopic(t)
	}
	partitions, rf := t.Partitions, int(t.ReplicationFactor)
	if partitions == -1 {
		partitions = defaultPartitions
	}
	if rf == -1 {
		rf = min(maxDefaultReplication, len(v.Brokers))
	}
	switch {
	case partitions <= 0 || partitions > maxPartitionsPerTopic:
		return refuse(kerr.InvalidPartitions, "%d partitions: want 1 to %d", t.Partitions, maxPartitionsPerTopic)
	case rf <= 0:
		return refuse(kerr.InvalidReplicationFactor, "replication factor %d: want at least 1", t.ReplicationFactor)
	case rf > len(v.Brokers):
		return refuse(kerr.InvalidReplicationFactor, "replication factor %d: larger than the %d available brokers", rf, len(v.Brokers))
	}
	return PlaceTopic(t.Name, partitions, rf, v.Brokers), nil
}

// assignTopic places a topic as its request's replica assignment says,
// the first replica of each partition leading.
func (v *Cluster) assignTopic(t TopicRequest) (Topic, error) {
	refuse := func(format string, args ...any) (Topic, error) {
		return Topic{}, fmt.Errorf("%w: "+format, append([]any{kerr.InvalidReplicaAssignment}, args...)...)
	}
	if len(t.Assignment) > maxPartitionsPerTopic {
		return Topic{}, fmt.Errorf("%w: %d partitions: want at most %d", kerr.InvalidPartitions, len(t.Assignment), maxPartitionsPerTopic)
	}
	live := make(map[int32]bool)
	for _, b := range v.Brokers {
		live[b.ID] = true
	}
	top := Topic{Name: t.Name, Partitions: make([]Placement, len(t.Assignment))}
	for _, a := range t.Assignment {
		switch {
		case a.Partition < 0 || int(a.Partition) >= len(t.Assignment) || top.Partitions[a.Partition].Replicas != nil:
			return refuse("partitions must be 0 to %d, each once; found %d", len(t.Assignment)-1, a.Partition)
		case len(a.Replicas) == 0 || len(a.Replicas) != len(t.Assignment[0].Replicas):
			return refuse("partition %d has %d replicas, partition %d has %d", a.Partition, len(a.Replicas), t.Assignment[0].Partition, len(t.Assignment[0].Replicas))
		}
		for i, r := range a.Replicas {
			if !live[r] {
				return refuse("partition %d: broker %d is not a live broker", a.Partition, r)
			}
			if slices.Contains(a.Replicas[:i], r) {
				return refuse("partition %d: broker %d is listed twice", a.Partition, r)
			}
		}
		replicas := slices.Sorted(slices.Values(a.Replicas))
		top.Partitions[a.Partition] = Placement{Partition: a.Partition, Leader: a.Replicas[0], Epoch: 1, Replicas: replicas, ISR: slices.Clone(replicas)}
	}
	return top, nil
}

// PlaceTopic places a new topic's partitions on rf of the brokers each,
// across racks as Kafka's rack-aware assignment does: the brokers ordered
// by alternating racks (the first of each rack, then the second of each,
// and so on, racks and brokers in order), partition p on the rf brokers
// from position p of that order (wrapping), led by the first of them, at
// epoch 1, all in sync. With one broker per rack, rf replicas are in rf
// racks. rf must be between 1 and len(brokers).
func PlaceTopic(name string, partitions int32, rf int, brokers []BrokerInfo) Topic {
	byRack := make(map[string][]BrokerInfo)
	for _, b := range brokers {
		byRack[b.AZ] = append(byRack[b.AZ], b)
	}
	racks := slices.Sorted(func(yield func(string) bool) {
		for r := range byRack {
			if !yield(r) {
				return
			}
		}
	})
	var order []int32
	for i := 0; len(order) < len(brokers); i++ {
		for _, r := range racks {
			bs := byRack[r]
			slices.SortFunc(bs, func(a, b BrokerInfo) int { return cmp.Compare(a.ID, b.ID) })
			if i < len(bs) {
				order = append(order, bs[i].ID)
			}
		}
	}
	top := Topic{Name: name}
	for p := range partitions {
		replicas := make([]int32, rf)
		for i := range replicas {
			replicas[i] = order[(int(p)+i)%len(order)]
		}
		leader := replicas[0]
		slices.Sort(replicas)
		top.Partitions = append(top.Partitions, Placement{Partition: p, Leader: leader, Epoch: 1, Replicas: replicas, ISR: slices.Clone(replicas)})
	}
	return top
}

// clone is a deep copy of the view.
func (v Cluster) clone() Cluster {
	out := Cluster{Controller: v.Controller, Brokers: slices.Clone(v.Brokers)}
	for _, t := range v.Topics {
		ct := Topic{Name: t.Name, Partitions: slices.Clone(t.Partitions)}
		for i := range ct.Partitions {
			ct.Partitions[i].Replicas = slices.Clone(ct.Partitions[i].Replicas)
			ct.Partitions[i].ISR = slices.Clone(ct.Partitions[i].ISR)
		}
		out.Topics = append(out.Topics, ct)
	}
	return out
}

// postJSON posts body to addr's path and decodes the answer into out
// (none expected when out is nil).
func postJSON(ctx context.Context, client *http.Client, addr, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxControlBody))
		return nil
	}
	return json.NewDecoder(io.LimitReader(resp.Body, maxControlBody)).Decode(out)
}
