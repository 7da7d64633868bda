package leadcore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/fencing"
	"github.com/activetier/activetier/metadata"
)

var (
	tpA = metadata.TopicPartition{Topic: "t", Partition: 0}
	tpB = metadata.TopicPartition{Topic: "t", Partition: 1}
	t0  = time.Unix(1_700_000_000, 0).UTC()
)

// harness drives a Core the way a driver does, and describes each Ready
// in lines, as raft's interaction tests do.
type harness struct {
	t    testing.TB
	c    *Core
	now  time.Time
	reqs map[uint64]any // requests handed out, by id
	keys int
}

func newHarness(t testing.TB, mod func(*Config)) *harness {
	cfg := Config{
		BrokerID: 1, MetadataPartitions: 1, Interval: 100 * time.Millisecond, ObjectBytes: 1000,
		MaxPartitions: 10, BufferBytes: 3000, MaxInflight: 2, DegradedAfter: 5 * time.Second,
		MarkerRefresh: time.Hour, GCInterval: time.Hour, BackoffInitial: 10 * time.Millisecond,
		BackoffMax: time.Second, Seed: 7,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	h := &harness{t: t, c: c, now: t0, reqs: make(map[uint64]any)}
	c.Start(h.now)
	return h
}

// ready takes the Ready and describes it.
func (h *harness) ready() []string {
	rd := h.c.Ready()
	h.c.Advance()
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	for _, e := range rd.Encodes {
		h.reqs[e.ID] = e
		add("encode %d", e.ID)
	}
	for _, u := range rd.Uploads {
		h.reqs[u.ID] = u
		add("%s %d", u.What, u.ID)
	}
	for _, p := range rd.Publishes {
		h.reqs[p.ID] = p
		m, err := metadata.DecodeMessage(p.Data)
		require.NoError(h.t, err)
		add("publish %d: %s", p.ID, describeMessage(m))
	}
	for _, r := range rd.Reads {
		h.reqs[r.ID] = r
		add("read %d %s %s from %d", r.ID, []string{"lineage", "end", "batches"}[r.What], r.Partition, r.From)
	}
	for _, d := range rd.Deletes {
		h.reqs[d.ID] = d
		add("delete %d %d objects", d.ID, len(d.Refs))
	}
	for _, hg := range rd.Hedges {
		add("hedge %s %d", hg.What, hg.ID)
	}
	for _, r := range rd.Retries {
		add("retry %d at +%v", r.ID, r.At.Sub(h.now))
	}
	for _, id := range rd.Cancels {
		add("cancel %d", id)
	}
	for _, d := range rd.Done {
		add("done %d: %v", d.ID, d.Err)
	}
	if rd.DurableChanged {
		add("durable changed")
	}
	if rd.SpaceFreed {
		add("space freed")
	}
	if rd.CommitChanged {
		add("commit changed")
	}
	for _, f := range rd.Failures {
		if f.Err == nil {
			add("recovers %s", f.Partition)
		} else {
			add("failing %s since +%v: %v", f.Partition, f.Since.Sub(t0), f.Err)
		}
	}
	if rd.HealthChanged {
		hl := h.c.Health()
		add("health degraded=%v err=%v", hl.Degraded, hl.Err)
	}
	if !rd.WakeAt.IsZero() {
		add("wake at +%v", rd.WakeAt.Sub(h.now))
	}
	return out
}

func describeMessage(m *metadata.Message) string {
	var parts []string
	for _, mk := range m.Markers {
		parts = append(parts, fmt.Sprintf("marker %s e%d@%d", mk.Partition, mk.Epoch, mk.StartOffset))
	}
	for _, e := range m.Entries {
		parts = append(parts, fmt.Sprintf("entry %s %d-%d e%d/p%d", e.Partition, e.FirstOffset, e.LastOffset, e.RecordEpoch, e.PublisherEpoch))
	}
	for _, cm := range m.Commits {
		parts = append(parts, fmt.Sprintf("commit %s e%d@%d", cm.Partition, cm.Epoch, cm.Offset))
	}
	return strings.Join(parts, ", ")
}

func (h *harness) advance(d time.Duration) { h.now = h.now.Add(d); h.c.Tick(h.now) }

func (h *harness) append(tp metadata.TopicPartition, epoch int32, first, last int64, size int) error {
	return h.c.Append(h.now, tp, combiner.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, Data: make([]byte, size)})
}

