package directread_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/directread"
	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// seekCluster returns a cluster whose partition holds records 0-99, in
// an object per ten, committed; the objects of 0-29 are deleted (tiered)
// and the rest retained.
func seekCluster(t *testing.T) (*clustertest.Cluster, metadata.TopicPartition, *clustertest.Broker) {
	c, tps, leader := cluster(t, 1)
	tp := tps[0]
	ctx := context.Background()
	leader.Node.ReportTiered(tp, 30)
	for first := int64(0); first < 100; first += 10 {
		leader.Produce(ctx, tp, 1, first, first+9, 10)
		require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, first+9))
		if first == 20 {
			n, err := leader.Node.CollectGarbage(ctx)
			require.NoError(t, err)
			require.Positive(t, n)
		}
	}
	return c, tp, leader
}

// A reader that read to 100 and seeks back to records whose objects are
// retained reads them again, however far back, and any number of times;
// a seek to records truly gone reports them gone, with where to resume,
// and a seek at the end or forward waits for what is to come.
func TestReaderSeekBack(t *testing.T) {
	c, tp, leader := seekCluster(t)
	tps := []metadata.TopicPartition{tp}
	log := leader.Local.Batches(tp)
	r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tp: 30}})
	require.NoError(t, err)
	defer r.Close()
	clustertest.RequireSameLog(t, log[3:], poll(t, r, tps, 100)[tp])

	for _, to := range []int64{30, 95, 50, 30, 99} {
		t.Logf("Seek(%d)", to)
		require.NoError(t, r.Seek(tp, to))
		clustertest.RequireSameLog(t, log[to/10:], poll(t, r, tps, 100)[tp])
	}

	// Back to records gone: reported, never skipped.
	require.NoError(t, r.Seek(tp, 10))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	gone := pollGone(ctx, t, r)
	require.Equal(t, int64(10), gone.Offset)
	require.Equal(t, int64(30), gone.ResumeHint)
	require.ErrorIs(t, gone, storage.ErrNotFound)
	require.NoError(t, r.Seek(tp, gone.ResumeHint))
	clustertest.RequireSameLog(t, log[3:], poll(t, r, tps, 100)[tp])

	// At the end, and forward: nothing until it is produced.
	for _, to := range []int64{100, 120} {
		require.NoError(t, r.Seek(tp, to))
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		f, err := r.Poll(pctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "nothing past 100 yet: %v", f)
	}
	leader.Produce(ctx, tp, 1, 100, 129, 10)
	require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, 129))
	clustertest.RequireSameLog(t, leader.Local.Batches(tp)[12:], poll(t, r, tps, 130)[tp])
}
