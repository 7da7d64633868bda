package metering_test

import (
	"context"
	"fmt"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/storage"
)

// A broker wraps its object store (and its metadata log, with m.Log) in a
// Meter and passes the wrappers to walstore.NewNode. Here one combined
// object of two partitions is stored and one partition's section read: the
// PUT is split by section bytes, the GET goes to the partition it read.
func Example() {
	ctx := context.Background()
	m, _ := metering.New(metering.Config{Prices: costmodel.S3Express2025()})
	objects, _ := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "wal-az1"}})
	inner, _ := objects.Store("az1")
	store := m.Store(inner)

	enc, _ := combiner.NewEncoder(combiner.EncoderOptions{Codec: metadata.CodecNone})
	defer enc.Close()
	body, sections, _ := enc.Encode(nil, []combiner.SectionInput{
		{Partition: metadata.TopicPartition{Topic: "orders", Partition: 0}, Batches: []storage.Batch{{Epoch: 1, LastOffset: 9, Data: make([]byte, 3000)}}},
		{Partition: metadata.TopicPartition{Topic: "clicks", Partition: 0}, Batches: []storage.Batch{{Epoch: 1, LastOffset: 9, Data: make([]byte, 1000)}}},
	})
	ref, _ := store.Put(ctx, "object-1", body)
	_, _ = store.GetRange(ctx, ref, sections[0].Position, sections[0].Length)

	for _, c := range m.Snapshot().Ledger.Topics() {
		fmt.Printf("%s: %.2f PUTs, %.0f GETs\n", c.Partition.Topic, c.Share.Puts, c.Share.Gets)
	}
	// Output:
	// orders: 0.75 PUTs, 1 GETs
	// clicks: 0.25 PUTs, 0 GETs
}
