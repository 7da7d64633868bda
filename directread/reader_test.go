package directread_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/directread"
	"github.com/activetier/activetier/faults"
	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// cluster returns three brokers in az1-az3 replicating parts partitions of
// topic "orders", broker 1 leading them all at epoch 1.
func cluster(t *testing.T, parts int32) (*clustertest.Cluster, []metadata.TopicPartition, *clustertest.Broker) {
	return clusterWith(t, parts, walstore.NodeConfig{})
}

// clusterWith is cluster with broker 1's leader tuned by cfg.
func clusterWith(t *testing.T, parts int32, cfg walstore.NodeConfig) (*clustertest.Cluster, []metadata.TopicPartition, *clustertest.Broker) {
	c := clustertest.New(t, clustertest.Mem(), 4)
	r1, r2, r3 := c.AddBroker(1, "az1"), c.AddBroker(2, "az2"), c.AddBroker(3, "az3")
	var tps []metadata.TopicPartition
	for p := range parts {
		tp := metadata.TopicPartition{Topic: "orders", Partition: p}
		tps = append(tps, tp)
		c.SetReplicas(tp, 1, 2, 3)
		c.SetLeader(tp, 1, 1)
	}
	r1.StartLeader(cfg)
	for _, tp := range tps {
		r1.BecomeLeader(context.Background(), tp, 1, -1)
	}
	for _, tp := range tps {
		r2.StartFollower(tp)
		r3.StartFollower(tp)
	}
	return c, tps, r1
}

func poll(t *testing.T, r *directread.Reader, tps []metadata.TopicPartition, until int64) map[metadata.TopicPartition][]storage.Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(map[metadata.TopicPartition][]storage.Batch)
	for {
		done := true
		for _, tp := range tps {
			if next, _ := r.Position(tp); next < until {
				done = false
			}
		}
		if done {
			return got
		}
		f, err := r.Poll(ctx)
		require.NoError(t, err)
		require.Empty(t, f.Errors)
		for _, b := range f.Batches {
			got[b.Partition] = append(got[b.Partition], b.Batch)
		}
	}
}

// Readers yield exactly the leader's committed log of every partition, in
// offset order, fetching each object about once however many of their
// partitions share it, and two Readers sharing a Cache fetch each
// section once between them.
func TestReaderYieldsTheCommittedLog(t *testing.T) {
	c, tps, leader := cluster(t, 4)
	ctx := context.Background()
	for round := range int64(10) {
		for _, tp := range tps {
			leader.Produce(ctx, tp, 1, round*10, round*10+9, 5)
		}
		for _, tp := range tps {
			require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, round*10+9))
		}
	}
	start := make(map[metadata.TopicPartition]int64)
	for _, tp := range tps {
		start[tp] = 0
	}
	cache := directread.NewCache(1 << 20)
	gets := func() int64 { return c.Gets("bucket-az1") }
	before := gets()
	r1, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: start, Cache: cache})
	require.NoError(t, err)
	defer r1.Close()
	got := poll(t, r1, tps, 100)
	for _, tp := range tps {
		clustertest.RequireSameLog(t, leader.Local.Batches(tp), got[tp])
	}
	objects := countObjects(t, c.Meta, tps)
	perObject := float64(gets()-before) / float64(objects)
	t.Logf("GETs %d for %d objects: %.2f per object", gets()-before, objects, perObject)
	require.LessOrEqual(t, perObject, 1.1, "GETs per reader per object")

	before = gets()
	r2, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: start, Cache: cache})
	require.NoError(t, err)
	defer r2.Close()
	got = poll(t, r2, tps, 100)
	for _, tp := range tps {
		clustertest.RequireSameLog(t, leader.Local.Batches(tp), got[tp])
	}
	require.Zero(t, gets()-before, "the second reader is served by the shared cache")
	require.Positive(t, r2.Stats().CacheHits)
}

// countObjects counts the distinct objects the metadata names for tps.
func countObjects(t *testing.T, log metadata.Log, tps []metadata.TopicPartition) int {
	objs := make(map[metadata.ObjectRef]bool)
	for p := range log.Partitions() {
		_, high, err := log.Watermarks(context.Background(), p)
		require.NoError(t, err)
		if high == 0 {
			continue
		}
		recs, err := log.Read(context.Background(), p, 0, int(high))
		require.NoError(t, err)
		for _, rec := range recs {
			m, err := metadata.DecodeMessage(rec.Value)
			require.NoError(t, err)
			for _, e := range m.Entries {
				objs[e.Object] = true
			}
		}
	}
	return len(objs)
}

