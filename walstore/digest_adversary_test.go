package walstore_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/internal/harness/clustertest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// Adversarial tests of replica digests, through the Node only: a correct
// cluster, however its leadership moves, must never report a mismatch,
// and a follower whose log really differs from its leader's must.

// mismatchLog collects what OnDigestMismatch is called with.
type mismatchLog struct {
	mu  sync.Mutex
	got []digest.Mismatch
}

func (l *mismatchLog) record(m *digest.Mismatch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, *m)
}

func (l *mismatchLog) all() []digest.Mismatch {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]digest.Mismatch(nil), l.got...)
}

// startStoppable is world.start for a Node the test stops itself, as a
// broker that restarts: the returned stop ends its Run and checks it
// returned nil. The world routes progress to the latest Node of an id.
func (w *world) startStoppable(id int32, cfg walstore.NodeConfig) (*walstore.Node, func()) {
	w.t.Helper()
	cfg.BrokerID = id
	if cfg.Store == nil {
		cfg.Store = w.store(id)
	}
	if cfg.Log == nil {
		cfg.Log = w.meta
	}
	cfg.Interval = 10 * time.Millisecond
	cfg.Backoff = walstore.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	cfg.Logger = discard()
	cfg.OnProgress = w.relay
	n, err := walstore.NewNode(cfg)
	require.NoError(w.t, err)
	w.mu.Lock()
	w.nodes[id] = n
	w.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			require.NoError(w.t, <-done, "broker %d's Run", id)
		})
	}
	w.t.Cleanup(stop)
	return n, stop
}

// otherBatch is a batch at the same offsets and epoch as
// clustertest.MakeBatch's, with other bytes: what a second leader of the
// same epoch writes there.
func otherBatch(tp metadata.TopicPartition, epoch int32, first, last int64) storage.Batch {
	b := clustertest.MakeBatch(tp, epoch, first, last)
	b.Data = bytes.ReplaceAll(b.Data, []byte("payload="), []byte("PAYLOAD="))
	return b
}

func produceBatch(t *testing.T, n *walstore.Node, local storage.LocalLog, tp metadata.TopicPartition, b storage.Batch) {
	t.Helper()
	require.NoError(t, local.Append(context.Background(), tp, []storage.Batch{b}))
	require.NoError(t, n.Append(context.Background(), tp, b))
}

// requireNoMismatch checks that none of the nodes found a mismatch, by
// its stats and by its callback.
func requireNoMismatch(t *testing.T, what string, ms map[int32]*mismatchLog, nodes map[int32]*walstore.Node) {
	t.Helper()
	for id, n := range nodes {
		fs := n.Stats().Follower
		require.Zero(t, fs.DigestMismatches, "%s: broker %d: %+v", what, id, fs.Mismatches)
		require.Empty(t, fs.Mismatches, "%s: broker %d", what, id)
	}
	for id, l := range ms {
		require.Empty(t, l.all(), "%s: broker %d's OnDigestMismatch", what, id)
	}
}

// requireCovers checks that some mismatch was reported, every one names
// tp, and one has a range that holds offset, the first that differs. The
// range checks do not stop the test, so that all that is wrong shows.
func requireCovers(t *testing.T, ms []digest.Mismatch, tp metadata.TopicPartition, offset int64) {
	t.Helper()
	require.NotEmpty(t, ms, "a divergence at %d must be reported", offset)
	for _, m := range ms {
		require.Equal(t, tp, m.Partition)
		require.ErrorIs(t, &m, digest.ErrMismatch)
		require.NotEqual(t, m.Want, m.Got)
		assert.Less(t, m.From, m.To, "a mismatch's range [From, To) is not empty: %+v", m)
	}
	for _, m := range ms {
		if m.From <= offset && offset < m.To {
			return
		}
	}
	assert.Failf(t, "no mismatch covers the first differing offset", "offset %d, mismatches %+v", offset, ms)
}

