package walstore_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// TestFollowerDropsAnEpochItNeverWrote: a broker made leader at epoch 6
// that lost the leadership before writing anything keeps epoch 6 in its
// epoch cache, starting at its log end. As a follower of epoch 7, whose
// leader republishes epoch 5's records past that point, it must drop the
// empty epoch (as Kafka's follower truncation does) rather than hold every
// epoch-5 entry for good because its log looks ahead of them.
func TestFollowerDropsAnEpochItNeverWrote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		tp := metadata.TopicPartition{Topic: "t", Partition: 0}
		batch := func(epoch int32, first, last int64) storage.Batch {
			return storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, MaxTimestamp: 1_000_000 + last, Data: []byte{byte(epoch), byte(first), byte(last)}}
		}
		w := newWorld(t)
		log2, log3 := memstore.NewLocalLog(), memstore.NewLocalLog()
		for _, l := range []*memstore.LocalLog{log2, log3} {
			require.NoError(t, l.Truncate(ctx, tp, 100))
		}
		// Both replicated epoch 5 from an old leader; broker 3 got further.
		require.NoError(t, log2.Append(ctx, tp, []storage.Batch{batch(5, 100, 149)}))
		require.NoError(t, log3.Append(ctx, tp, []storage.Batch{batch(5, 100, 149), batch(5, 150, 159)}))
		// Broker 2 led epoch 6 from 150 and lost it before writing anything.
		require.NoError(t, log2.AssignEpoch(tp, 6, 150))
		// Broker 3 leads epoch 7 from 160 and republishes from 100.
		require.NoError(t, log3.AssignEpoch(tp, 7, 160))

		nodes := map[int32]*walstore.Node{
			2: w.start(2, walstore.NodeConfig{Local: log2}),
			3: w.start(3, walstore.NodeConfig{Local: log3}),
		}
		require.NoError(t, nodes[3].BecomeLeader(ctx, tp, 7, []int32{2}, 100))
		require.NoError(t, nodes[2].BecomeFollower(ctx, tp, 7, 3))
		b := batch(7, 160, 169)
		require.NoError(t, log3.Append(ctx, tp, []storage.Batch{b}))
		require.NoError(t, nodes[3].Append(ctx, tp, b))
		time.Sleep(2 * time.Second)
		synctest.Wait()

		require.Equal(t, log3.Batches(tp), log2.Batches(tp), "broker 2's log, which should be broker 3's")
		e2, err := log2.Epochs(tp)
		require.NoError(t, err)
		e3, err := log3.Epochs(tp)
		require.NoError(t, err)
		require.Equal(t, e3, e2, "epoch caches")
	})
}
