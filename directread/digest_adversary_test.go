package directread_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/directread"
	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// Adversarial tests of the digests a Reader checks: seeks, restarts and
// a zombie's entries never make a false mismatch, and a Reader that
// yields records differing from its leader's log says so.

// threeBrokers is cluster's with all three brokers: broker 1 leads tp at
// epoch 1, 2 and 3 follow.
func threeBrokers(t *testing.T) (*clustertest.Cluster, metadata.TopicPartition, [4]*clustertest.Broker) {
	c := clustertest.New(t, clustertest.Mem(), 4)
	var b [4]*clustertest.Broker
	b[1], b[2], b[3] = c.AddBroker(1, "az1"), c.AddBroker(2, "az2"), c.AddBroker(3, "az3")
	tp := metadata.TopicPartition{Topic: "orders", Partition: 0}
	c.SetReplicas(tp, 1, 2, 3)
	c.SetLeader(tp, 1, 1)
	b[1].StartLeader(walstore.NodeConfig{})
	b[1].BecomeLeader(context.Background(), tp, 1, -1)
	b[2].StartFollower(tp)
	b[3].StartFollower(tp)
	return c, tp, b
}

// pollDigests polls r until tp's position reaches until, and returns what
// it yielded and the mismatches reported; any other error fails.
func pollDigests(t *testing.T, r *directread.Reader, tp metadata.TopicPartition, until int64) ([]storage.Batch, []*digest.Mismatch) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []storage.Batch
	var ms []*digest.Mismatch
	for {
		if next, _ := r.Position(tp); next >= until {
			return got, ms
		}
		f, err := r.Poll(ctx)
		require.NoError(t, err)
		for _, e := range f.Errors {
			var m *digest.Mismatch
			require.True(t, errors.As(e, &m), "only mismatches expected: %v", e)
			require.ErrorIs(t, e, digest.ErrMismatch)
			ms = append(ms, m)
		}
		for _, b := range f.Batches {
			got = append(got, b.Batch)
		}
	}
}

// A zombie (broker 1, never told it lost epoch 1) goes on publishing
// other records at the offsets epoch 2's leader writes; Readers that
// seek back and forth over both epochs, and Readers started anew at any
// offset, yield the leader's log and never report a mismatch. The zombie
// stays in the replicas and holds the commit back, so the Readers serve
// what is published (Durable).
func TestDigestReaderSeeksAndZombieNoFalseMismatch(t *testing.T) {
	c, tp, b := threeBrokers(t)
	r1, r2 := b[1], b[2]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r1.Produce(ctx, tp, 1, 0, 49, 10)
	require.NoError(t, r1.Node.WaitReplicated(ctx, tp, 1, 49))
	r2.BecomeLeader(ctx, tp, 2, -1)
	r1.Produce(ctx, tp, 1, 50, 99, 10) // the zombie's
	require.NoError(t, r1.Node.WaitDurable(ctx, tp, 1, 99), "the zombie's uploads succeed")
	r2.Produce(ctx, tp, 2, 50, 89, 10)
	// Broker 3 follows epoch 2; the zombie, still in the replicas, never
	// will: what the Readers yield is broker 3's.
	clustertest.RequireConverges(t, b[3], r2, tp)
	log := r2.Local.Batches(tp)

	r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tp: 0}, Durable: true})
	require.NoError(t, err)
	defer r.Close()
	got, ms := pollDigests(t, r, tp, 90)
	require.Empty(t, ms)
	clustertest.RequireSameLog(t, log, got)
	for _, to := range []int64{20, 60, 0, 80, 50, 10} {
		t.Logf("Seek(%d)", to)
		require.NoError(t, r.Seek(tp, to))
		got, ms := pollDigests(t, r, tp, 90)
		require.Empty(t, ms, "after Seek(%d)", to)
		clustertest.RequireSameLog(t, log[to/10:], got)
	}
	st := r.Stats()
	t.Logf("stats after seeks: checks %d taken %d mismatches %d", st.DigestChecks, st.DigestsTaken, st.DigestMismatches)
	require.Positive(t, st.DigestChecks)
	require.Zero(t, st.DigestMismatches)

	// Restarts: a new Reader at each offset.
	for _, from := range []int64{0, 30, 50, 70} {
		r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tp: from}, Durable: true})
		require.NoError(t, err)
		got, ms := pollDigests(t, r, tp, 90)
		st := r.Stats()
		require.NoError(t, r.Close())
		require.Empty(t, ms, "a Reader started at %d", from)
		require.Zero(t, st.DigestMismatches, "a Reader started at %d", from)
		clustertest.RequireSameLog(t, log[from/10:], got)
	}
}