// A correct cluster whose leadership moves, whose brokers restart from
// their local logs, truncate on failover, republish and are re-elected
// without a break never reports a mismatch, and checks digests.
func TestDigestCorrectClusterNeverMismatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		logs := map[int32]*memstore.LocalLog{1: memstore.NewLocalLog(), 2: memstore.NewLocalLog(), 3: memstore.NewLocalLog()}
		ms := map[int32]*mismatchLog{1: {}, 2: {}, 3: {}}
		nodes := map[int32]*walstore.Node{}
		stops := map[int32]func(){}
		start := func(id int32) {
			nodes[id], stops[id] = w.startStoppable(id, walstore.NodeConfig{Local: logs[id], OnDigestMismatch: ms[id].record})
		}
		for id := int32(1); id <= 3; id++ {
			start(id)
		}
		others := func(leader int32) []int32 {
			var f []int32
			for id := int32(1); id <= 3; id++ {
				if id != leader {
					f = append(f, id)
				}
			}
			return f
		}
		// lead makes leader lead epoch from its log end, the others follow.
		lead := func(leader, epoch int32) {
			t.Helper()
			for _, id := range others(leader) {
				require.NoError(t, nodes[id].BecomeFollower(ctx, tpA, epoch, leader))
			}
			end, err := logs[leader].EndOffset(tpA)
			require.NoError(t, err)
			require.NoError(t, logs[leader].AssignEpoch(tpA, epoch, end))
			require.NoError(t, nodes[leader].BecomeLeader(ctx, tpA, epoch, others(leader), -1))
		}
		next := int64(0)
		write := func(leader, epoch int32, batches int, wait bool) {
			t.Helper()
			for range batches {
				produce(t, nodes[leader], logs[leader], tpA, epoch, next, next+4)
				next += 5
				settle(20 * time.Millisecond)
			}
			if wait {
				require.NoError(t, nodes[leader].WaitReplicated(ctx, tpA, epoch, next-1))
			}
		}
		checks := func() uint64 {
			var n uint64
			for _, nd := range nodes {
				n += nd.Stats().Follower.DigestChecks
			}
			return n
		}

		lead(1, 1)
		write(1, 1, 4, true)
		requireNoMismatch(t, "epoch 1", ms, nodes)

		// Failover to 2 while 1 held records no one else has: 1 truncates.
		down := []int32{2, 3}
		for _, id := range down {
			require.NoError(t, nodes[id].StopReplica(ctx, tpA))
		}
		write(1, 1, 2, false) // 20-29 on broker 1 only
		next = 20
		lead(2, 2)
		write(2, 2, 3, true)
		requireSameLog(t, logs[2], logs[1], tpA)
		requireNoMismatch(t, "failover with truncation", ms, nodes)

		// Re-elected at a higher epoch without a break.
		require.NoError(t, logs[2].AssignEpoch(tpA, 4, next))
		require.NoError(t, nodes[2].BecomeLeader(ctx, tpA, 4, others(2), -1))
		for _, id := range others(2) {
			require.NoError(t, nodes[id].BecomeFollower(ctx, tpA, 4, 2))
		}
		write(2, 4, 3, true)
		requireNoMismatch(t, "re-election", ms, nodes)

		// Broker 3 restarts from its local log, then leads.
		stops[3]()
		start(3)
		require.NoError(t, nodes[3].BecomeFollower(ctx, tpA, 4, 2))
		write(2, 4, 2, true)
		requireSameLog(t, logs[2], logs[3], tpA)
		lead(3, 5)
		write(3, 5, 3, true)
		requireNoMismatch(t, "restart, then lead", ms, nodes)

		// Republish from the start of the retained log, and from the
		// middle: what the followers hold is checked again.
		require.NoError(t, nodes[3].Republish(ctx, tpA, 0))
		settle(time.Second)
		require.NoError(t, nodes[3].Republish(ctx, tpA, 35))
		settle(time.Second)
		write(3, 5, 2, true)
		requireNoMismatch(t, "republish", ms, nodes)

		// Broker 1 restarts while a follower and leads at once.
		stops[1]()
		start(1)
		lead(1, 6)
		write(1, 6, 3, true)
		// And the leadership returns to 2, which restarted too.
		stops[2]()
		start(2)
		lead(2, 7)
		write(2, 7, 3, true)
		settle(time.Second)
		for id := int32(1); id <= 3; id++ {
			requireSameLog(t, logs[2], logs[id], tpA)
		}
		requireNoMismatch(t, "end", ms, nodes)
		require.Positive(t, checks(), "the followers compared digests")
		t.Logf("digest checks after restarts: %d", checks())
	})
}