// encode performs Encode id.
func (h *harness) encode(id uint64) {
	e := h.reqs[id].(Encode)
	objs, err := e.Builder.Cut(nil)
	require.NoError(h.t, err)
	h.c.Encoded(h.now, id, objs, err)
}

// stored completes Upload id.
func (h *harness) stored(id uint64) {
	h.keys++
	h.c.Uploaded(h.now, id, metadata.ObjectRef{AZ: "az1", Bucket: "b1", Key: fmt.Sprintf("k%d", h.keys)}, nil, Other)
}

func (h *harness) published(id uint64, off int64) { h.c.Published(h.now, id, off, nil, Other) }

func (h *harness) durable(tp metadata.TopicPartition) int64 {
	_, d, _, _ := h.c.Leadership(tp)
	return d
}

var errDown = errors.New("down")

// The life of a batch: buffered, cut when its interval is up, uploaded,
// published, durable.
func TestCoreAppendToDurable(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2}, -1, 0))
	require.Equal(t, []string{"read 1 lineage t-0 from 0", "durable changed", "wake at +1h0m0s"}, h.ready())
	h.c.Read(h.now, 1, ReadLineage, LocalResult{Epochs: []fencing.EpochEntry{{Epoch: 1, StartOffset: 0}}})
	require.Equal(t, []string{"publish 2: marker t-0 e1@0", "wake at +5s"}, h.ready())
	h.published(2, 0)
	require.Equal(t, []string{"wake at +1h0m0s"}, h.ready())

	require.NoError(t, h.append(tpA, 1, 0, 9, 100))
	require.Equal(t, []string{"wake at +100ms"}, h.ready(), "the cut is due after Interval")
	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"encode 3", "wake at +59m59.9s"}, h.ready())
	h.encode(3)
	require.Equal(t, []string{"upload 4", "wake at +5s"}, h.ready())
	h.stored(4)
	require.Equal(t, []string{"publish 5: entry t-0 0-9 e1/p1", "wake at +5s"}, h.ready())
	require.Equal(t, int64(0), h.durable(tpA), "stored but not published is not durable")
	h.published(5, 1)
	require.Equal(t, []string{"durable changed", "space freed", "wake at +59m59.9s"}, h.ready())
	require.Equal(t, int64(10), h.durable(tpA))
	require.Equal(t, Stats{Appends: 1, AppendedBytes: 100, Objects: 1, ObjectBytes: h.c.Stats().ObjectBytes}, h.c.Stats())
}

// Regression: a broker re-elected without a break publishes the data it
// accepted at the earlier epoch, at the new one: it was acknowledged.
func TestCoreReelectionPublishesWhatWasAccepted(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MarkerRefresh = time.Hour })
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2}, -1, 0))
	h.ready()
	require.NoError(t, h.append(tpA, 1, 0, 9, 100))
	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"encode 2", "wake at +59m59.9s"}, h.ready())
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 2, []int32{2}, -1, 10))
	require.Equal(t, []string{"read 3 lineage t-0 from 0", "cancel 1", "durable changed", "wake at +59m59.9s"}, h.ready(),
		"the old chore's read is cancelled; a new one begins")
	h.encode(2)
	require.Equal(t, []string{"upload 4", "wake at +5s"}, h.ready())
	h.stored(4)
	require.Equal(t, []string{"publish 5: entry t-0 0-9 e1/p2", "wake at +5s"}, h.ready(), "published at the new epoch")
	h.published(5, 0)
	h.ready()
	require.Equal(t, int64(10), h.durable(tpA))
	require.Zero(t, h.c.Stats().Fenced)
}

