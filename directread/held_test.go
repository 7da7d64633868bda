package directread_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/directread"
	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// stalledLog returns a metadata log of one partition that describes
// entries of tp from offset 10 on, ten offsets each, perMessage to a
// message, with the commit stalled at 10: a leader whose in-sync
// follower stopped applying while it went on uploading. No object
// exists: a reader that fetched would fail, and one that holds its
// commit never fetches.
func stalledLog(t *testing.T, tp metadata.TopicPartition, entries, perMessage int) *memstore.Log {
	t.Helper()
	log, err := memstore.NewLog(1, memstore.WithMaxPollWait(time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = log.Close() })
	ctx := context.Background()
	appendMsg := func(m *metadata.Message) {
		b, err := metadata.AppendMessage(nil, m)
		require.NoError(t, err)
		_, err = log.Append(ctx, 0, b)
		require.NoError(t, err)
	}
	appendMsg(&metadata.Message{WriterBrokerID: 1, Markers: []metadata.EpochStart{{Partition: tp, Epoch: 1, StartOffset: 0, LeaderBrokerID: 1}},
		Commits: []metadata.Commit{{Partition: tp, Epoch: 1, Offset: 10}}})
	msg := &metadata.Message{WriterBrokerID: 1}
	for i := range entries {
		if len(msg.Entries) == 0 {
			msg.Object = metadata.ObjectRef{AZ: "az1", Bucket: "bucket-az1", Key: fmt.Sprintf("objects/%08d", i)}
		}
		first := int64(10 + 10*i)
		msg.Entries = append(msg.Entries, metadata.Entry{Partition: tp, RecordEpoch: 1, PublisherEpoch: 1, FirstOffset: first, LastOffset: first + 9,
			Object: msg.Object, Position: int64(64 + 512*len(msg.Entries)), Length: 512, UncompressedSize: 400, Checksum: uint64(i), WriterBrokerID: 1})
		if len(msg.Entries) == perMessage || i == entries-1 {
			appendMsg(msg)
			msg.Entries = msg.Entries[:0]
		}
	}
	return log
}

// heapInuse returns the heap in use after a collection.
func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// readAll polls r until it has read want metadata records, each Poll
// bounded by a short deadline (nothing is committed, so Poll yields
// nothing and returns when its context ends).
func readAll(t *testing.T, r *directread.Reader, want uint64) {
	t.Helper()
	for r.Stats().MetadataRecords < want {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		f, err := r.Poll(ctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Empty(t, f.Batches)
		require.Empty(t, f.Errors)
	}
}

// A reader whose partition's commit stalls (the docs say a commit can
// stall until the broker shrinks the in-sync set) holds at most MaxHeld
// of the entries it learns meanwhile, those nearest its position: its
// heap stays bounded however many it learns. Before the bound it held
// every one, some 350 bytes each: 300,000 took 106 MB.
func TestReaderBoundsWhatItHoldsUnderAStalledCommit(t *testing.T) {
	const entries = 300_000
	tp := metadata.TopicPartition{Topic: "orders", Partition: 0}
	log := stalledLog(t, tp, entries, 1000)
	objects, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "bucket-az1"}})
	require.NoError(t, err)
	store, err := objects.Store("az1")
	require.NoError(t, err)
	for _, tc := range []struct {
		maxHeld, held int   // configured; held at most
		limit         int64 // heap growth at most
	}{
		{10_000, 10_000, 20 << 20},
		{0, 100_000, 60 << 20}, // the default
	} {
		t.Run(fmt.Sprint(tc.maxHeld), func(t *testing.T) {
			before := heapInuse()
			r, err := directread.New(directread.Config{Log: log, Stores: map[string]storage.ObjectStore{"az1": store},
				Partitions: map[metadata.TopicPartition]int64{tp: 10}, MaxHeld: tc.maxHeld})
			require.NoError(t, err)
			defer r.Close()
			readAll(t, r, uint64(1+entries/1000))
			after := heapInuse()
			runtime.KeepAlive(r)
			st := r.Stats()
			grew := int64(after) - int64(before)
			t.Logf("MaxHeld %d: learned %d entries with the commit stalled: heap in use %.1f MB before, %.1f MB after (%+.1f MB, %.0f B per entry learned); held %d, forgotten %d",
				tc.maxHeld, entries, float64(before)/1e6, float64(after)/1e6, float64(grew)/1e6, float64(grew)/entries, st.Held, st.Evicted)
			require.LessOrEqual(t, st.Held, tc.held)
			require.Equal(t, uint64(entries-st.Held), st.Evicted, "every entry not held was forgotten")
			require.Less(t, grew, tc.limit, "the reader's heap grew with what it learned")
			next, committed := r.Position(tp)
			require.Equal(t, [2]int64{10, 10}, [2]int64{next, committed})
		})
	}
}

