package broker

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

// threeBrokers is a view of brokers 0, 1 and 2 at incarnations a, b, c,
// with one partition of topic t placed as pl.
func threeBrokers(pl Placement, live ...int32) Cluster {
	v := Cluster{Topics: []Topic{{Name: "t", Partitions: []Placement{pl}}}}
	for _, id := range live {
		v.Brokers = append(v.Brokers, BrokerInfo{ID: id, AZ: fmt.Sprintf("az%d", id), Kafka: "k", Control: "c", Incarnation: string(rune('a' + id))})
	}
	return v
}

// TestControllerElectsOnlyInSync: what the controller makes of a broker's
// failure and of its registration, partition by partition: a leader only
// ever from the in-sync replicas, the last of them kept, a restarted
// broker in no in-sync set unless it is that last one.
func TestControllerElectsOnlyInSync(t *testing.T) {
	all := []int32{0, 1, 2}
	for _, c := range []struct {
		name   string
		pl     Placement
		live   []int32
		change func(*Cluster)
		want   Placement
	}{
		{
			name:   "the leader fails: an in-sync follower leads at the next epoch",
			pl:     Placement{Leader: 0, Epoch: 3, Replicas: all, ISR: all, PartitionEpoch: 5},
			live:   all,
			change: func(v *Cluster) { v.fail(0) },
			want:   Placement{Leader: 1, Epoch: 4, Replicas: all, ISR: []int32{1, 2}, PartitionEpoch: 6},
		},
		{
			name:   "the leader fails and the only live follower is out of sync: no leader, the last in-sync replica kept",
			pl:     Placement{Leader: 0, Epoch: 3, Replicas: all, ISR: []int32{0}, PartitionEpoch: 5},
			live:   all,
			change: func(v *Cluster) { v.fail(0) },
			want:   Placement{Leader: -1, Epoch: 4, Replicas: all, ISR: []int32{0}, PartitionEpoch: 6},
		},
		{
			name:   "a follower fails: it leaves the in-sync set, the leader stays at its epoch",
			pl:     Placement{Leader: 0, Epoch: 3, Replicas: all, ISR: all, PartitionEpoch: 5},
			live:   all,
			change: func(v *Cluster) { v.fail(2) },
			want:   Placement{Leader: 0, Epoch: 3, Replicas: all, ISR: []int32{0, 1}, PartitionEpoch: 6},
		},
		{
			name:   "an out-of-sync follower fails: nothing changes",
			pl:     Placement{Leader: 0, Epoch: 3, Replicas: all, ISR: []int32{0, 1}, PartitionEpoch: 5},
			live:   all,
			change: func(v *Cluster) { v.fail(2) },
			want:   Placement{Leader: 0, Epoch: 3, Replicas: all, ISR: []int32{0, 1}, PartitionEpoch: 5},
		},
		{
			name:   "the last in-sync replica returns: it leads",
			pl:     Placement{Leader: -1, Epoch: 4, Replicas: all, ISR: []int32{0}, PartitionEpoch: 6},
			live:   []int32{1, 2},
			change: func(v *Cluster) { v.register(BrokerInfo{ID: 0, Kafka: "k", Control: "c", Incarnation: "a2"}) },
			want:   Placement{Leader: 0, Epoch: 5, Replicas: all, ISR: []int32{0}, PartitionEpoch: 7},
		},
		{
			name:   "an out-of-sync replica returns to a partition without a leader: still none",
			pl:     Placement{Leader: -1, Epoch: 4, Replicas: all, ISR: []int32{0}, PartitionEpoch: 6},
			live:   []int32{2},
			change: func(v *Cluster) { v.register(BrokerInfo{ID: 1, Kafka: "k", Control: "c", Incarnation: "b2"}) },
			want:   Placement{Leader: -1, Epoch: 4, Replicas: all, ISR: []int32{0}, PartitionEpoch: 6},
		},
		{
			name:   "a restart the controller did not notice: the old run fails first, the new one is in no in-sync set",
			pl:     Placement{Leader: 0, Epoch: 3, Replicas: all, ISR: all, PartitionEpoch: 5},
			live:   all,
			change: func(v *Cluster) { v.register(BrokerInfo{ID: 0, Kafka: "k", Control: "c", Incarnation: "a2"}) },
			want:   Placement{Leader: 1, Epoch: 4, Replicas: all, ISR: []int32{1, 2}, PartitionEpoch: 6},
		},
		{
			name:   "the same run registering again: nothing changes",
			pl:     Placement{Leader: 0, Epoch: 3, Replicas: all, ISR: all, PartitionEpoch: 5},
			live:   all,
			change: func(v *Cluster) { v.register(BrokerInfo{ID: 0, Kafka: "k", Control: "c", Incarnation: "a"}) },
			want:   Placement{Leader: 0, Epoch: 3, Replicas: all, ISR: all, PartitionEpoch: 5},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := threeBrokers(c.pl, c.live...)
			require.NoError(t, v.validate())
			next := v.clone()
			c.change(&next)
			require.NoError(t, next.validate())
			assert.Equal(t, c.want, next.Topics[0].Partitions[0])
		})
	}
}