// A reader never passes the committed offset: with a follower out of
// sync the records it lacks are not served until the in-sync set drops
// it; Durable serves them at once.
func TestReaderStopsAtTheCommittedOffset(t *testing.T) {
	c, tps, leader := cluster(t, 1)
	tp := tps[0]
	ctx := context.Background()
	leader.Produce(ctx, tp, 1, 0, 19, 10)
	require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, 19))
	c.SetReplicas(tp, 1, 2, 3, 4) // broker 4 joins and never reports
	require.NoError(t, leader.Node.BecomeLeader(ctx, tp, 1, []int32{2, 3, 4}, -1))
	leader.Produce(ctx, tp, 1, 20, 39, 10)
	require.NoError(t, leader.Node.WaitDurable(ctx, tp, 1, 39))

	r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tp: 0}})
	require.NoError(t, err)
	defer r.Close()
	got := poll(t, r, tps, 20)
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	f, err := r.Poll(pctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "nothing past the committed offset 20: %v", f)
	require.Len(t, got[tp], 2)

	d, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tp: 0}, Durable: true})
	require.NoError(t, err)
	defer d.Close()
	require.Len(t, poll(t, d, tps, 40)[tp], 4, "durable: all that is published")

	require.NoError(t, leader.Node.SetInSync(tp, []int32{2, 3}))
	got = poll(t, r, tps, 40)
	clustertest.RequireSameLog(t, leader.Local.Batches(tp)[2:], got[tp])
}

// Records whose objects were deleted are reported as gone, with where to
// resume, never skipped; after Seek the reader goes on. A start offset
// inside a batch yields that whole batch.
func TestReaderGone(t *testing.T) {
	c, tps, leader := cluster(t, 1)
	tp := tps[0]
	ctx := context.Background()
	leader.Produce(ctx, tp, 1, 0, 29, 10)
	require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, 29))
	leader.Node.ReportTiered(tp, 30)
	n, err := leader.Node.CollectGarbage(ctx)
	require.NoError(t, err)
	require.Positive(t, n)

	r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tp: 5}})
	require.NoError(t, err)
	defer r.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var gone *directread.GoneError
	var got []storage.Batch
	for gone == nil {
		f, err := r.Poll(pctx)
		require.NoError(t, err)
		for _, b := range f.Batches {
			got = append(got, b.Batch)
		}
		for _, e := range f.Errors {
			require.ErrorIs(t, e, directread.ErrGone)
			require.True(t, errors.As(e, &gone))
		}
	}
	require.Empty(t, got, "nothing is skipped to")
	require.Equal(t, int64(5), gone.Offset)
	require.Equal(t, int64(30), gone.ResumeHint, "read 5-29 elsewhere")
	require.ErrorIs(t, gone, storage.ErrNotFound, "the cause")
	t.Log(gone)

	leader.Produce(ctx, tp, 1, 30, 39, 10)
	require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, 39))
	require.NoError(t, r.Seek(tp, 35))
	got2 := poll(t, r, tps, 40)
	clustertest.RequireSameLog(t, leader.Local.Batches(tp)[3:], got2[tp])
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	c, tps, _ := cluster(t, 1)
	ok := func() directread.Config {
		return directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tps[0]: 0}}
	}
	for name, mod := range map[string]func(*directread.Config){
		"no log":             func(c *directread.Config) { c.Log = nil },
		"no stores":          func(c *directread.Config) { c.Stores = nil },
		"nil store":          func(c *directread.Config) { c.Stores = map[string]storage.ObjectStore{"az1": nil} },
		"no partitions":      func(c *directread.Config) { c.Partitions = nil },
		"negative start":     func(c *directread.Config) { c.Partitions = map[metadata.TopicPartition]int64{tps[0]: -1} },
		"invalid partition":  func(c *directread.Config) { c.Partitions = map[metadata.TopicPartition]int64{{}: 0} },
		"unknown meta part":  func(c *directread.Config) { c.MetadataPartitions = []int32{9} },
		"negative max bytes": func(c *directread.Config) { c.MaxBytes = -1 },
		"negative max held":  func(c *directread.Config) { c.MaxHeld = -1 },
	} {
		cfg := ok()
		mod(&cfg)
		_, err := directread.New(cfg)
		require.Error(t, err, name)
	}
	r, err := directread.New(ok())
	require.NoError(t, err)
	require.NoError(t, r.Close())
	_, err = r.Poll(context.Background())
	require.ErrorIs(t, err, directread.ErrClosed)
	require.Error(t, r.Seek(metadata.TopicPartition{Topic: "x"}, 0))
}