// A second broker told it leads epoch 1 too (an epoch handed out twice)
// writes other records at 0-19 and goes on at 20-39: a Reader that
// yielded the first leader's 0-19 and then the second's 20-39 (acks on
// upload) yields a log that is neither's, and must report a mismatch
// whose range holds an offset that differs.
func TestDigestReaderCatchesTwoLeadersAtOneEpoch(t *testing.T) {
	c, tps, r1 := cluster(t, 1)
	tp := tps[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r1.Produce(ctx, tp, 1, 0, 19, 10)
	require.NoError(t, r1.Node.WaitReplicated(ctx, tp, 1, 19))
	r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tp: 0}, Durable: true})
	require.NoError(t, err)
	defer r.Close()
	got, ms := pollDigests(t, r, tp, 20)
	require.Empty(t, ms)
	clustertest.RequireSameLog(t, r1.Local.Batches(tp), got)

	r4 := c.AddBroker(4, "az3")
	n4 := r4.Start(walstore.NodeConfig{})
	require.NoError(t, r4.Local.AssignEpoch(tp, 1, 0))
	// From an empty log, as broker 1 began: both chains begin at 0.
	require.NoError(t, n4.BecomeLeader(ctx, tp, 1, []int32{2, 3}, -1))
	for first := int64(0); first < 40; first += 10 {
		b := clustertest.MakeBatch(tp, 1, first, first+9)
		b.Data = bytes.ReplaceAll(b.Data, []byte("payload="), []byte("PAYLOAD="))
		require.NoError(t, r4.Local.Append(ctx, tp, []storage.Batch{b}))
		require.NoError(t, n4.Append(ctx, tp, b))
	}
	require.NoError(t, n4.WaitDurable(ctx, tp, 1, 39))

	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	defer pcancel()
	var more []storage.Batch
	for {
		if next, _ := r.Position(tp); next >= 40 {
			break
		}
		f, err := r.Poll(pctx)
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		require.NoError(t, err)
		for _, e := range f.Errors {
			var m *digest.Mismatch
			if errors.As(e, &m) {
				ms = append(ms, m)
			} else {
				t.Logf("error: %v", e)
			}
		}
		for _, b := range f.Batches {
			more = append(more, b.Batch)
		}
	}
	next, _ := r.Position(tp)
	st := r.Stats()
	t.Logf("reader at %d yielded %v; stats checks %d taken %d mismatches %d; mismatches %+v",
		next, clustertest.Describe(more), st.DigestChecks, st.DigestsTaken, st.DigestMismatches, ms)
	if next <= 20 {
		t.Skip("the Reader took none of the second leader's records: nothing diverged in what it yielded")
	}
	require.NotEmpty(t, ms, "the Reader yielded the first leader's 0-19 and the second's 20-%d", next-1)
	require.Equal(t, uint64(len(ms)), st.DigestMismatches)
	covered := false
	for _, m := range ms {
		require.Equal(t, tp, m.Partition)
		assert.Less(t, m.From, m.To)
		covered = covered || m.From < 20
	}
	assert.True(t, covered, "a mismatch's range holds the offsets 0-19 that differ: %+v", ms)
}