// TestAlterPartition: the controller's decisions on leaders' proposals of
// in-sync sets, and that it posts the view only when one changed it.
func TestAlterPartition(t *testing.T) {
	all := []int32{0, 1, 2}
	base := Placement{Leader: 0, Epoch: 3, Replicas: all, ISR: []int32{0, 1}, PartitionEpoch: 5}
	propose := func(change func(*AlterPartition)) AlterPartition {
		r := AlterPartition{Topic: "t", Partition: 0, Leader: 0, LeaderEpoch: 3, PartitionEpoch: 5}
		change(&r)
		return r
	}
	for _, c := range []struct {
		name    string
		req     AlterPartition
		live    []int32
		code    int16
		wantISR []int32
		wantPE  int32
	}{
		{"a shrink", propose(func(r *AlterPartition) { r.ISR = []int32{0} }), all, 0, []int32{0}, 6},
		{"a join", propose(func(r *AlterPartition) { r.ISR, r.Joining = all, []ReplicaRef{{2, "c"}} }), all, 0, all, 6},
		{"a join judged on an earlier run", propose(func(r *AlterPartition) { r.ISR, r.Joining = all, []ReplicaRef{{2, "c0"}} }), all, kerr.IneligibleReplica.Code, []int32{0, 1}, 5},
		{"a join without the joiner's run", propose(func(r *AlterPartition) { r.ISR = all }), all, kerr.IneligibleReplica.Code, []int32{0, 1}, 5},
		{"a join of a broker that is down", propose(func(r *AlterPartition) { r.ISR, r.Joining = all, []ReplicaRef{{2, "c"}} }), []int32{0, 1}, kerr.IneligibleReplica.Code, []int32{0, 1}, 5},
		{"from an earlier leader epoch", propose(func(r *AlterPartition) { r.LeaderEpoch, r.ISR = 2, []int32{0} }), all, kerr.FencedLeaderEpoch.Code, []int32{0, 1}, 5},
		{"from a broker that does not lead", propose(func(r *AlterPartition) { r.Leader, r.ISR = 1, []int32{1} }), all, kerr.FencedLeaderEpoch.Code, []int32{0, 1}, 5},
		{"from an earlier partition epoch", propose(func(r *AlterPartition) { r.PartitionEpoch, r.ISR = 4, []int32{0} }), all, kerr.InvalidUpdateVersion.Code, []int32{0, 1}, 5},
		{"from an earlier partition epoch, the set it has", propose(func(r *AlterPartition) { r.PartitionEpoch, r.ISR = 4, []int32{1, 0} }), all, 0, []int32{0, 1}, 5},
		{"without the leader", propose(func(r *AlterPartition) { r.ISR = []int32{1} }), all, kerr.InvalidRequest.Code, []int32{0, 1}, 5},
		{"with a broker that is not a replica", propose(func(r *AlterPartition) { r.ISR, r.Joining = []int32{0, 1, 3}, []ReplicaRef{{3, "d"}} }), all, kerr.InvalidRequest.Code, []int32{0, 1}, 5},
		{"of an unknown partition", propose(func(r *AlterPartition) { r.Partition, r.ISR = 7, []int32{0} }), all, kerr.UnknownTopicOrPartition.Code, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var posts atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				posts.Add(1)
				w.WriteHeader(http.StatusNoContent)
			}))
			defer srv.Close()
			v := threeBrokers(base, c.live...)
			for i := range v.Brokers {
				v.Brokers[i].Control = strings.TrimPrefix(srv.URL, "http://")
			}
			ctl, err := NewController(v)
			require.NoError(t, err)
			defer ctl.CloseIdleConnections()
			a := ctl.AlterPartition(t.Context(), []AlterPartition{c.req})
			require.Len(t, a, 1)
			assert.Equal(t, c.code, a[0].Code, "%s", a[0].Message)
			assert.Equal(t, c.wantISR, a[0].Placement.ISR)
			assert.Equal(t, c.wantPE, a[0].Placement.PartitionEpoch)
			got := ctl.View().Topics[0].Partitions[0]
			assert.Equal(t, []int32{0, 1}, base.ISR, "the base placement was changed")
			if c.code == 0 && c.wantPE > base.PartitionEpoch {
				assert.Equal(t, c.wantISR, got.ISR)
				assert.Equal(t, int32(len(c.live)), posts.Load(), "every live broker gets the new view")
			} else {
				assert.Equal(t, base, got)
				assert.Zero(t, posts.Load(), "the view was posted though nothing changed")
			}
		})
	}
}

