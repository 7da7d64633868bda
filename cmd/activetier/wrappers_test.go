package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/harness/memtest"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/storage/storagetest"
)

// The demo's store wrappers keep the contract and the optional interfaces
// of what they wrap: the brokers' followers read into pooled buffers on
// every --store backend, as they would without the counting, and every
// read is counted.
func TestStoreWrappersConformance(t *testing.T) {
	calls := newStoreCalls([]string{"az1", "az2"}, map[string]string{"az1": "b1", "az2": "b2"}, false)
	t.Run("counting", func(t *testing.T) {
		storagetest.RunWrapper(t, memtest.Harness(), func(s storage.ObjectStore) storage.ObjectStore {
			return newCountingStore(s, calls)
		}, storagetest.ManyKeys(50))
	})
	var fleet requestCounters
	t.Run("reader", func(t *testing.T) {
		storagetest.RunWrapper(t, memtest.Harness(), func(s storage.ObjectStore) storage.ObjectStore {
			return (&readerStore{ObjectStore: s, fleet: &fleet}).reading()
		}, storagetest.ManyKeys(50))
	})
	for _, c := range []requestCounts{calls.requests(), fleet.load()} {
		require.Positive(t, c.gets)
		require.Positive(t, c.bytesDown)
	}
	c := calls.requests()
	require.Equal(t, c.puts, c.putsStored+c.putsFailed+c.putsGivenUp, "every Put stored, failed or given up on: %+v", c)
}