// With UnavailableAfter, a section whose store stays unavailable is
// reported gone, with the store's error as the cause, instead of stalling
// the partition for the whole outage; nothing is skipped. A shorter
// outage is waited out.
func TestReaderUnavailableAfter(t *testing.T) {
	c, tps, leader := cluster(t, 1)
	tp := tps[0]
	ctx := context.Background()
	leader.Produce(ctx, tp, 1, 0, 19, 10)
	require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, 19))
	down := faults.NewOutage(storage.ErrUnavailable)
	c.SetFault(faults.On(func(r faults.Request) bool { return r.Op.IsGet() }, down))
	start := map[metadata.TopicPartition]int64{tp: 0}

	down.SetDown("bucket-az1", true)
	time.AfterFunc(50*time.Millisecond, func() { down.SetDown("bucket-az1", false) })
	r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: start, UnavailableAfter: time.Minute})
	require.NoError(t, err)
	defer r.Close()
	clustertest.RequireSameLog(t, leader.Local.Batches(tp), poll(t, r, tps, 20)[tp])

	down.SetDown("bucket-az1", true)
	r2, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: start, UnavailableAfter: 100 * time.Millisecond})
	require.NoError(t, err)
	defer r2.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	f, err := r2.Poll(pctx)
	require.NoError(t, err)
	require.Empty(t, f.Batches, "nothing is skipped to")
	require.Len(t, f.Errors, 1)
	var gone *directread.GoneError
	require.ErrorAs(t, f.Errors[0], &gone)
	require.ErrorIs(t, gone, storage.ErrUnavailable, "the cause is the store's")
	require.Equal(t, int64(0), gone.Offset)
	require.Equal(t, int64(20), gone.ResumeHint, "no other AZ holds 0-19: read them from the broker")

	_, err = directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: start, UnavailableAfter: -1})
	require.Error(t, err)
}

// publishing appends a message to every metadata partition of log, again
// and again until the test ends: the publishing of a second leader on a
// busy cluster, so that a read of the metadata log never comes back
// empty. It paces itself (a millisecond between rounds) so that a reader
// can keep up, as it can with a real cluster's metadata.
func publishing(t *testing.T, log metadata.Log) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		other := metadata.TopicPartition{Topic: "other", Partition: 0}
		for off := int64(1); ctx.Err() == nil; off++ {
			msg, err := metadata.AppendMessage(nil, &metadata.Message{WriterBrokerID: 9, Commits: []metadata.Commit{{Partition: other, Epoch: 1, Offset: off}}})
			if err != nil {
				panic(err)
			}
			for p := range log.Partitions() {
				_, _ = log.Append(ctx, p, msg) // fails only once the test ends
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Millisecond):
			}
		}
	}()
}

// goneCluster returns a cluster whose partition's records 0-29 are
// committed and their objects deleted, with another leader publishing to
// every metadata partition throughout if busy.
func goneCluster(t *testing.T, busy bool) (*clustertest.Cluster, metadata.TopicPartition, *clustertest.Broker) {
	c, tps, leader := cluster(t, 1)
	tp := tps[0]
	ctx := context.Background()
	leader.Produce(ctx, tp, 1, 0, 29, 10)
	require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, 29))
	if busy {
		publishing(t, c.Meta)
	}
	leader.Node.ReportTiered(tp, 30)
	n, err := leader.Node.CollectGarbage(ctx)
	require.NoError(t, err)
	require.Positive(t, n)
	return c, tp, leader
}

// pollGone polls r until it reports a GoneError, requiring that it yields
// nothing and fails no other way; ctx bounds the wait.
func pollGone(ctx context.Context, t *testing.T, r *directread.Reader) *directread.GoneError {
	t.Helper()
	for {
		f, err := r.Poll(ctx)
		require.NoError(t, err)
		require.Empty(t, f.Batches, "nothing is skipped to")
		for _, e := range f.Errors {
			var gone *directread.GoneError
			require.ErrorAs(t, e, &gone)
			return gone
		}
	}
}

// A reader whose next records are gone says so whether or not the
// metadata log is busy: with another leader publishing to every metadata
// partition throughout, no read of it ever comes back empty, and the
// reader judges on high watermarks it takes (and only then); with
// publishing paused, empty reads are enough and it takes none.
func TestReaderGoneOnABusyCluster(t *testing.T) {
	for _, busy := range []bool{true, false} {
		t.Run(fmt.Sprintf("busy=%v", busy), func(t *testing.T) {
			c, tp, leader := goneCluster(t, busy)
			r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tp: 5}})
			require.NoError(t, err)
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			gone := pollGone(ctx, t, r)
			require.Equal(t, int64(5), gone.Offset)
			require.Equal(t, int64(30), gone.ResumeHint)
			require.ErrorIs(t, gone, storage.ErrNotFound)
			st := r.Stats()
			t.Logf("%d metadata records read, %d high watermarks taken", st.MetadataRecords, st.MetadataWatermarks)
			if busy {
				require.Positive(t, st.MetadataWatermarks)
			} else {
				require.Zero(t, st.MetadataWatermarks, "empty reads prove the log read to its end")
			}

			// It goes on after Seek, on the busy log too.
			leader.Produce(ctx, tp, 1, 30, 39, 10)
			require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, 39))
			require.NoError(t, r.Seek(tp, 30))
			clustertest.RequireSameLog(t, leader.Local.Batches(tp)[3:], poll(t, r, []metadata.TopicPartition{tp}, 40)[tp])
		})
	}
}