// A controller that hands epoch 1 out twice: brokers 1 and 3 both lead
// tpA at epoch 1 from an empty log and write different records at the
// same offsets. Fencing by epoch cannot tell them apart; the digest can.
// Broker 2 follows epoch 1 under broker 1, applies its records, and is
// then told (at the same epoch) that broker 3 leads: its log holds broker
// 1's records where broker 3's entries name others, and it must say so,
// by OnDigestMismatch and in its stats, for the first offset that differs.
func TestDigestsCatchTwoLeadersAtOneEpoch(t *testing.T) {
	for _, tc := range []struct {
		name string
		// switchFirst: broker 2 is told broker 3 leads before broker 3
		// writes anything; otherwise after.
		switchFirst bool
		// more: broker 3 goes on writing past what broker 1 wrote.
		more bool
		// detect: the divergence must be reported. Broker 3's entry for
		// 0-19, read while broker 2 follows broker 1, is not compared
		// (observed, not promised either way), and a republish carries
		// no digest (Entry.Digest: zero when the publisher kept none), so
		// a follower switched after it and given nothing new may not
		// know.
		detect bool
		// echoSeed, if not zero, makes the metadata log an echoLog with
		// that seed: duplicates and stale messages hide nothing.
		echoSeed uint64
	}{
		{"switch first, held only", true, false, true, 0},
		{"switch first, then appended", true, true, true, 0},
		{"switch after, then appended", false, true, true, 0},
		{"switch after, held only", false, false, false, 0},
		{"switch first, then appended, echoing log", true, true, true, 5},
		{"switch after, then appended, echoing log", false, true, true, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				var meta metadata.Log = w.meta
				if tc.echoSeed != 0 {
					t.Logf("echo seed %d", tc.echoSeed)
					meta = &echoLog{Log: w.meta, rng: rand.New(rand.NewPCG(tc.echoSeed, 7)), past: map[int32][][]byte{}}
				}
				log1, log2, log3 := memstore.NewLocalLog(), memstore.NewLocalLog(), memstore.NewLocalLog()
				var seen mismatchLog
				n1 := w.start(1, walstore.NodeConfig{Local: log1, Log: meta})
				n2 := w.start(2, walstore.NodeConfig{Local: log2, Log: meta, OnDigestMismatch: seen.record})
				n3 := w.start(3, walstore.NodeConfig{Local: log3, Log: meta})
				require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
				require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
				require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
				for off := int64(0); off < 20; off += 5 {
					produce(t, n1, log1, tpA, 1, off, off+4)
				}
				require.NoError(t, n1.WaitReplicated(ctx, tpA, 1, 19))
				require.Zero(t, n2.Stats().Follower.DigestMismatches, "so far one leader")

				require.NoError(t, log3.AssignEpoch(tpA, 1, 0))
				require.NoError(t, n3.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
				if tc.switchFirst {
					require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 3))
				}
				// Broker 3's records differ from broker 1's from offset 5.
				produceBatch(t, n3, log3, tpA, clustertest.MakeBatch(tpA, 1, 0, 4))
				for off := int64(5); off < 20; off += 5 {
					produceBatch(t, n3, log3, tpA, otherBatch(tpA, 1, off, off+4))
				}
				settle(time.Second)
				if !tc.switchFirst {
					require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 3))
				}
				if tc.more {
					for off := int64(20); off < 40; off += 5 {
						produceBatch(t, n3, log3, tpA, otherBatch(tpA, 1, off, off+4))
					}
				} else {
					// A republish makes broker 3 publish its log again
					// for broker 2 to hold against.
					require.NoError(t, n3.Republish(ctx, tpA, 0))
				}
				settle(5 * time.Second)

				fs := n2.Stats().Follower
				t.Logf("follower: checks %d, taken %d, mismatches %d %+v", fs.DigestChecks, fs.DigestsTaken, fs.DigestMismatches, fs.Mismatches)
				t.Logf("follower log %v", clustertest.Describe(log2.Batches(tpA)))
				for _, e := range allEntries(t, w.meta, tpA) {
					t.Logf("entry by %d epoch %d [%d,%d] digest %x from %d", e.WriterBrokerID, e.PublisherEpoch, e.FirstOffset, e.LastOffset, e.Digest, e.DigestFrom)
				}
				got := seen.all()
				if tc.detect {
					requireCovers(t, got, tpA, 5)
				}
				require.Equal(t, uint64(len(got)), fs.DigestMismatches, "OnDigestMismatch once per mismatch counted")
				require.Equal(t, got[max(0, len(got)-16):], fs.Mismatches, "Stats keeps the latest")
				for _, m := range got {
					require.Equal(t, int32(1), m.Epoch)
				}
			})
		})
	}
}

