package clustertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/directread"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Stores returns the object store of every AZ a broker is in, as a
// direct reader in another AZ reads them (through the cluster's faults
// and GET counts).
func (c *Cluster) Stores() map[string]storage.ObjectStore {
	out := make(map[string]storage.ObjectStore)
	for _, b := range c.Cluster.Brokers() {
		// By the AZ the store names in its objects' references, which
		// a backend may spell otherwise than the broker's AZ (S3
		// Express's AZ IDs).
		out[b.Store.Local().AZ] = b.Store
	}
	return out
}

// RequireReaderConsistent reads tp from offset from with a direct reader
// until it has yielded every record below leader's high watermark, and
// requires what it yielded to equal leader's log there byte for byte:
// a reader serves the committed log and nothing else. inSync, if given,
// is the leader's in-sync set (followers that are down are not in it).
func RequireReaderConsistent(t *testing.T, c *Cluster, leader *Broker, tp metadata.TopicPartition, from int64, inSync ...int32) {
	t.Helper()
	if inSync != nil {
		require.NoError(t, leader.Node.SetInSync(tp, inSync))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var hw int64
	require.Eventually(t, func() bool { hw = leader.Node.HighWatermark(tp); return hw > from }, 20*time.Second, 5*time.Millisecond,
		"the leader's high watermark never passed %d", from)
	r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tp: from}})
	require.NoError(t, err)
	defer r.Close()
	var got []storage.Batch
	for {
		next, _ := r.Position(tp)
		if next >= hw {
			break
		}
		f, err := r.Poll(ctx)
		require.NoError(t, err, "reader at %d, high watermark %d, yielded %s", next, hw, Describe(got))
		require.Empty(t, f.Errors)
		for _, b := range f.Batches {
			got = append(got, b.Batch)
		}
	}
	// The leader may have committed more since hw was read, and the
	// reader served it: compare up to where the reader got, which the
	// high watermark, never going back, must cover.
	end, _ := r.Position(tp)
	require.LessOrEqual(t, end, leader.Node.HighWatermark(tp), "the reader went past the high watermark")
	var want []storage.Batch
	for _, b := range leader.Local.Batches(tp) {
		if b.LastOffset >= from && b.FirstOffset < end {
			want = append(want, b)
		}
	}
	RequireSameLog(t, want, got)
}