// Data of a leadership that ended is withheld, and waiters learn of it.
func TestCoreWithholdsDataOfAnEndedLeadership(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2}, -1, 0))
	h.ready()
	require.NoError(t, h.append(tpA, 1, 0, 9, 100))
	h.advance(100 * time.Millisecond)
	h.ready()
	h.encode(2)
	require.Equal(t, []string{"upload 3", "wake at +5s"}, h.ready())
	h.c.Resign(h.now, tpA)
	require.Equal(t, []string{"cancel 1", "durable changed", "commit changed", "wake at +5s"}, h.ready())
	h.stored(3)
	require.Equal(t, []string{"space freed", "wake at +59m59.9s"}, h.ready(), "nothing published; the space is freed")
	require.Equal(t, uint64(1), h.c.Stats().Fenced)
	// Re-elected after a break: a new leadership, nothing of the old.
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 3, []int32{2}, -1, 10))
	require.Equal(t, int64(10), h.durable(tpA))
	require.Error(t, h.append(tpA, 1, 10, 19, 10), "the old epoch")
}

// Each partition's entries are published in offset order even when a
// later object is stored first; other partitions do not wait.
func TestCorePublishesInOffsetOrder(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxInflight = 3 })
	for _, tp := range []metadata.TopicPartition{tpA, tpB} {
		require.NoError(t, h.c.BecomeLeader(h.now, tp, 1, []int32{2}, -1, 0))
	}
	h.ready()
	cut := func() uint64 {
		h.advance(100 * time.Millisecond)
		rd := h.ready()
		require.Len(t, rd, 2, "%v", rd)
		var id uint64
		fmt.Sscanf(rd[0], "encode %d", &id)
		h.encode(id)
		rd = h.ready()
		fmt.Sscanf(rd[0], "upload %d", &id)
		return id
	}
	require.NoError(t, h.append(tpA, 1, 0, 9, 100))
	a1 := cut()
	require.NoError(t, h.append(tpA, 1, 10, 19, 100))
	a2 := cut()
	require.NoError(t, h.append(tpB, 1, 0, 9, 100))
	b1 := cut()
	h.stored(a2)
	require.Equal(t, []string{"wake at +4.8s"}, h.ready(), "a's second object waits for its first; a1 may degrade at +4.8s")
	h.stored(b1)
	rd := h.ready()
	require.Contains(t, rd[0], "entry t-1 0-9", "b does not wait for a")
	var id uint64
	fmt.Sscanf(rd[0], "publish %d", &id)
	h.published(id, 0)
	h.ready()
	h.stored(a1)
	rd = h.ready()
	require.Contains(t, rd[0], "entry t-0 0-9")
	fmt.Sscanf(rd[0], "publish %d", &id)
	h.published(id, 1)
	rd = h.ready()
	require.Contains(t, rd[0], "entry t-0 10-19")
}

// The buffer bounds what is appended and not yet published.
func TestCoreBufferFull(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2}, -1, 0))
	require.Equal(t, TooLarge, CodeOf(h.append(tpA, 1, 0, 0, 3001)))
	require.NoError(t, h.append(tpA, 1, 0, 0, 900))
	require.NoError(t, h.append(tpA, 1, 1, 1, 900))
	require.NoError(t, h.append(tpA, 1, 2, 2, 900))
	require.Equal(t, BufferFull, CodeOf(h.append(tpA, 1, 3, 3, 900)))
	require.Equal(t, InvalidBatch, CodeOf(h.append(tpA, 1, 5, 5, 10)), "a gap")
	require.Equal(t, NotLeader, CodeOf(h.append(tpB, 1, 0, 0, 10)))
	require.Equal(t, 2700, h.c.Stats().BufferedBytes)
}