// allEntries returns every entry of tp in log, partition after partition,
// republished ones included.
func allEntries(t *testing.T, log metadata.Log, tp metadata.TopicPartition) []metadata.Entry {
	t.Helper()
	var out []metadata.Entry
	for p := range log.Partitions() {
		_, high, err := log.Watermarks(context.Background(), p)
		require.NoError(t, err)
		if high == 0 {
			continue
		}
		recs, err := log.Read(context.Background(), p, 0, int(high))
		require.NoError(t, err)
		for _, r := range recs {
			m, err := metadata.DecodeMessage(r.Value)
			require.NoError(t, err)
			for _, e := range m.Entries {
				if e.Partition == tp {
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// publishWithDigests copies each input into an object of broker 1's
// bucket and publishes its entry with the digest digestOf gives, to the
// metadata partition broker reads: a publisher whose values are wrong.
func (w *world) publishWithDigests(ctx context.Context, broker int32, markers []metadata.EpochStart, in walstore.CopyInput, dg, from int64) {
	t := w.t
	t.Helper()
	mgr, err := walstore.NewManager(walstore.ManagerConfig{Store: w.store(1), BrokerID: 1, Logger: discard()})
	require.NoError(t, err)
	defer mgr.Close()
	entries, err := mgr.Copy(ctx, []walstore.CopyInput{in})
	require.NoError(t, err)
	entries[0].Digest, entries[0].DigestFrom = uint64(dg), from
	msg := metadata.Message{WriterBrokerID: 1, Markers: markers, Entries: entries, Object: entries[0].Object}
	buf, err := metadata.AppendMessage(nil, &msg)
	require.NoError(t, err)
	_, err = w.meta.Append(ctx, broker%w.meta.Partitions(), buf)
	require.NoError(t, err)
}

// A publisher whose every digest is wrong: each entry is a mismatch,
// each is passed to OnDigestMismatch once, counted, and Stats keeps only
// the latest 16; replication goes on.
func TestDigestMismatchesStayBounded(t *testing.T) {
	const seed = 20261203
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		w := newWorld(t)
		log2 := memstore.NewLocalLog()
		var seen mismatchLog
		n2 := w.start(2, walstore.NodeConfig{Local: log2, OnDigestMismatch: seen.record})
		require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
		const entries = 40
		markers := []metadata.EpochStart{{Partition: tpA, Epoch: 1, StartOffset: 0, LeaderBrokerID: 1}}
		for i := range int64(entries) {
			w.publishWithDigests(ctx, 2, markers, copyOf(tpA, 1, 5*i, 5*i+4), int64(rng.Uint64()>>1)|1, 0)
			markers = nil
			settle(50 * time.Millisecond)
		}
		settle(time.Second)
		end, err := log2.EndOffset(tpA)
		require.NoError(t, err)
		require.Equal(t, int64(5*entries), end, "replication goes on")
		fs := n2.Stats().Follower
		got := seen.all()
		require.Equal(t, uint64(entries), fs.DigestMismatches)
		require.Len(t, got, entries, "one call per mismatch")
		require.Len(t, fs.Mismatches, 16)
		require.Equal(t, got[entries-16:], fs.Mismatches, "the latest, oldest first")
		for i, m := range got {
			require.Equal(t, tpA, m.Partition)
			require.Equal(t, int64(5*i+5), m.To, "mismatch %d", i)
			require.Less(t, m.From, m.To, "mismatch %d", i)
		}
	})
}

// flipLog stores one bit of the batch that begins at offset flipped: a
// disk that corrupts a write silently.
type flipLog struct {
	*memstore.LocalLog
	at int64
}

func (l flipLog) Append(ctx context.Context, tp metadata.TopicPartition, bs []storage.Batch) error {
	out := make([]storage.Batch, len(bs))
	for i, b := range bs {
		if b.FirstOffset == l.at {
			b.Data = bytes.Clone(b.Data)
			b.Data[len(b.Data)/2] ^= 0x10
		}
		out[i] = b
	}
	return l.LocalLog.Append(ctx, tp, out)
}

// A follower whose disk flips a bit of one batch as it is written, then
// replicates on, with and without a restart in between. The digest is of
// the batches as the follower applied them, not as its disk returns them,
// and a restarted follower takes the leader's value at its log end: the
// package doc does not promise that either catches the corruption, so
// the test checks only that nothing false or unbounded comes of it, and
// logs what was detected.
func TestDigestBitFlipOnWrite(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "running", true: "restarted"}[restart], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				log1, mem2 := memstore.NewLocalLog(), memstore.NewLocalLog()
				var seen mismatchLog
				cfg2 := walstore.NodeConfig{Local: flipLog{LocalLog: mem2, at: 10}, OnDigestMismatch: seen.record}
				n1 := w.start(1, walstore.NodeConfig{Local: log1})
				n2, stop2 := w.startStoppable(2, cfg2)
				require.NoError(t, log1.AssignEpoch(tpA, 1, 0))
				require.NoError(t, n1.BecomeLeader(ctx, tpA, 1, []int32{2}, -1))
				require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
				for off := int64(0); off < 20; off += 5 {
					produce(t, n1, log1, tpA, 1, off, off+4)
					settle(20 * time.Millisecond)
				}
				require.NoError(t, n1.WaitReplicated(ctx, tpA, 1, 19))
				require.NotEqual(t, log1.Batches(tpA)[2].Data, mem2.Batches(tpA)[2].Data, "the flip happened")
				before := n2.Stats().Follower
				if restart {
					stop2()
					n2, _ = w.startStoppable(2, cfg2)
					require.NoError(t, n2.BecomeFollower(ctx, tpA, 1, 1))
				}
				for off := int64(20); off < 40; off += 5 {
					produce(t, n1, log1, tpA, 1, off, off+4)
					settle(20 * time.Millisecond)
				}
				require.NoError(t, n1.WaitReplicated(ctx, tpA, 1, 39))
				fs := n2.Stats().Follower
				got := seen.all()
				t.Logf("before: checks %d mismatches %d; after: checks %d taken %d mismatches %d %+v",
					before.DigestChecks, before.DigestMismatches, fs.DigestChecks, fs.DigestsTaken, fs.DigestMismatches, got)
				require.Positive(t, fs.DigestChecks)
				require.LessOrEqual(t, len(fs.Mismatches), 16)
				for _, m := range got {
					require.Equal(t, tpA, m.Partition)
					assert.True(t, m.From <= 10 && 10 < m.To, "a reported mismatch covers the flipped batch: %+v", m)
				}
			})
		})
	}
}

