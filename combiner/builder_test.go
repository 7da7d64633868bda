package combiner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func newBuilder(t *testing.T, cfg BuilderConfig) *Builder {
	t.Helper()
	b, err := NewBuilder(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

func tp(topic string, p int32) metadata.TopicPartition {
	return metadata.TopicPartition{Topic: topic, Partition: p}
}

func rawBatch(epoch int32, first, last int64, size int) storage.Batch {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(first) + byte(i)
	}
	return storage.Batch{Epoch: epoch, FirstOffset: first, LastOffset: last, MaxTimestamp: first * 10, Data: data}
}

// cutAndVerify cuts b and checks every object with Verify.
func cutAndVerify(t *testing.T, b *Builder) []Object {
	t.Helper()
	objs, err := b.Cut(nil)
	require.NoError(t, err)
	dec := newDecoder(t, DecoderOptions{})
	for i, o := range objs {
		infos, err := dec.Verify(o.Data)
		require.NoError(t, err, "object %d", i)
		require.Equal(t, o.Sections, infos)
		require.Len(t, o.Followers, len(o.Sections))
	}
	bytes, parts := b.Pending()
	require.Zero(t, bytes)
	require.Zero(t, parts)
	return objs
}

func partitionsOf(o Object) []metadata.TopicPartition {
	var out []metadata.TopicPartition
	for _, s := range o.Sections {
		if len(out) == 0 || out[len(out)-1] != s.Partition {
			out = append(out, s.Partition)
		}
	}
	return out
}

func TestBuilderDue(t *testing.T) {
	cfg := BuilderConfig{Interval: 100 * time.Millisecond, TargetBytes: 1000, MaxPartitions: 3}
	t.Run("nothing pending", func(t *testing.T) {
		b := newBuilder(t, cfg)
		assert.False(t, b.Due(t0.Add(time.Hour)))
		objs, err := b.Cut(nil)
		require.NoError(t, err)
		assert.Empty(t, objs)
	})
	t.Run("interval since the oldest batch", func(t *testing.T) {
		b := newBuilder(t, cfg)
		require.NoError(t, b.Add(tp("a", 0), rawBatch(1, 0, 0, 10), t0))
		require.NoError(t, b.Add(tp("a", 0), rawBatch(1, 1, 1, 10), t0.Add(90*time.Millisecond)))
		assert.False(t, b.Due(t0.Add(99*time.Millisecond)))
		assert.True(t, b.Due(t0.Add(100*time.Millisecond)), "measured from the first pending batch, not the last")
		cutAndVerify(t, b)
		// The clock restarts with the next batch.
		require.NoError(t, b.Add(tp("a", 0), rawBatch(1, 2, 2, 10), t0.Add(time.Second)))
		assert.False(t, b.Due(t0.Add(time.Second+50*time.Millisecond)))
	})
	t.Run("bytes", func(t *testing.T) {
		b := newBuilder(t, cfg)
		require.NoError(t, b.Add(tp("a", 0), rawBatch(1, 0, 0, 999), t0))
		assert.False(t, b.Due(t0))
		require.NoError(t, b.Add(tp("a", 0), rawBatch(1, 1, 1, 1), t0))
		assert.True(t, b.Due(t0))
	})
	t.Run("partitions", func(t *testing.T) {
		b := newBuilder(t, cfg)
		for p := range int32(2) {
			require.NoError(t, b.Add(tp("a", p), rawBatch(1, 0, 0, 1), t0))
		}
		assert.False(t, b.Due(t0))
		require.NoError(t, b.Add(tp("a", 0), rawBatch(1, 1, 1, 1), t0))
		assert.False(t, b.Due(t0), "a second batch of a pending partition adds no partition")
		require.NoError(t, b.Add(tp("b", 0), rawBatch(1, 0, 0, 1), t0))
		assert.True(t, b.Due(t0))
		st := b.Stats()
		assert.Equal(t, PendingStats{Bytes: 4, Batches: 4, Partitions: 3, Sections: 3, Oldest: t0}, st)
	})
	t.Run("policy", func(t *testing.T) {
		var seen PendingStats
		pol := policyFunc{due: func(s PendingStats, now time.Time) bool { seen = s; return s.Batches >= 2 }}
		b := newBuilder(t, BuilderConfig{Policy: pol})
		require.NoError(t, b.Add(tp("a", 0), rawBatch(1, 0, 0, 1), t0))
		assert.False(t, b.Due(t0))
		require.NoError(t, b.Add(tp("a", 0), rawBatch(1, 1, 1, 1), t0))
		assert.True(t, b.Due(t0))
		assert.Equal(t, 2, seen.Batches)
	})
}

// policyFunc is a CutPolicy made of functions; nil ones behave like the
// default.
type policyFunc struct {
	due    func(PendingStats, time.Time) bool
	layout func([]Group) [][]Group
}

func (p policyFunc) Due(s PendingStats, now time.Time) bool {
	if p.due == nil {
		return false
	}
	return p.due(s, now)
}

func (p policyFunc) Layout(g []Group) [][]Group {
	if p.layout == nil {
		return DefaultPolicy{}.Layout(g)
	}
	return p.layout(g)
}

func TestBuilderSplitsAtMaxPartitions(t *testing.T) {
	b := newBuilder(t, BuilderConfig{MaxPartitions: 3, SmallFlushBytes: 1})
	for p := range int32(7) {
		require.NoError(t, b.Add(tp("a", p), rawBatch(1, 0, 0, 10), t0))
	}
	objs := cutAndVerify(t, b)
	require.Len(t, objs, 3)
	assert.Equal(t, []metadata.TopicPartition{tp("a", 0), tp("a", 1), tp("a", 2)}, partitionsOf(objs[0]))
	assert.Equal(t, []metadata.TopicPartition{tp("a", 3), tp("a", 4), tp("a", 5)}, partitionsOf(objs[1]))
	assert.Equal(t, []metadata.TopicPartition{tp("a", 6)}, partitionsOf(objs[2]))
}

func TestBuilderSplitsAtTargetBytes(t *testing.T) {
	b := newBuilder(t, BuilderConfig{TargetBytes: 250, SmallFlushBytes: 1})
	for p := range int32(5) {
		require.NoError(t, b.Add(tp("a", p), rawBatch(1, 0, 0, 100), t0))
	}
	// One partition larger than the target gets an object of its own.
	require.NoError(t, b.Add(tp("b", 0), rawBatch(1, 0, 0, 400), t0))
	objs := cutAndVerify(t, b)
	var sizes []int
	for _, o := range objs {
		n := 0
		for _, s := range o.Sections {
			n += int(s.UncompressedSize)
		}
		sizes = append(sizes, n)
	}
	assert.Equal(t, []int{200, 200, 100, 400}, sizes)
}

// TestBuilderFollowerGrouping is the four-broker grouping example of
// docs/design.md, "Worked cost examples from the KIP-1176 discussion": RF=2
// on four brokers, topic A on brokers 1 and 2, topic B on 3 and 4.
func TestBuilderFollowerGrouping(t *testing.T) {
	placement := func(p metadata.TopicPartition) []int32 {
		if p.Topic == "A" {
			return []int32{2, 1, 2} // any order, duplicates tolerated
		}
		return []int32{4, 3}
	}
	add := func(t *testing.T, b *Builder, size int) {
		// Interleave the topics so that only the layout can group them.
		for p := range int32(3) {
			require.NoError(t, b.Add(tp("B", p), rawBatch(1, 0, 0, size), t0))
			require.NoError(t, b.Add(tp("A", p), rawBatch(1, 0, 0, size), t0))
		}
	}
	a := []metadata.TopicPartition{tp("A", 0), tp("A", 1), tp("A", 2)}
	bb := []metadata.TopicPartition{tp("B", 0), tp("B", 1), tp("B", 2)}

	t.Run("small flush: one object per follower set", func(t *testing.T) {
		b := newBuilder(t, BuilderConfig{Followers: placement, SmallFlushBytes: 64 << 10})
		add(t, b, 1000)
		objs := cutAndVerify(t, b)
		require.Len(t, objs, 2)
		assert.Equal(t, a, partitionsOf(objs[0]))
		assert.Equal(t, bb, partitionsOf(objs[1]))
		for _, f := range objs[0].Followers {
			assert.Equal(t, []int32{1, 2}, f)
		}
		for _, f := range objs[1].Followers {
			assert.Equal(t, []int32{3, 4}, f)
		}
	})
	t.Run("large flush: one object, follower sets adjacent", func(t *testing.T) {
		b := newBuilder(t, BuilderConfig{Followers: placement, SmallFlushBytes: 64 << 10})
		add(t, b, 20<<10)
		objs := cutAndVerify(t, b)
		require.Len(t, objs, 1)
		assert.Equal(t, append(slices.Clone(a), bb...), partitionsOf(objs[0]))
		// Each follower's sections form one contiguous byte range.
		for broker := int32(1); broker <= 4; broker++ {
			var ranges [][2]int64
			for i, s := range objs[0].Sections {
				if slices.Contains(objs[0].Followers[i], broker) {
					if n := len(ranges); n > 0 && ranges[n-1][1] == s.Position {
						ranges[n-1][1] = s.Position + s.Length
					} else {
						ranges = append(ranges, [2]int64{s.Position, s.Position + s.Length})
					}
				}
			}
			assert.Len(t, ranges, 1, "broker %d reads one range", broker)
		}
	})
}

// A follower set the placement returns sorted is used without sorting
// (the common case, a leader's own sets) and one returned in another order
// joins the same group; either way the object holds a copy, which a later
// change to the placement's slices does not reach.
func TestBuilderFollowerSetsAreCopied(t *testing.T) {
	sets := [][]int32{{1, 2, 3}, {3, 2, 1, 1}, {5, 4}, {9, 8}, {}}
	b := newBuilder(t, BuilderConfig{
		Followers:       func(p metadata.TopicPartition) []int32 { return sets[p.Partition] },
		SmallFlushBytes: 64 << 10,
	})
	for p := range int32(len(sets)) {
		require.NoError(t, b.Add(tp("A", p), rawBatch(1, 0, 0, 100), t0))
	}
	objs := cutAndVerify(t, b)
	for _, set := range sets {
		for i := range set {
			set[i] = 7
		}
	}
	got := make(map[int32][]int32)
	for _, o := range objs {
		for i, s := range o.Sections {
			got[s.Partition.Partition] = o.Followers[i]
		}
	}
	assert.Equal(t, map[int32][]int32{0: {1, 2, 3}, 1: {1, 2, 3}, 2: {4, 5}, 3: {8, 9}, 4: nil}, got)
	assert.Equal(t, []metadata.TopicPartition{tp("A", 4)}, partitionsOf(objs[0]), "no followers come first")
	assert.Equal(t, []metadata.TopicPartition{tp("A", 0), tp("A", 1)}, partitionsOf(objs[1]), "one group")
}

func TestDefaultPolicyCapsSmallFlushObjects(t *testing.T) {
	var groups []Group
	for f := range int32(10) {
		groups = append(groups, Group{Followers: []int32{f, f + 1}, Partitions: []metadata.TopicPartition{tp("t", f)}, Bytes: 100 + int(f)*10})
	}
	objs := DefaultPolicy{}.Layout(groups)
	require.Len(t, objs, DefaultMaxSmallFlushObjects)
	var flat []Group
	sizes := []int{}
	for _, o := range objs {
		require.NotEmpty(t, o)
		flat = append(flat, o...)
		n := 0
		for _, g := range o {
			n += g.Bytes
		}
		sizes = append(sizes, n)
	}
	assert.Equal(t, groups, flat, "groups stay in order, each once")
	assert.Equal(t, []int{330, 420, 330, 370}, sizes, "balanced by bytes as far as group sizes allow")

	assert.Len(t, DefaultPolicy{MaxSmallFlushObjects: 1}.Layout(groups), 1)
	assert.Len(t, DefaultPolicy{SmallFlushBytes: 1000}.Layout(groups), 1, "1450 bytes is not a small flush")
	assert.Len(t, DefaultPolicy{MaxSmallFlushObjects: 20}.Layout(groups), 10)
}

func TestBuilderEpochChangeStartsSection(t *testing.T) {
	b := newBuilder(t, BuilderConfig{})
	p := tp("orders", 0)
	require.NoError(t, b.Add(p, rawBatch(5, 100, 109, 50), t0))
	require.NoError(t, b.Add(p, rawBatch(5, 110, 119, 50), t0))
	require.NoError(t, b.Add(p, rawBatch(6, 120, 129, 50), t0))
	require.NoError(t, b.Add(p, rawBatch(6, 130, 139, 50), t0))
	assert.Equal(t, 2, b.Stats().Sections)
	objs := cutAndVerify(t, b)
	require.Len(t, objs, 1)
	secs := objs[0].Sections
	require.Len(t, secs, 2)
	assert.Equal(t, [3]int64{5, 100, 119}, [3]int64{int64(secs[0].Epoch), secs[0].FirstOffset, secs[0].LastOffset})
	assert.Equal(t, [3]int64{6, 120, 139}, [3]int64{int64(secs[1].Epoch), secs[1].FirstOffset, secs[1].LastOffset})
	assert.Equal(t, 2, secs[1].Batches)
}

func TestBuilderAddRejects(t *testing.T) {
	b := newBuilder(t, BuilderConfig{})
	p := tp("orders", 2)
	require.NoError(t, b.Add(p, rawBatch(5, 100, 109, 10), t0))
	cases := []struct {
		name  string
		tp    metadata.TopicPartition
		batch storage.Batch
		want  string
	}{
		{"overlapping offsets", p, rawBatch(5, 105, 120, 10), "partition orders-2 batch (epoch 5, offsets 105-120): first offset not above the previous batch's last offset 109"},
		{"repeated offsets", p, rawBatch(6, 100, 109, 10), "offsets 100-109"},
		{"epoch goes back", p, rawBatch(4, 110, 119, 10), "epoch below the pending epoch 5"},
		{"no data", p, storage.Batch{Epoch: 5, FirstOffset: 110, LastOffset: 110}, "no data"},
		{"last below first", tp("x", 0), rawBatch(1, 5, 4, 1), "last offset below first offset"},
		{"no topic", metadata.TopicPartition{Partition: 1}, rawBatch(1, 0, 0, 1), "neither topic name nor topic ID"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := b.Add(c.tp, c.batch, t0)
			require.ErrorIs(t, err, ErrInvalidInput)
			require.ErrorContains(t, err, c.want)
		})
	}
	st := b.Stats()
	assert.Equal(t, 1, st.Batches, "rejected batches are not added")
	assert.Equal(t, 1, st.Partitions)

	// After a cut, the partition may start anywhere (a leader that was
	// truncated and took over again).
	cutAndVerify(t, b)
	require.NoError(t, b.Add(p, rawBatch(7, 50, 59, 10), t0))
}