// A store that refuses for good degrades the engine at once; one that
// does not answer, after DegradedAfter; a success of the same kind sends
// the waiting retries at once.
func TestCoreHealth(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2}, -1, 0))
	h.ready()
	require.NoError(t, h.c.BecomeLeader(h.now, tpB, 1, []int32{2}, -1, 0))
	h.ready()
	require.NoError(t, h.append(tpA, 1, 0, 9, 600))
	require.NoError(t, h.append(tpB, 1, 0, 9, 600))
	h.advance(100 * time.Millisecond)
	require.Equal(t, []string{"encode 3", "wake at +59m59.9s"}, h.ready())
	h.encode(3)
	require.Equal(t, []string{"upload 4", "upload 5", "wake at +5s"}, h.ready())
	h.c.Uploaded(h.now, 4, metadata.ObjectRef{}, errDown, Permanent)
	require.Equal(t, []string{"retry 4 at +5.107577ms", "health degraded=true err=down", "wake at +59m59.9s"}, h.ready())
	h.c.Uploaded(h.now, 4, metadata.ObjectRef{}, errDown, Other)
	require.Equal(t, []string{"retry 4 at +5.234061ms", "health degraded=false err=<nil>", "wake at +5s"}, h.ready())
	h.advance(5 * time.Second)
	require.Equal(t, []string{"health degraded=true err=down", "wake at +59m54.9s"}, h.ready(), "not stored within DegradedAfter")
	h.c.Uploaded(h.now, 4, metadata.ObjectRef{}, errDown, Other)
	h.ready()
	h.stored(5)
	require.Equal(t, []string{"publish 6: entry t-1 0-9 e1/p1", "retry 4 at +0s", "wake at +59m54.9s"}, h.ready(), "a success wakes the retry waiting")
	h.stored(4)
	rd := h.ready()
	require.Contains(t, rd, "health degraded=false err=<nil>")
}

// Regression: the durable offset never passes data followers cannot get.
// A leadership that must republish is durable from where the republish
// starts, and advances as it publishes; re-elected with a republish, the
// durable offset goes back.
func TestCoreDurableWaitsForTheRepublish(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 2, []int32{2}, 0, 20))
	require.Equal(t, int64(0), h.durable(tpA))
	require.Equal(t, []string{"read 1 lineage t-0 from 0", "durable changed", "wake at +1h0m0s"}, h.ready())
	h.c.Read(h.now, 1, ReadLineage, LocalResult{Epochs: []fencing.EpochEntry{{Epoch: 1, StartOffset: 0}}, End: 20})
	require.Equal(t, []string{"publish 2: marker t-0 e1@0, marker t-0 e2@20", "wake at +5s"}, h.ready())
	h.published(2, 0)
	require.Equal(t, []string{"read 3 end t-0 from 0", "wake at +1h0m0s"}, h.ready())
	h.c.Read(h.now, 3, ReadEnd, LocalResult{End: 20})
	require.Equal(t, []string{"read 4 batches t-0 from 0", "wake at +1h0m0s"}, h.ready())
	batches := []combiner.Batch{{Epoch: 1, FirstOffset: 0, LastOffset: 9, Data: []byte("a")}, {Epoch: 1, FirstOffset: 10, LastOffset: 19, Data: []byte("b")}}
	h.c.Read(h.now, 4, ReadBatches, LocalResult{Batches: batches})
	require.Equal(t, []string{"republish upload 5", "wake at +5s"}, h.ready())
	h.c.Uploaded(h.now, 5, metadata.ObjectRef{}, errDown, Unavailable)
	require.Equal(t, []string{"retry 5 at +5.107577ms", "wake at +5s"}, h.ready(), "an unavailable store is retried")
	require.Equal(t, int64(0), h.durable(tpA))
	h.stored(5)
	require.Equal(t, []string{"publish 6: entry t-0 0-19 e1/p2", "wake at +5s"}, h.ready())
	h.published(6, 1)
	require.Equal(t, []string{"durable changed", "wake at +1h0m0s"}, h.ready())
	require.Equal(t, int64(20), h.durable(tpA))
	require.Equal(t, uint64(1), h.c.Stats().Republished)

	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 2, []int32{2, 3}, 5, 20))
	require.Equal(t, int64(5), h.durable(tpA), "a follower lacks the log from 5")
}

