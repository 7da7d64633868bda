package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// A flippingLog changes one byte of the batch it is told, in every way the
// log is read, and only there: the other batches, the other partitions and
// memstore's stored bytes stay as they were appended.
func TestFlippingLog(t *testing.T) {
	ctx := context.Background()
	tp, other := metadata.TopicPartition{Topic: "t", Partition: 0}, metadata.TopicPartition{Topic: "t", Partition: 1}
	mem := memstore.NewLocalLog()
	batch := func(first int64, fill byte) storage.Batch {
		return storage.Batch{FirstOffset: first, LastOffset: first + 9, Data: []byte{fill, fill, fill, fill}}
	}
	for _, p := range []metadata.TopicPartition{tp, other} {
		require.NoError(t, mem.Append(ctx, p, []storage.Batch{batch(0, 'a'), batch(10, 'b')}))
	}
	l := &flippingLog{LocalLog: mem}
	read := map[string]func(metadata.TopicPartition) []storage.Batch{
		"Read": func(p metadata.TopicPartition) []storage.Batch {
			bs, err := l.Read(ctx, p, 0, 1<<20)
			require.NoError(t, err)
			return bs
		},
		"Batches": l.Batches,
		"EachBatch": func(p metadata.TopicPartition) []storage.Batch {
			var bs []storage.Batch
			require.NoError(t, l.EachBatch(p, 0, func(b storage.Batch) error { bs = append(bs, b); return nil }))
			return bs
		},
	}
	for name, r := range read {
		t.Run(name, func(t *testing.T) {
			l.at.Store(nil)
			assert.Equal(t, "bbbb", string(r(tp)[1].Data), "nothing flipped until told")
			l.at.Store(&flippedBatch{tp: tp, firstOffset: 10})
			bs := r(tp)
			require.Len(t, bs, 2)
			assert.Equal(t, "aaaa", string(bs[0].Data))
			assert.Equal(t, "bbfb", string(bs[1].Data), "one byte flipped ('b' ^ 0x04)")
			assert.Equal(t, "bbbb", string(r(other)[1].Data), "another partition's batch at the same offsets")
			assert.Equal(t, "bbbb", string(mem.Batches(tp)[1].Data), "memstore's stored bytes")
		})
	}
}

// A digest mismatch makes the run inconsistent by itself, with logs that
// compare equal; so does a --corrupt-follower change nobody reported.
func TestDigestVerdict(t *testing.T) {
	yes, no := true, false
	m := digestMismatch{Replica: "broker 2", Partition: "t-0", Epoch: 1, Publisher: 1, From: 10, To: 20, What: "reread"}
	for _, tc := range []struct {
		name       string
		followers  bool
		readers    *bool
		digests    digestsReport
		consistent bool
		err        string
	}{
		{"all agree", true, nil, digestsReport{Checks: 5}, true, ""},
		{"with readers", true, &yes, digestsReport{Checks: 5}, true, ""},
		{"a reader differs", true, &no, digestsReport{Checks: 5}, false, ""},
		{"logs differ", false, nil, digestsReport{Checks: 5}, false, ""},
		{"a digest differs", true, &yes, digestsReport{Checks: 5, Mismatches: 1, MismatchList: []digestMismatch{m}}, false,
			"1 replica digest differed from the leaders' published ones (first: broker 2: t-0 offsets 10-19 (reread) differ from epoch 1's leader, broker 1)"},
		{"a change unreported", true, nil, digestsReport{Checks: 5, Corrupted: &corruption{Broker: 2, Partition: "t-0", FirstOffset: 10, LastOffset: 19}}, true,
			"--corrupt-follower: broker 2 did not report the byte changed in its log of t-0 at offsets 10-19"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := demoReport{FollowersConsistent: tc.followers, ReadersConsistent: tc.readers, Digests: tc.digests}
			assert.Equal(t, tc.consistent, r.verdict())
			if err := r.Digests.inconsistency(); tc.err == "" {
				assert.NoError(t, err)
			} else {
				assert.EqualError(t, err, tc.err)
			}
		})
	}
}
