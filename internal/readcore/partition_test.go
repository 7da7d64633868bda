package readcore

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

var tp = metadata.TopicPartition{Topic: "orders", Partition: 0}

func entry(epoch, publisher int32, first, last int64, key string) metadata.Entry {
	obj := metadata.ObjectRef{AZ: "az1", Bucket: "b", Key: key}
	return metadata.Entry{Partition: tp, RecordEpoch: epoch, PublisherEpoch: publisher, FirstOffset: first, LastOffset: last,
		Object: obj, Position: 0, Length: 10, UncompressedSize: 10}
}

func marker(epoch int32, start int64) metadata.EpochStart {
	return metadata.EpochStart{Partition: tp, Epoch: epoch, StartOffset: start}
}

// The decisions a partition makes, without I/O: what it plans to fetch
// and up to which offset, as markers, entries and commits arrive.
func TestPartitionPlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		markers [][]metadata.EpochStart // publications
		entries []metadata.Entry
		commits []metadata.Commit
		durable bool
		want    string // "key [from, limit)" of the first planned fetch, or ""
	}{
		{"nothing committed", [][]metadata.EpochStart{{marker(5, 100)}}, []metadata.Entry{entry(5, 5, 100, 149, "a")}, nil, false, ""},
		{"committed up to 130", [][]metadata.EpochStart{{marker(5, 100)}}, []metadata.Entry{entry(5, 5, 100, 149, "a")},
			[]metadata.Commit{{Partition: tp, Epoch: 5, Offset: 130}}, false, "a [100, 130)"},
		{"durable serves what is published", [][]metadata.EpochStart{{marker(5, 100)}}, []metadata.Entry{entry(5, 5, 100, 149, "a")}, nil, true, "a [100, 150)"},
		// Epoch 7's commit vouches for epoch 7's log; the lineage the
		// reader has is epoch 5's word only: it may miss epoch 6
		// cutting epoch 5 short.
		{"a later epoch's commit without its lineage", [][]metadata.EpochStart{{marker(5, 100)}}, []metadata.Entry{entry(5, 5, 100, 149, "a")},
			[]metadata.Commit{{Partition: tp, Epoch: 7, Offset: 200}}, false, ""},
		{"a later epoch's commit with its lineage", [][]metadata.EpochStart{{marker(5, 100)}, {marker(5, 100), marker(7, 140)}},
			[]metadata.Entry{entry(5, 5, 100, 149, "a")}, []metadata.Commit{{Partition: tp, Epoch: 7, Offset: 200}}, false, "a [100, 140)"},
		{"a deposed leader's entry is never planned", [][]metadata.EpochStart{{marker(5, 100), marker(6, 100)}},
			[]metadata.Entry{entry(5, 5, 100, 149, "zombie"), entry(6, 6, 100, 119, "b")},
			[]metadata.Commit{{Partition: tp, Epoch: 6, Offset: 120}, {Partition: tp, Epoch: 5, Offset: 150}}, false, "b [100, 120)"},
		{"no lineage, no plan", nil, []metadata.Entry{entry(5, 5, 100, 149, "a")}, []metadata.Commit{{Partition: tp, Epoch: 5, Offset: 150}}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPartition(tp, 100, tc.durable, new(int), new(digestLog))
			for _, pub := range tc.markers {
				p.learnMarkers(pub)
			}
			for _, e := range tc.entries {
				p.learnEntry(e)
			}
			for _, c := range tc.commits {
				p.learnCommit(c, 1)
			}
			got := ""
			if ws := p.plan(1<<20, 1); len(ws) > 0 {
				w := ws[0]
				got = fmt.Sprintf("%s [%d, %d)", w.Entry.Object.Key, w.From, w.Limit)
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// Gone is judged only on metadata proven read to its end in a round
// after the partition last changed, and only for offsets a commit says
// were published; it names where to resume and pauses the partition once.
// A higher commit or another entry beyond next changes nothing the
// judgement rests on, so a busy partition is judged as soon as a quiet
// one.
func TestPartitionGone(t *testing.T) {
	p := newPartition(tp, 0, false, new(int), new(digestLog))
	p.learnMarkers([]metadata.EpochStart{marker(1, 0)})
	p.learnEntry(entry(1, 1, 50, 59, "a"))
	require.False(t, p.gone(1), "nothing committed past 0: the records may not exist yet")
	require.Nil(t, p.takeError())
	p.learnCommit(metadata.Commit{Partition: tp, Epoch: 1, Offset: 60}, 3)
	require.True(t, p.gone(3), "waits for a proof after round 3")
	require.Nil(t, p.takeError())
	p.learnCommit(metadata.Commit{Partition: tp, Epoch: 1, Offset: 70}, 4)
	p.learnEntry(entry(1, 1, 60, 69, "b"))
	require.Equal(t, uint64(3), p.changed, "more of what is known is no change")
	require.False(t, p.gone(4))
	g := p.takeError()
	require.NotNil(t, g)
	require.Equal(t, Pause{Partition: tp, Offset: 0, ResumeHint: 50}, *g)
	require.Nil(t, p.takeError(), "reported once")
	require.Empty(t, p.plan(1<<20, 4), "paused")
	p.seek(50)
	require.Len(t, p.plan(1<<20, 4), 2, "a and b")
}

// Durable, an entry beyond next is no proof that the records at next were
// published (a new leader publishes new objects while it still
// republishes older offsets): only a commit past next is, as when
// committed.
func TestPartitionGoneDurable(t *testing.T) {
	p := newPartition(tp, 0, true, new(int), new(digestLog))
	p.learnMarkers([]metadata.EpochStart{marker(1, 0)})
	p.learnEntry(entry(1, 1, 50, 59, "a"))
	p.learnEntry(entry(1, 1, 60, 69, "b"))
	require.Equal(t, uint64(0), p.changed)
	require.False(t, p.gone(5), "no commit past next: the republish may still come")
	require.Nil(t, p.takeError())
	p.learnCommit(metadata.Commit{Partition: tp, Epoch: 1, Offset: 70}, 6)
	require.True(t, p.gone(6), "waits for a proof after the commit")
	require.False(t, p.gone(7))
	require.Equal(t, &Pause{Partition: tp, Offset: 0, ResumeHint: 50}, p.takeError())
}