func TestBuilderConfigValidation(t *testing.T) {
	cases := []struct {
		cfg   BuilderConfig
		field string
	}{
		{BuilderConfig{Interval: -1}, "BuilderConfig.Interval"},
		{BuilderConfig{TargetBytes: -1}, "BuilderConfig.TargetBytes"},
		{BuilderConfig{MaxPartitions: -1}, "BuilderConfig.MaxPartitions"},
		{BuilderConfig{SmallFlushBytes: -1}, "BuilderConfig.SmallFlushBytes"},
		{BuilderConfig{SmallFlushBytes: 10, Policy: DefaultPolicy{}}, "BuilderConfig.SmallFlushBytes"},
		{BuilderConfig{Encoder: EncoderOptions{ZstdLevel: 99}}, "BuilderConfig.Encoder: combiner: invalid configuration: EncoderOptions.ZstdLevel"},
	}
	for _, c := range cases {
		_, err := NewBuilder(c.cfg)
		require.ErrorIs(t, err, ErrInvalidConfig)
		require.ErrorContains(t, err, c.field)
	}
}

func TestBuilderKeepsPendingOnBadLayout(t *testing.T) {
	drop := policyFunc{layout: func(g []Group) [][]Group { return [][]Group{g[1:]} }}
	dup := policyFunc{layout: func(g []Group) [][]Group { return [][]Group{g, g[:1]} }}
	invent := policyFunc{layout: func(g []Group) [][]Group {
		return [][]Group{append(slices.Clone(g), Group{Partitions: []metadata.TopicPartition{tp("ghost", 0)}})}
	}}
	for name, bad := range map[string]policyFunc{"leaves out": drop, "twice": dup, "nothing pending": invent} {
		t.Run(name, func(t *testing.T) {
			fixed := false
			pol := policyFunc{layout: func(g []Group) [][]Group {
				if fixed {
					return [][]Group{g}
				}
				return bad.Layout(g)
			}}
			b := newBuilder(t, BuilderConfig{Policy: pol, Followers: func(p metadata.TopicPartition) []int32 { return []int32{p.Partition} }})
			require.NoError(t, b.Add(tp("a", 0), rawBatch(1, 0, 0, 10), t0))
			require.NoError(t, b.Add(tp("a", 1), rawBatch(1, 0, 0, 10), t0))
			_, err := b.Cut(nil)
			require.ErrorContains(t, err, name)
			n, parts := b.Pending()
			assert.Equal(t, 20, n)
			assert.Equal(t, 2, parts)
			// The failed cut leaves nothing behind: a good layout cuts all.
			fixed = true
			objs := cutAndVerify(t, b)
			require.Len(t, objs, 1)
			assert.Equal(t, []metadata.TopicPartition{tp("a", 0), tp("a", 1)}, partitionsOf(objs[0]))
		})
	}
}

