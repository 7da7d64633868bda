package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/activetier/activetier/metadata"
)

// TestCreateTopics: kadm creates topics through any broker; the
// controller validates as Kafka's does and places the replicas across the
// racks; a created topic takes records at once.
func TestCreateTopics(t *testing.T) {
	c := startCluster(t, "existing", 1)
	cl := rawClient(t, c)
	adm := kadm.NewClient(cl)
	ctx := t.Context()

	for _, tc := range []struct {
		name       string
		topic      string
		partitions int32
		rf         int16
		configs    map[string]*string
		want       *kerr.Error
	}{
		{"defaults", "defaults", -1, -1, nil, nil},
		{"six partitions on two replicas", "six", 6, 2, nil, nil},
		{"exists", "existing", 1, 1, nil, kerr.TopicAlreadyExists},
		{"collides with a topic", "si_x", 1, 1, nil, nil},
		{"collides through the dot", "si.x", 1, 1, nil, kerr.InvalidTopicException},
		{"illegal name", "a/b", 1, 1, nil, kerr.InvalidTopicException},
		{"name too long", strings.Repeat("x", 250), 1, 1, nil, kerr.InvalidTopicException},
		{"no partitions", "zero", 0, 1, nil, kerr.InvalidPartitions},
		{"too many partitions", "many", maxPartitionsPerTopic + 1, 1, nil, kerr.InvalidPartitions},
		{"no replicas", "norep", 1, 0, nil, kerr.InvalidReplicationFactor},
		{"more replicas than brokers", "fourrep", 1, 4, nil, kerr.InvalidReplicationFactor},
		{"configs", "compacted", 1, 1, map[string]*string{"cleanup.policy": new("compact")}, kerr.InvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := adm.CreateTopic(ctx, tc.partitions, tc.rf, tc.configs, tc.topic)
			if tc.want == nil {
				require.NoError(t, err)
				require.NoError(t, resp.Err)
				return
			}
			require.ErrorIs(t, errors.Join(err, resp.Err), tc.want)
		})
	}

	topics, err := adm.ListTopics(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"existing", "defaults", "six", "si_x"}, topics.Names())
	defaults := topics["defaults"]
	require.Len(t, defaults.Partitions, defaultPartitions)
	require.Len(t, defaults.Partitions[0].Replicas, 3)
	six := topics["six"]
	require.Len(t, six.Partitions, 6)
	leaders := make(map[int32]int)
	for _, p := range six.Partitions {
		require.Len(t, p.Replicas, 2, "partition %d", p.Partition)
		require.NotEqual(t, p.Replicas[0], p.Replicas[1])
		require.Contains(t, p.Replicas, p.Leader)
		leaders[p.Leader]++
	}
	require.Equal(t, map[int32]int{0: 2, 1: 2, 2: 2}, leaders, "leadership spread over the brokers")

	// Every broker has the topic; its leaders take records.
	for p := range int32(6) {
		pl := c.ctl.View().Topics[2].Partitions[p]
		code, base := produceRaw(t, cl, pl.Leader, metadata.TopicPartition{Topic: "six", Partition: p}, recordBatch(t, []byte("v")))
		require.Zero(t, code, "partition %d", p)
		require.Zero(t, base)
	}

	// Validation only creates nothing; a repeated name in one request
	// is refused for both.
	req := kmsg.NewPtrCreateTopicsRequest()
	req.ValidateOnly, req.TimeoutMillis = true, 5000
	for _, name := range []string{"checked", "twice", "twice"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 3, 3
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, resp.Topics, 3)
	assert.Zero(t, resp.Topics[0].ErrorCode)
	assert.Equal(t, int32(3), resp.Topics[0].NumPartitions)
	assert.Equal(t, kerr.InvalidRequest.Code, resp.Topics[1].ErrorCode)
	assert.Equal(t, kerr.InvalidRequest.Code, resp.Topics[2].ErrorCode)
	topics, err = adm.ListTopics(ctx)
	require.NoError(t, err)
	require.False(t, topics.Has("checked"), "validateOnly created the topic")

	// A replica assignment, the first replica leading.
	req = kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "assigned", -1, -1
	for p, replicas := range [][]int32{{2, 0}, {1, 2}} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	resp, err = req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].ErrorCode)
	view := c.ctl.View()
	assigned := view.Topics[len(view.Topics)-1]
	require.Equal(t, []Placement{
		{Partition: 0, Leader: 2, Epoch: 1, Replicas: []int32{0, 2}, ISR: []int32{0, 2}},
		{Partition: 1, Leader: 1, Epoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},
	}, assigned.Partitions)
}