// isrOf returns the controller's in-sync set of tp and its partition
// epoch.
func (c *testCluster) isrOf(tp metadata.TopicPartition) ([]int32, int32) {
	pl := c.ctl.View().Topics[0].Partitions[tp.Partition]
	return pl.ISR, pl.PartitionEpoch
}

// TestInSyncSet: a follower that stops reporting holds acks=all back
// only until its leader, after ReplicaLagTime, has the controller take it
// out of the in-sync set; restarted on its log, it registers, follows,
// and its leader has it join again once it has caught up; every broker
// then holds the same log.
func TestInSyncSet(t *testing.T) {
	c := startCluster(t, "t", 1, withLagTime(2*time.Second))
	tp := metadata.TopicPartition{Topic: "t", Partition: 0} // led by broker 0
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic("t"), kgo.MetadataMinAge(10*time.Millisecond))
	require.NoError(t, err)
	defer prod.Close()
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			require.NoError(t, prod.ProduceSync(t.Context(), &kgo.Record{Value: fmt.Appendf(nil, "%05d", i)}).FirstErr())
		}
	}
	produce(0, 100)
	isr, pe := c.isrOf(tp)
	require.Equal(t, []int32{0, 1, 2}, isr)

	// Broker 2 stops; nobody tells the controller.
	c.stops[2]()
	produce(100, 200)
	isr, pe2 := c.isrOf(tp)
	require.Equal(t, []int32{0, 1}, isr, "acks=all went on with broker 2 in the in-sync set")
	require.Greater(t, pe2, pe)
	require.Equal(t, int32(1), c.ctl.View().Topics[0].Partitions[0].Epoch, "the leader changed")
	adm := kadm.NewClient(prod)
	md, err := adm.Metadata(t.Context(), "t")
	require.NoError(t, err)
	require.Equal(t, []int32{0, 1}, md.Topics["t"].Partitions[0].ISR, "Metadata's in-sync replicas")

	// Broker 2 restarts on its log and registers itself.
	b2 := c.startBroker(t, 2, c.view.Controller)
	require.Eventually(t, func() bool { return b2.Status().Registered }, 10*time.Second, 10*time.Millisecond)
	if !assert.Eventually(t, func() bool {
		isr, _ := c.isrOf(tp)
		return len(isr) == 3
	}, 30*time.Second, 10*time.Millisecond) {
		e2, _ := c.logs[2].EndOffset(tp)
		e0, _ := c.logs[0].EndOffset(tp)
		t.Fatalf("broker 2 did not rejoin the in-sync set: its log ends at %d, the leader's at %d", e2, e0)
	}
	produce(200, 300)
	require.Eventually(t, func() bool {
		e0, _ := c.logs[0].EndOffset(tp)
		e2, _ := c.logs[2].EndOffset(tp)
		return e0 == 300 && e2 == 300
	}, 30*time.Second, 10*time.Millisecond)
	want := readAll(t, c, 0, tp)
	for id := 1; id < 3; id++ {
		require.Equal(t, want, readAll(t, c, id, tp), "broker %d's log", id)
	}
}

// readAll returns every batch's bytes of tp in broker id's log.
func readAll(t *testing.T, c *testCluster, id int, tp metadata.TopicPartition) [][]byte {
	t.Helper()
	var out [][]byte
	for off := int64(0); ; {
		bs, err := c.logs[id].Read(context.Background(), tp, off, 1<<20)
		require.NoError(t, err)
		if len(bs) == 0 {
			return out
		}
		for _, b := range bs {
			out = append(out, b.Data)
		}
		off = bs[len(bs)-1].LastOffset + 1
	}
}