// TestBuilderDeterministic adds the same batches in different partition
// interleavings and expects identical objects: layout depends on the data,
// never on map order or arrival order across partitions.
func TestBuilderDeterministic(t *testing.T) {
	const seed = 20250601
	g := newKafkaGen(seed)
	sections := g.workload(40, 3, 5)
	placement := func(p metadata.TopicPartition) []int32 { return []int32{p.Partition % 4, 4 + p.Partition%3} }
	build := func(order []int) []Object {
		b := newBuilder(t, BuilderConfig{Followers: placement, Encoder: EncoderOptions{Codec: metadata.CodecZstd}})
		next := make([]int, len(sections))
		for _, i := range order {
			s := sections[i]
			require.NoError(t, b.Add(s.Partition, s.Batches[next[i]], t0))
			next[i]++
		}
		return cutAndVerify(t, b)
	}
	var order []int
	for i := range sections {
		for range sections[i].Batches {
			order = append(order, i)
		}
	}
	want := build(order)
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := range 3 {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		got := build(order)
		require.Equal(t, len(want), len(got), "seed %d round %d", seed, round)
		for i := range want {
			require.Equal(t, want[i].Data, got[i].Data, "seed %d round %d object %d", seed, round, i)
		}
	}
	// And the batches come back, each partition in offset order.
	dec := newDecoder(t, DecoderOptions{})
	seen := map[metadata.TopicPartition][]storage.Batch{}
	for _, o := range want {
		for _, s := range o.Sections {
			got, err := dec.DecodeSection(nil, o.Data[s.Position:s.Position+s.Length], s)
			require.NoError(t, err)
			seen[s.Partition] = append(seen[s.Partition], got...)
		}
	}
	for _, s := range sections {
		requireSameBatches(t, s.Batches, seen[s.Partition], fmt.Sprint(s.Partition))
	}
}