// hostileLog is a metadata log whose Watermarks misbehaves as mode says.
type hostileLog struct {
	metadata.Log
	mode  atomic.Value // string: "", "fail", "below", "negative"
	calls atomic.Int64
	// after, if set, is called on every misbehaving answer with how many
	// there were.
	after func(n int64)
}

func (l *hostileLog) Watermarks(ctx context.Context, p int32) (low, high int64, err error) {
	low, high, err = l.Log.Watermarks(ctx, p)
	mode, _ := l.mode.Load().(string)
	if mode == "" || err != nil {
		return low, high, err
	}
	if l.after != nil {
		defer l.after(l.calls.Add(1))
	}
	switch mode {
	case "fail":
		return 0, 0, fmt.Errorf("list offsets: %w", storage.ErrUnavailable)
	case "below":
		return 0, 0, nil // below every cursor past the first record
	default:
		return low, -1, nil
	}
}

// A metadata log whose Watermarks fails, or returns a high watermark
// below the reader's cursor or negative, never makes a busy reader judge
// records gone: a failure is retried, a broken answer is reported as a
// *walstore.DependencyError naming the call. Once the log answers right,
// the reader judges.
func TestReaderHostileWatermarks(t *testing.T) {
	for _, mode := range []string{"fail", "below", "negative"} {
		t.Run(mode, func(t *testing.T) {
			c, tp, _ := goneCluster(t, true)
			log := &hostileLog{Log: c.Meta}
			log.mode.Store(mode)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pctx, stop := context.WithCancel(ctx)
			log.after = func(n int64) {
				if n >= 20 {
					stop() // enough misbehaving answers seen
				}
			}
			r, err := directread.New(directread.Config{Log: log, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tp: 5},
				Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			defer r.Close()
			violations := 0
			for pctx.Err() == nil {
				f, err := r.Poll(pctx)
				require.Empty(t, f.Errors, "nothing is judged gone on a misbehaving log")
				require.Empty(t, f.Batches)
				if err == nil || errors.Is(err, context.Canceled) {
					continue
				}
				var dep *walstore.DependencyError
				require.ErrorAs(t, err, &dep)
				require.Equal(t, "metadata.Log.Watermarks", dep.Dependency)
				require.ErrorIs(t, err, walstore.ErrContractViolation)
				violations++
			}
			require.GreaterOrEqual(t, log.calls.Load(), int64(20))
			if mode == "fail" {
				require.Zero(t, violations, "a failure is retried")
			} else {
				require.Positive(t, violations)
				t.Log(violations, "violations reported")
			}

			log.mode.Store("")
			gone := pollGone(ctx, t, r)
			require.Equal(t, int64(5), gone.Offset)
		})
	}
}

// Metadata trimmed past a reader's cursor, on a busy cluster: the reader
// starts again at the low watermark and reports the records the trimmed
// entries described as gone, up to the first it can still read. (It
// serves those once the leader publishes its markers again.)
func TestReaderMetadataTrimmed(t *testing.T) {
	c, tps, leader := cluster(t, 1)
	tp := tps[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader.Produce(ctx, tp, 1, 0, 29, 10)
	require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, 29))
	publishing(t, c.Meta)
	for p := range c.Meta.Partitions() {
		_, high, err := c.Meta.Watermarks(ctx, p)
		require.NoError(t, err)
		require.NoError(t, c.Meta.Trim(ctx, p, high))
	}
	leader.Produce(ctx, tp, 1, 30, 39, 10)
	require.NoError(t, leader.Node.WaitReplicated(ctx, tp, 1, 39))

	r, err := directread.New(directread.Config{Log: c.Meta, Stores: c.Stores(), Partitions: map[metadata.TopicPartition]int64{tp: 0}})
	require.NoError(t, err)
	defer r.Close()
	gone := pollGone(ctx, t, r)
	require.Equal(t, int64(0), gone.Offset)
	require.Equal(t, int64(30), gone.ResumeHint, "30-39 are still described")
	require.Nil(t, gone.Cause, "nothing failed: the metadata is gone")
}
