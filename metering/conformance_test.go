package metering_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/internal/harness/memtest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metadata/metadatatest"
	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

func newMeter(t testing.TB) *metering.Meter {
	m, err := metering.New(metering.Config{Prices: costmodel.S3Express2025()})
	require.NoError(t, err)
	return m
}

// The wrappers keep the contracts they wrap: the conformance suites pass
// through them, the store keeps the optional interfaces of what it wraps
// (a metered follower still reads into pooled buffers), and what the
// suites did is counted.
func TestStoreConformance(t *testing.T) {
	m := newMeter(t)
	storagetest.RunWrapper(t, memtest.Harness(), m.Store, storagetest.ManyKeys(50))
	s := m.Snapshot()
	for _, op := range s.Store {
		require.NotZero(t, op.Requests, "%s requests", op.Op)
	}
}

func TestLogConformance(t *testing.T) {
	m := newMeter(t)
	metadatatest.Run(t, func(t *testing.T, partitions int32) metadata.Log {
		l, err := memstore.NewLog(partitions)
		require.NoError(t, err)
		return m.Log(l)
	})
	s := m.Snapshot()
	require.NotZero(t, s.Log[0].Requests)
	require.NotZero(t, s.MetadataAppendedBytes)
}

// stallingStore's GetRange is a request that reaches the store and then
// waits for its caller to give up, as a hedged GET that lost does.
type stallingStore struct {
	storage.ObjectStore
	started chan struct{}
}

func (s stallingStore) GetRange(ctx context.Context, _ metadata.ObjectRef, _, _ int64) ([]byte, error) {
	s.started <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// A request cancelled in flight was sent, and is billed: it counts. One
// made with a context already done never left, and does not.
func TestCancelledInFlightCounts(t *testing.T) {
	m := newMeter(t)
	st := stallingStore{started: make(chan struct{}, 1)} // only GetRange is called
	s := m.Store(st)
	ref := metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: "k"}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-st.started; cancel() }()
	_, err := s.GetRange(ctx, ref, 0, 10)
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.GetRange(ctx, ref, 0, 10)
	require.Error(t, err)
	gets := m.Snapshot().Store[slices.Index(metering.StoreOps(), metering.OpGet)]
	require.Equal(t, uint64(1), gets.Requests)
	require.Equal(t, int64(1), m.Usage().Gets)
}