// Four partitions, one of them with its commit stalled (an in-sync
// follower that never applies) while the leader goes on publishing, read
// by a reader that holds at most eight entries: the others are read to
// their end, the stalled one to its commit, and the reader holds no more
// than its bound. Seeks during the stall, forward past what it holds and
// back to what it yielded, and the commit arriving after it forgot the
// entries, all serve exactly the leader's log.
func TestReaderAtTheBoundWithOnePartitionStalled(t *testing.T) {
	const maxHeld = 8
	c, tps, leader := clusterWith(t, 4, walstore.NodeConfig{RetainFor: time.Hour})
	stalledTP := tps[0]
	ctx := context.Background()
	produce := func(first, last int64) {
		for _, tp := range tps {
			leader.Produce(ctx, tp, 1, first, last, 10)
		}
		for _, tp := range tps {
			require.NoError(t, leader.Node.WaitDurable(ctx, tp, 1, last))
		}
	}
	produce(0, 19)
	for _, tp := range tps {
		require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, 19))
	}
	c.SetReplicas(stalledTP, 1, 2, 3, 4) // broker 4 joins the in-sync set and never applies
	require.NoError(t, leader.Node.BecomeLeader(ctx, stalledTP, 1, []int32{2, 3, 4}, -1))
	for first := int64(20); first < 200; first += 10 {
		produce(first, first+9)
	}
	for _, tp := range tps[1:] {
		require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, 199))
	}

	start := make(map[metadata.TopicPartition]int64)
	for _, tp := range tps {
		start[tp] = 0
	}
	r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: start, MaxHeld: maxHeld})
	require.NoError(t, err)
	defer r.Close()
	got := poll(t, r, tps[1:], 200)
	for _, tp := range tps[1:] {
		clustertest.RequireSameLog(t, leader.Local.Batches(tp), got[tp])
	}
	got = poll(t, r, tps[:1], 20)
	quiet(t, r)
	st := r.Stats()
	t.Logf("stalled at 20: held %d, forgotten %d, metadata rewinds %d", st.Held, st.Evicted, st.MetadataRewinds)
	require.LessOrEqual(t, st.Held, maxHeld)
	require.Positive(t, st.Evicted, "the stalled partition's entries past the bound were forgotten")
	log := leader.Local.Batches(stalledTP)

	// Forward past what the reader holds, and at the stall's edge:
	// nothing is committed there yet.
	for _, to := range []int64{150, 20} {
		require.NoError(t, r.Seek(stalledTP, to))
		quiet(t, r)
	}
	// Back to what it yielded, whose entries it forgot.
	require.NoError(t, r.Seek(stalledTP, 5))
	clustertest.RequireSameLog(t, log[:2], poll(t, r, tps[:1], 20)[stalledTP])
	quiet(t, r)
	require.LessOrEqual(t, r.Stats().Held, maxHeld)

	// The commit comes once the broker shrinks the in-sync set: the reader
	// reads what it forgot again, in order.
	require.NoError(t, leader.Node.SetInSync(stalledTP, []int32{2, 3}))
	clustertest.RequireSameLog(t, log[2:], poll(t, r, tps[:1], 200)[stalledTP])
	st = r.Stats()
	t.Logf("read to 200: held %d, forgotten %d, metadata rewinds %d", st.Held, st.Evicted, st.MetadataRewinds)
	require.Positive(t, st.MetadataRewinds)
	require.LessOrEqual(t, st.Held, maxHeld)
}

// quiet requires that r yields nothing and reports nothing for a while:
// every partition is at what it may serve.
func quiet(t *testing.T, r *directread.Reader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	f, err := r.Poll(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "%d batches, errors %v", len(f.Batches), f.Errors)
}

// A reader closed while a Poll waits for metadata ends that Poll with
// ErrClosed, and Close returns once it has; later calls fail alike.
func TestReaderClosedMidPoll(t *testing.T) {
	c, tps, _ := cluster(t, 1)
	r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tps[0]: 0}})
	require.NoError(t, err)
	polled := make(chan error, 1)
	go func() {
		_, err := r.Poll(context.Background())
		polled <- err
	}()
	for r.Stats().MetadataRecords == 0 {
		time.Sleep(time.Millisecond) // the Poll is under way: it read the markers
	}
	require.NoError(t, r.Close())
	require.ErrorIs(t, <-polled, directread.ErrClosed)
	_, err = r.Poll(context.Background())
	require.ErrorIs(t, err, directread.ErrClosed)
	require.NoError(t, r.Close(), "closing again")
}
