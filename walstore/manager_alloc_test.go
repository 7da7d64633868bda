package walstore_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// A coalesced GET whose first section is many small batches and whose
// next is one large batch must not size the shared batch array from the
// first section's density: that allocates a Batch (56 bytes) for every
// few bytes of the rest of the read.
func TestManagerFetchBatchArrayNotSizedFromFirstSection(t *testing.T) {
	ctx := context.Background()
	_, local, peer := newStores(t)
	w, err := walstore.NewManager(walstore.ManagerConfig{Store: local})
	require.NoError(t, err)
	defer w.Close()
	small := walstore.CopyInput{Partition: metadata.TopicPartition{Topic: "logs", Partition: 0}, PublisherEpoch: 3}
	for off := range int64(2000) {
		small.Batches = append(small.Batches, storage.Batch{Epoch: 3, FirstOffset: off, LastOffset: off, MaxTimestamp: 1, Data: []byte{byte(off)}})
	}
	big := make([]byte, 4<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	large := walstore.CopyInput{Partition: metadata.TopicPartition{Topic: "logs", Partition: 1}, PublisherEpoch: 3,
		Batches: []storage.Batch{{Epoch: 3, FirstOffset: 0, LastOffset: 0, MaxTimestamp: 1, Data: big}}}
	entries, err := w.Copy(ctx, []walstore.CopyInput{small, large})
	require.NoError(t, err)
	require.Less(t, entries[0].Position, entries[1].Position)
	r, err := walstore.NewManager(walstore.ManagerConfig{Store: peer})
	require.NoError(t, err)
	defer r.Close()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := r.Fetch(ctx, entries)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.NoError(t, res[1].Err)
	require.Len(t, res[0].Batches, 2000)
	require.Len(t, res[1].Batches, 1)
	read := entries[0].Length + entries[1].Length
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("read %d bytes, allocated %d", read, allocated)
	require.Less(t, allocated, uint64(4*read), "a Fetch of %d bytes allocated %d", read, allocated)
}
