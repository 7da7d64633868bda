package digest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Two publishers of one epoch whose chains both begin at offset 0 (an
// epoch handed out twice, each leader from an empty log) wrote different
// batches at 0-19. A replica that applied and checked the first's then
// meets the second's entries; whatever it reports must name a non-empty
// range that holds the offsets that differ (0-19), as Mismatch promises:
// "the logs differ somewhere in [From, To)".
func TestTrackerTwoPublishersOfOneChain(t *testing.T) {
	batch := func(first, last int64, tag byte) storage.Batch {
		return storage.Batch{Epoch: 1, FirstOffset: first, LastOffset: last, Data: []byte{tag, byte(first), byte(last)}}
	}
	mine := []storage.Batch{batch(0, 9, 'a'), batch(10, 19, 'a')}
	theirs := []storage.Batch{batch(0, 9, 'a'), batch(10, 19, 'b')} // differ at 10
	next := []storage.Batch{batch(20, 29, 'b')}
	entry := func(pub int32, first, last int64, value uint64) metadata.Entry {
		return metadata.Entry{Partition: tpT, RecordEpoch: 1, PublisherEpoch: 1, WriterBrokerID: pub, FirstOffset: first, LastOffset: last, Digest: value, DigestFrom: 0}
	}
	theirsAt20 := digest.Over(digest.Origin, theirs)
	for _, tc := range []struct {
		name  string
		apply func(tr *digest.Tracker) digest.Result
	}{
		{"held", func(tr *digest.Tracker) digest.Result {
			return tr.Held(entry(3, 0, 19, theirsAt20), 20, 1)
		}},
		{"applied next", func(tr *digest.Tracker) digest.Result {
			return tr.Applied(entry(3, 20, 29, digest.Over(theirsAt20, next)), next, 30)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr digest.Tracker
			r := tr.Applied(entry(1, 0, 19, digest.Over(digest.Origin, mine)), mine, 20)
			require.True(t, r.Checked)
			require.Nil(t, r.Mismatch)
			r = tc.apply(&tr)
			require.True(t, r.Checked)
			require.NotNil(t, r.Mismatch, "the logs differ at 10-19")
			m := r.Mismatch
			assert.Less(t, m.From, m.To, "a non-empty range: %+v", m)
			assert.True(t, m.From <= 10 && 10 < m.To, "the range holds offset 10, the first that differs: %+v", m)
		})
	}
}
