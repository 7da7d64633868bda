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
// it (POST /v1/cluster), and creates topics (POST /v1/topics on its
// Handler), placing their replicas as PlaceTopic does. Changes are
// serialized, so topic creations racing each other are decided one after
// the other. A production controller would also persist the view and
// detect failed brokers; here the test (or an operator) does the latter
// through Update.
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
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.view.clone()
	change(&next)
	if err := next.validate(); err != nil {
		return fmt.Errorf("broker: controller: %w", err)
	}
	c.view = next
	return c.post(ctx)
}

// post sends the view to every broker; c.mu is held.
func (c *Controller) post(ctx context.Context) error {
	body, err := json.Marshal(c.view)
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range c.view.Brokers {
		if err := postJSON(ctx, c.client, b.Control, "/v1/cluster", body, nil); err != nil {
			errs = append(errs, fmt.Errorf("broker %d: %w", b.ID, err))
		}
	}
	return errors.Join(errs...)
}

// CloseIdleConnections closes the connections to the brokers the
// controller is not using.
func (c *Controller) CloseIdleConnections() { c.client.CloseIdleConnections() }

// Handler serves POST /v1/topics: the topics a broker was asked to create.
func (c *Controller) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/topics", func(w http.ResponseWriter, r *http.Request) {
		var req TopicsRequest
		if err := decode(r, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c.CreateTopics(r.Context(), req))
	})
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
		top.Partitions[a.Partition] = Placement{Partition: a.Partition, Leader: a.Replicas[0], Epoch: 1, Replicas: replicas}
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
		top.Partitions = append(top.Partitions, Placement{Partition: p, Leader: leader, Epoch: 1, Replicas: replicas})
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