// A Republish call whose local log breaks its contract fails with an
// error naming it; a chore retries after a backoff.
func TestCoreRepublishCallFails(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2}, -1, 20))
	h.ready()
	id, err := h.c.Republish(h.now, tpA, 0)
	require.NoError(t, err)
	rd := h.ready()
	require.Equal(t, []string{"read 3 end t-0 from 0", "wake at +1h0m0s"}, rd)
	h.c.Read(h.now, 3, ReadEnd, LocalResult{End: 20})
	h.ready()
	h.c.Read(h.now, 4, ReadBatches, LocalResult{})
	require.Equal(t, []string{fmt.Sprintf("done %d: republish t-0 from 0: LocalLog.Read: broke its contract: nothing at 0 below the end offset 20", id), "wake at +1h0m0s"}, h.ready())
	_, err = h.c.Republish(h.now, tpB, 0)
	require.Equal(t, NotLeader, CodeOf(err))

	// The chore's lineage read fails: the partition is failing, and the
	// chore tries again after a backoff. It recovers once its markers
	// are published.
	h.c.Read(h.now, 1, ReadLineage, LocalResult{EpochsErr: errDown})
	require.Equal(t, []string{"failing t-0 since +0s: epochs of t-0: down", "health degraded=false err=<nil>", "wake at +5.107577ms"}, h.ready())
	h.advance(5107577 * time.Nanosecond)
	require.Equal(t, []string{"read 5 lineage t-0 from 0", "wake at +59m59.994892423s"}, h.ready())
	h.c.Read(h.now, 5, ReadLineage, LocalResult{EpochsErr: errDown})
	require.Equal(t, []string{"failing t-0 since +0s: epochs of t-0: down", "wake at +5.234061ms"}, h.ready(), "still failing since the first")
	h.advance(time.Second)
	require.Equal(t, []string{"read 6 lineage t-0 from 0", "wake at +59m58.994892423s"}, h.ready())
	h.lineage(6, 1)
	rd = h.ready()
	require.Len(t, rd, 2)
	h.published(7, 0)
	require.Equal(t, []string{"recovers t-0", "health degraded=false err=<nil>", "wake at +59m58.994892423s"}, h.ready())
}

// A publish into a closed metadata log fails the leaderships of its
// entries: their waiters hear why.
func TestCorePublishIntoAClosedLog(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2}, -1, 0))
	h.ready()
	require.NoError(t, h.append(tpA, 1, 0, 9, 100))
	h.advance(100 * time.Millisecond)
	h.ready()
	h.encode(2)
	h.ready()
	h.stored(3)
	h.ready()
	h.c.Published(h.now, 4, 0, errDown, Closed)
	require.Equal(t, []string{"cancel 4", "durable changed", "space freed",
		"failing t-0 since +100ms: publishing to metadata partition 0: down", "health degraded=false err=<nil>", "wake at +59m59.9s"}, h.ready())
	_, _, failed, ok := h.c.Leadership(tpA)
	require.True(t, ok)
	require.ErrorIs(t, failed, errDown)
}