// TestCreateTopicsRace: clients creating the same topic through different
// brokers at once: exactly one is told it created it, every other that it
// exists, and the topic has the partitions one of them asked for.
func TestCreateTopicsRace(t *testing.T) {
	c := startCluster(t, "t", 1)
	const racers = 12
	var wg sync.WaitGroup
	codes := make(chan int16, racers)
	for i := range racers {
		wg.Go(func() {
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.view.Brokers[i%3].Kafka))
			if err != nil {
				codes <- -1
				return
			}
			defer cl.Close()
			req := kmsg.NewPtrCreateTopicsRequest()
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "raced", int32(1+i%4), 3
			req.Topics = append(req.Topics, rt)
			resp, err := cl.Broker(i%3).Request(context.Background(), req)
			if err != nil {
				codes <- -1
				return
			}
			codes <- resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
		})
	}
	wg.Wait()
	close(codes)
	count := make(map[int16]int)
	for code := range codes {
		count[code]++
	}
	require.Equal(t, map[int16]int{0: 1, kerr.TopicAlreadyExists.Code: racers - 1}, count)
	for _, b := range c.brokers {
		_, topics := b.clusterView()
		require.Contains(t, topics, "raced", "broker %d", b.cfg.ID)
	}
}

// TestCreateTopicsWithoutController: a view naming no controller makes
// topic creation fail at once, not hang.
func TestCreateTopicsWithoutController(t *testing.T) {
	c := startCluster(t, "t", 1)
	require.NoError(t, c.ctl.Update(t.Context(), func(v *Cluster) { v.Controller = "" }))
	resp, err := kadm.NewClient(rawClient(t, c)).CreateTopic(t.Context(), 1, 1, nil, "new")
	require.ErrorIs(t, err, kerr.InvalidRequest)
	require.Contains(t, resp.ErrMessage, "names no controller")
}

// TestPlaceTopic: replicas alternate racks, so rf of them are in rf
// racks while there are that many, and leadership goes round the brokers.
func TestPlaceTopic(t *testing.T) {
	var brokers []BrokerInfo
	for id := range int32(6) { // two brokers in each of three racks
		brokers = append(brokers, BrokerInfo{ID: id, AZ: fmt.Sprintf("az%d", id%3)})
	}
	rack := func(id int32) string { return brokers[id].AZ }
	top := PlaceTopic("t", 12, 3, brokers)
	leaders := make(map[int32]int)
	for _, p := range top.Partitions {
		racks := make(map[string]bool)
		for _, r := range p.Replicas {
			racks[rack(r)] = true
		}
		require.Len(t, racks, 3, "partition %d on %v", p.Partition, p.Replicas)
		require.Contains(t, p.Replicas, p.Leader)
		require.Equal(t, int32(1), p.Epoch)
		leaders[p.Leader]++
	}
	require.Equal(t, map[int32]int{0: 2, 1: 2, 2: 2, 3: 2, 4: 2, 5: 2}, leaders)

	// Three brokers in three racks, all replicas: partition p led by
	// broker p % 3, as the example's clusters start.
	three := PlaceTopic("t", 4, 3, brokers[:3])
	for _, p := range three.Partitions {
		require.Equal(t, p.Partition%3, p.Leader)
		require.Equal(t, []int32{0, 1, 2}, p.Replicas)
	}
}

// TestFindCoordinator: consumer groups are refused at once, with a
// reason, by raw FindCoordinator at every version served and by kgo's
// group consumer, which reports it from PollFetches instead of waiting.
func TestFindCoordinator(t *testing.T) {
	c := startCluster(t, "t", 1)
	for _, v := range []int16{0, 3, 4} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.SetVersion(v)
		req.CoordinatorKey, req.CoordinatorKeys = "g", []string{"g", "h"}
		resp := kmsg.NewPtrFindCoordinatorResponse()
		resp.SetVersion(v)
		body := rawRequestOn(t, c, req)
		if resp.IsFlexible() {
			body = body[1:]
		}
		require.NoError(t, resp.ReadFrom(body))
		if v < 4 {
			require.Equal(t, kerr.InvalidRequest.Code, resp.ErrorCode, "v%d", v)
			continue
		}
		require.Len(t, resp.Coordinators, 2)
		for _, co := range resp.Coordinators {
			require.Equal(t, kerr.InvalidRequest.Code, co.ErrorCode)
			require.Equal(t, noCoordinator, *co.ErrorMessage)
		}
	}

	group, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"))
	require.NoError(t, err)
	defer group.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var groupErr error
	for groupErr == nil && ctx.Err() == nil {
		for _, fe := range group.PollFetches(ctx).Errors() {
			if ctx.Err() == nil {
				groupErr = fe.Err
			}
		}
	}
	require.ErrorIs(t, groupErr, kerr.InvalidRequest)
}
