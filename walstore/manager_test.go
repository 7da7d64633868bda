package walstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/clustertest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/walstore"
)

func newStores(t *testing.T) (*memstore.Cluster, walstore.ObjectStore, walstore.ObjectStore) {
	t.Helper()
	c, err := memstore.NewCluster(memstore.ClusterConfig{
		Buckets: map[string]string{"az1": "bucket-az1", "az2": "bucket-az2"},
	})
	require.NoError(t, err)
	local, err := c.Store("az1")
	require.NoError(t, err)
	peer, err := c.Store("az2")
	require.NoError(t, err)
	return c, local, peer
}

func copyInputs(n int, batchesPer int) []walstore.CopyInput {
	inputs := make([]walstore.CopyInput, n)
	for i := range inputs {
		tp := metadata.TopicPartition{Topic: "logs", Partition: int32(i)}
		in := walstore.CopyInput{Partition: tp, PublisherEpoch: 3}
		for b := range batchesPer {
			first := int64(1000*i + 10*b)
			in.Batches = append(in.Batches, clustertest.MakeBatch(tp, 3, first, first+9))
		}
		inputs[i] = in
	}
	return inputs
}

func TestManagerCopyFetchRoundTrip(t *testing.T) {
	ctx := context.Background()
	_, local, peer := newStores(t)
	for _, codec := range []metadata.Codec{metadata.CodecNone, metadata.CodecZstd, metadata.CodecS2} {
		t.Run(codec.String(), func(t *testing.T) {
			w, err := walstore.NewManager(walstore.ManagerConfig{Store: local, BrokerID: 7, Codec: codec})
			require.NoError(t, err)
			defer w.Close()
			r, err := walstore.NewManager(walstore.ManagerConfig{Store: peer, BrokerID: 8})
			require.NoError(t, err)
			defer r.Close()

			inputs := copyInputs(5, 3)
			entries, err := w.Copy(ctx, inputs)
			require.NoError(t, err)
			require.Len(t, entries, 5)
			for i, e := range entries {
				assert.Equal(t, inputs[i].Partition, e.Partition)
				assert.Equal(t, int32(3), e.PublisherEpoch)
				assert.Equal(t, int32(7), e.WriterBrokerID)
				assert.Equal(t, "bucket-az1", e.Object.Bucket)
			}
			res, err := r.Fetch(ctx, entries)
			require.NoError(t, err)
			for i, fr := range res {
				require.NoError(t, fr.Err)
				clustertest.RequireSameLog(t, inputs[i].Batches, fr.Batches)
			}
		})
	}
}

func TestManagerCoalescesOneObjectIntoOneGet(t *testing.T) {
	ctx := context.Background()
	c, local, peer := newStores(t)
	w, err := walstore.NewManager(walstore.ManagerConfig{Store: local})
	require.NoError(t, err)
	defer w.Close()
	entries, err := w.Copy(ctx, copyInputs(10, 2))
	require.NoError(t, err)

	tests := []struct {
		name     string
		pick     []int
		gap      int64
		wantGets int64
	}{
		{"ten adjacent sections", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0, 1},
		{"holes within the gap", []int{0, 3, 9}, 0, 1},
		{"holes wider than the gap", []int{0, 3, 9}, -1, 3},
		{"adjacent pairs without gap", []int{0, 1, 5, 6}, -1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := walstore.NewManager(walstore.ManagerConfig{Store: peer, CoalesceGap: tt.gap})
			require.NoError(t, err)
			defer r.Close()
			var want []metadata.Entry
			for _, i := range tt.pick {
				want = append(want, entries[i])
			}
			c.ResetStats()
			res, err := r.Fetch(ctx, want)
			require.NoError(t, err)
			for _, fr := range res {
				require.NoError(t, fr.Err)
			}
			assert.Equal(t, tt.wantGets, c.Stats().Total.GetRequests)
		})
	}
}

func TestManagerFetchErrorsNameObjectAndPartition(t *testing.T) {
	ctx := context.Background()
	c, local, peer := newStores(t)
	w, err := walstore.NewManager(walstore.ManagerConfig{Store: local})
	require.NoError(t, err)
	defer w.Close()
	entries, err := w.Copy(ctx, copyInputs(2, 1))
	require.NoError(t, err)
	r, err := walstore.NewManager(walstore.ManagerConfig{Store: peer})
	require.NoError(t, err)
	defer r.Close()

	badChecksum := entries[0]
	badChecksum.Checksum ^= 1
	unknown := entries[0]
	unknown.Object.Bucket = "someone-elses-bucket"
	missing := entries[0]
	missing.Object.Key += ".gone"
	tests := []struct {
		name  string
		entry metadata.Entry
		down  bool
		want  error
	}{
		{"checksum mismatch", badChecksum, false, walstore.ErrCorrupt},
		{"unconfigured bucket", unknown, false, walstore.ErrUnknownBucket},
		{"missing object", missing, false, walstore.ErrNotFound},
		{"bucket down", entries[1], true, walstore.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, c.SetOutage("az1", tt.down))
			defer c.SetOutage("az1", false)
			res, err := r.Fetch(ctx, []metadata.Entry{tt.entry})
			require.NoError(t, err)
			var fe *walstore.FetchError
			require.ErrorAs(t, res[0].Err, &fe)
			assert.ErrorIs(t, res[0].Err, tt.want)
			assert.Contains(t, res[0].Err.Error(), tt.entry.Object.Key)
			assert.Contains(t, res[0].Err.Error(), tt.entry.Partition.String())
			assert.Empty(t, res[0].Batches)
		})
	}
}

func TestManagerDeleteIsIdempotent(t *testing.T) {
	ctx := context.Background()
	_, local, _ := newStores(t)
	m, err := walstore.NewManager(walstore.ManagerConfig{Store: local})
	require.NoError(t, err)
	defer m.Close()
	entries, err := m.Copy(ctx, copyInputs(1, 1))
	require.NoError(t, err)
	refs := []metadata.ObjectRef{entries[0].Object}
	require.NoError(t, m.Delete(ctx, refs))
	require.NoError(t, m.Delete(ctx, refs))
	res, err := m.Fetch(ctx, entries)
	require.NoError(t, err)
	assert.ErrorIs(t, res[0].Err, walstore.ErrNotFound)
}

func TestManagerConfigValidation(t *testing.T) {
	_, local, _ := newStores(t)
	tests := []struct {
		cfg  walstore.ManagerConfig
		want string
	}{
		{walstore.ManagerConfig{}, "Store"},
		{walstore.ManagerConfig{Store: local, BrokerID: -1}, "BrokerID"},
		{walstore.ManagerConfig{Store: local, Codec: 9}, "Codec"},
		{walstore.ManagerConfig{Store: local, FetchConcurrency: -2}, "FetchConcurrency"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := walstore.NewManager(tt.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