func TestBuilderClosed(t *testing.T) {
	b, err := NewBuilder(BuilderConfig{})
	require.NoError(t, err)
	require.NoError(t, b.Add(tp("a", 0), rawBatch(1, 0, 0, 1), t0))
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	require.ErrorIs(t, b.Add(tp("a", 0), rawBatch(1, 1, 1, 1), t0), ErrClosed)
	_, err = b.Cut(nil)
	require.ErrorIs(t, err, ErrClosed)
	assert.False(t, b.Due(t0.Add(time.Hour)))
}

func TestEncodedSizeBoundHoldsUncompressedObjects(t *testing.T) {
	e, err := NewEncoder(EncoderOptions{})
	require.NoError(t, err)
	defer e.Close()
	for seed := range uint64(20) {
		sections := sampleSections(seed)
		bound := encodedSizeBound(sections)
		data, _, err := e.Encode(make([]byte, 0, bound), sections)
		require.NoError(t, err)
		require.Equal(t, bound, cap(data), "seed %d: encoding outgrew the buffer Cut allocates", seed)
	}
}

// TestBuilderReuse: a builder that encodes into reused, dirty buffers
// (Buffer) and reuses the pending state of earlier cuts and removals
// makes byte for byte the objects a fresh builder makes, round after
// round, for a seeded random workload of several epochs per partition.
func TestBuilderReuse(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	var asked []int
	var spare [][]byte
	reused := newBuilder(t, BuilderConfig{Buffer: func(n int) []byte {
		asked = append(asked, n)
		if len(spare) > 0 {
			b := spare[len(spare)-1]
			spare = spare[:len(spare)-1]
			if cap(b) >= n {
				return b[:rng.IntN(cap(b)+1)] // any length: Cut must empty it
			}
		}
		return make([]byte, 0, n)
	}})
	next := map[metadata.TopicPartition]int64{}
	for round := range 20 {
		fresh := newBuilder(t, BuilderConfig{})
		for range 1 + rng.IntN(60) {
			p := tp("t", int32(rng.IntN(12)))
			epoch := int32(round) + int32(rng.IntN(2))
			if prev, ok := fresh.parts[p]; ok {
				s := prev.sections[len(prev.sections)-1]
				epoch = max(epoch, s.Batches[len(s.Batches)-1].Epoch)
			}
			n := 1 + rng.IntN(4)
			b := rawBatch(epoch, next[p], next[p]+int64(n)-1, 1+rng.IntN(3000))
			next[p] += int64(n)
			require.NoError(t, reused.Add(p, b, t0))
			require.NoError(t, fresh.Add(p, b, t0))
		}
		if rng.IntN(3) == 0 {
			p := tp("t", int32(rng.IntN(12)))
			require.Equal(t, fresh.Remove(p), reused.Remove(p), "seed %d round %d", seed, round)
		}
		asked = asked[:0]
		want := cutAndVerify(t, fresh)
		got := cutAndVerify(t, reused)
		require.Len(t, asked, len(got), "seed %d round %d: Buffer called once per object", seed, round)
		require.Equal(t, len(want), len(got), "seed %d round %d", seed, round)
		for i := range want {
			require.Equal(t, want[i].Data, got[i].Data, "seed %d round %d object %d", seed, round, i)
			require.Equal(t, want[i].Sections, got[i].Sections, "seed %d round %d object %d", seed, round, i)
			require.GreaterOrEqual(t, asked[i], len(got[i].Data), "seed %d round %d: the bound holds", seed, round)
			// Give the buffer back dirty, as a pool would.
			for j := range got[i].Data {
				got[i].Data[j] = 0xee
			}
			spare = append(spare, got[i].Data)
		}
	}
}