// echoLog is a metadata log that delivers messages more than once: some
// are appended twice in a row (a retried append whose answer was lost),
// and some earlier ones again later, stale (a publisher's retry that
// arrives after the cluster moved on).
type echoLog struct {
	metadata.Log
	mu   sync.Mutex
	rng  *rand.Rand
	past map[int32][][]byte
}

func (l *echoLog) Append(ctx context.Context, partition int32, value []byte) (int64, error) {
	off, err := l.Log.Append(ctx, partition, value)
	if err != nil {
		return off, err
	}
	l.mu.Lock()
	dup := l.rng.IntN(3) == 0
	var stale []byte
	if past := l.past[partition]; len(past) > 0 && l.rng.IntN(3) == 0 {
		stale = past[l.rng.IntN(len(past))]
	}
	l.past[partition] = append(l.past[partition], bytes.Clone(value))
	l.mu.Unlock()
	if dup {
		if _, err := l.Log.Append(ctx, partition, value); err != nil {
			return off, err
		}
	}
	if stale != nil {
		if _, err := l.Log.Append(ctx, partition, stale); err != nil {
			return off, err
		}
	}
	return off, nil
}

// A metadata log that duplicates messages and delivers stale ones again,
// around a failover that truncates a follower: the entries are the same
// entries, so no mismatch may come of them.
func TestDigestEchoingMetadataLogNoFalseMismatch(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 42} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Logf("seed %d", seed)
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				w := newWorld(t)
				echo := &echoLog{Log: w.meta, rng: rand.New(rand.NewPCG(seed, 7)), past: map[int32][][]byte{}}
				logs := map[int32]*memstore.LocalLog{1: memstore.NewLocalLog(), 2: memstore.NewLocalLog(), 3: memstore.NewLocalLog()}
				ms := map[int32]*mismatchLog{1: {}, 2: {}, 3: {}}
				nodes := map[int32]*walstore.Node{}
				for id := int32(1); id <= 3; id++ {
					nodes[id] = w.start(id, walstore.NodeConfig{Local: logs[id], Log: echo, OnDigestMismatch: ms[id].record})
				}
				require.NoError(t, logs[1].AssignEpoch(tpA, 1, 0))
				require.NoError(t, nodes[1].BecomeLeader(ctx, tpA, 1, []int32{2, 3}, -1))
				require.NoError(t, nodes[2].BecomeFollower(ctx, tpA, 1, 1))
				require.NoError(t, nodes[3].BecomeFollower(ctx, tpA, 1, 1))
				for off := int64(0); off < 30; off += 5 {
					produce(t, nodes[1], logs[1], tpA, 1, off, off+4)
					settle(20 * time.Millisecond)
				}
				require.NoError(t, nodes[1].WaitReplicated(ctx, tpA, 1, 29))
				// Broker 2 leads epoch 2 from 30 while broker 1 wrote 30-39
				// that only broker 3 applied: broker 3 and 1 truncate, and
				// the echoes of epoch 1's messages keep coming.
				require.NoError(t, nodes[2].StopReplica(ctx, tpA))
				for off := int64(30); off < 40; off += 5 {
					produce(t, nodes[1], logs[1], tpA, 1, off, off+4)
					settle(20 * time.Millisecond)
				}
				settle(time.Second)
				require.NoError(t, nodes[1].BecomeFollower(ctx, tpA, 2, 2))
				require.NoError(t, nodes[3].BecomeFollower(ctx, tpA, 2, 2))
				require.NoError(t, logs[2].AssignEpoch(tpA, 2, 30))
				require.NoError(t, nodes[2].BecomeLeader(ctx, tpA, 2, []int32{1, 3}, -1))
				for off := int64(30); off < 60; off += 5 {
					produce(t, nodes[2], logs[2], tpA, 2, off, off+4)
					settle(20 * time.Millisecond)
				}
				require.NoError(t, nodes[2].WaitReplicated(ctx, tpA, 2, 59))
				require.NoError(t, nodes[2].Republish(ctx, tpA, 0))
				settle(time.Second)
				for id := int32(1); id <= 3; id++ {
					requireSameLog(t, logs[2], logs[id], tpA)
				}
				requireNoMismatch(t, "echoes", ms, nodes)
				var checks uint64
				for _, n := range nodes {
					checks += n.Stats().Follower.DigestChecks
				}
				require.Positive(t, checks)
			})
		})
	}
}