// TestRestartLeadsNothing: a broker restarted on its log before the
// controller noticed, given the view that still names its previous run
// the leader, leads nothing; once it registers, the controller moves that
// leadership to an in-sync replica and the broker follows it, outside
// the in-sync set until its leader has it join.
func TestRestartLeadsNothing(t *testing.T) {
	c := startCluster(t, "t", 3)
	tp := metadata.TopicPartition{Topic: "t", Partition: 0} // led by broker 0
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer prod.Close()
	for p := range int32(2) { // partition 2 stays empty
		require.NoError(t, prod.ProduceSync(t.Context(), &kgo.Record{Partition: p, Value: []byte("before")}).FirstErr())
	}

	c.stops[0]()
	b0 := c.startBroker(t, 0, "")
	// Before any view, it knows no topic, and says so as a broker that
	// just started: clients retry, instead of failing the records.
	fresh, err := kgo.NewClient(kgo.SeedBrokers(b0.Info().Kafka))
	require.NoError(t, err)
	defer fresh.Close()
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("t")
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(t.Context(), fresh)
	require.NoError(t, err)
	require.Equal(t, kerr.LeaderNotAvailable.Code, mresp.Topics[0].ErrorCode)
	_, _, _, err = b0.produce(t.Context(), tp, producedBatch{})
	require.ErrorIs(t, err, errNotLeader)

	old := c.ctl.View()
	require.NoError(t, b0.applyCluster(t.Context(), old))
	st := b0.Status()
	require.False(t, st.Registered)
	for _, ps := range st.Partitions {
		want := "follower"
		if ps.Partition == 0 {
			want = "none"
		}
		require.Equal(t, want, ps.Role, "partition %d", ps.Partition)
	}
	_, _, _, err = b0.produce(t.Context(), tp, producedBatch{})
	require.ErrorIs(t, err, errNotLeader)

	require.NoError(t, c.ctl.Register(t.Context(), b0.Info()))
	pl := c.ctl.View().Topics[0].Partitions[0]
	require.NotEqual(t, int32(0), pl.Leader)
	require.Equal(t, old.Topics[0].Partitions[0].Epoch+1, pl.Epoch)
	require.NotContains(t, pl.ISR, int32(0))
	require.True(t, b0.Status().Registered)
	require.Equal(t, "follower", b0.Status().Partitions[0].Role)
	// Nothing was produced while it was down: it has caught up, and
	// rejoins every in-sync set, that of the empty partition too, whose
	// other followers never reported a record (no high watermark).
	if !assert.Eventually(t, func() bool {
		for _, pl := range c.ctl.View().Topics[0].Partitions {
			if len(pl.ISR) != 3 {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond) {
		t.Fatalf("broker 0 did not rejoin every in-sync set: %+v", c.ctl.View().Topics[0].Partitions)
	}
	for p := range int32(3) {
		require.NoError(t, prod.ProduceSync(t.Context(), &kgo.Record{Partition: p, Value: []byte("after")}).FirstErr())
	}
}

// TestFalselyFailed: a broker the controller wrongly takes for dead gets
// the view that no longer lists it, gives up its leadership, registers
// again, and rejoins every in-sync set; production goes on throughout.
func TestFalselyFailed(t *testing.T) {
	c := startCluster(t, "t", 3, withRegistration())
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(10*time.Millisecond))
	require.NoError(t, err)
	defer prod.Close()
	produce := func(value string) {
		t.Helper()
		for p := range int32(3) {
			require.NoError(t, prod.ProduceSync(t.Context(), &kgo.Record{Partition: p, Value: []byte(value)}).FirstErr())
		}
	}
	produce("before")
	require.NoError(t, c.ctl.BrokerFailed(t.Context(), 0))
	produce("while out")
	require.Eventually(t, func() bool {
		v := c.ctl.View()
		for _, pl := range v.Topics[0].Partitions {
			if len(pl.ISR) != 3 {
				return false
			}
		}
		return len(v.Brokers) == 3 && c.brokers[0].Status().Registered
	}, 30*time.Second, 10*time.Millisecond, "broker 0 did not register again and rejoin")
	pl := c.ctl.View().Topics[0].Partitions[0]
	require.NotEqual(t, int32(0), pl.Leader, "broker 0 was elected though it had left the in-sync set")
	require.Equal(t, "follower", c.brokers[0].Status().Partitions[0].Role)
	produce("after")
	for p := range int32(3) {
		tp := metadata.TopicPartition{Topic: "t", Partition: p}
		require.Eventually(t, func() bool {
			e, _ := c.logs[0].EndOffset(tp)
			return e == 3
		}, 30*time.Second, 10*time.Millisecond)
		require.Equal(t, readAll(t, c, 1, tp), readAll(t, c, 0, tp), "partition %d", p)
	}
}