// Regression: garbage collection never deletes what a follower still
// lacks: every follower, at the cut and now, must have applied it, and a
// report past the leader's log is not believed.
func TestCoreGCWaitsForEveryFollower(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2, 3}, -1, 0))
	h.ready()
	require.NoError(t, h.append(tpA, 1, 0, 9, 100))
	h.advance(100 * time.Millisecond)
	h.ready()
	h.encode(2)
	h.ready()
	h.stored(3)
	h.ready()
	h.published(4, 0)
	h.ready()
	h.c.Progress(h.now, tpA, 2, 1_000, 1, nil, nil)
	require.Empty(t, h.c.Collect(h.now), "follower 3 has applied nothing")
	// The placement flaps to nobody: the object is still needed by 2 and 3.
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, nil, -1, 10))
	require.Empty(t, h.c.Collect(h.now))
	require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2, 3}, -1, 10))
	h.c.Progress(h.now, tpA, 3, 10, 1, nil, nil)
	require.Empty(t, h.c.Collect(h.now), "2 and 3 rejoined: 2's earlier report no longer counts")
	h.c.Progress(h.now, tpA, 2, 10, 1, nil, nil)
	refs := h.c.Collect(h.now)
	require.Len(t, refs, 1)
	require.Equal(t, map[int32]int64{0: 0}, h.c.LowMarks())
	h.c.Forget(refs, true)
	require.Equal(t, uint64(1), h.c.Stats().ObjectsDeleted)

	// A report of an epoch the leader's log never had is not credited.
	require.True(t, h.c.NeedLineage(tpA, 0))
	require.False(t, h.c.NeedLineage(tpA, 1))
}

// RetainFor keeps an object that every follower applied until it is old
// enough, for direct readers that trail the followers; then it goes.
func TestCoreGCRetainsForReaders(t *testing.T) {
	for _, tc := range []struct {
		name     string
		retain   time.Duration
		after    time.Duration // since publication, when collection runs
		wantRefs int
	}{
		{"no retention", 0, 0, 1},
		{"too young", 5 * time.Second, 4999 * time.Millisecond, 0},
		{"old enough", 5 * time.Second, 5 * time.Second, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.RetainFor = tc.retain })
			require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2}, -1, 0))
			h.ready()
			require.NoError(t, h.append(tpA, 1, 0, 9, 100))
			h.advance(100 * time.Millisecond)
			h.ready()
			h.encode(2)
			h.ready()
			h.stored(3)
			h.ready()
			h.published(4, 0)
			h.ready()
			h.c.Progress(h.now, tpA, 2, 10, 1, nil, nil)
			require.Len(t, h.c.Collect(h.now.Add(tc.after)), tc.wantRefs)
		})
	}
	_, err := New(Config{BrokerID: 1, MetadataPartitions: 1, Interval: 1, ObjectBytes: 1, MaxPartitions: 1,
		BufferBytes: 1, MaxInflight: 1, DegradedAfter: 1, MarkerRefresh: 1, GCInterval: 1,
		BackoffInitial: 1, BackoffMax: 1, RetainFor: -1})
	require.ErrorContains(t, err, "RetainFor")
}

// The same events give the same outputs, byte for byte.
func TestCoreIsDeterministic(t *testing.T) {
	run := func() []string {
		h := newHarness(t, nil)
		var trace []string
		require.NoError(t, h.c.BecomeLeader(h.now, tpA, 1, []int32{2}, 0, 0))
		require.NoError(t, h.c.BecomeLeader(h.now, tpB, 1, []int32{3}, -1, 0))
		for i := range int64(20) {
			_ = h.append(tpA, 1, i*10, i*10+9, 400)
			_ = h.append(tpB, 1, i*10, i*10+9, 300)
			h.advance(30 * time.Millisecond)
			rd := h.ready()
			trace = append(trace, rd...)
			for _, line := range rd {
				var id uint64
				switch {
				case strings.HasPrefix(line, "encode"):
					fmt.Sscanf(line, "encode %d", &id)
					h.encode(id)
				case strings.HasPrefix(line, "upload"):
					fmt.Sscanf(line, "upload %d", &id)
					h.c.Uploaded(h.now, id, metadata.ObjectRef{}, errDown, Unavailable)
				case strings.HasPrefix(line, "retry"):
					fmt.Sscanf(line, "retry %d", &id)
					h.stored(id)
				case strings.HasPrefix(line, "publish"):
					fmt.Sscanf(line, "publish %d", &id)
					h.published(id, int64(i))
				}
			}
			trace = append(trace, h.ready()...)
		}
		return trace
	}
	a, b := run(), run()
	require.NotEmpty(t, a)
	require.True(t, slices.Equal(a, b))
}
