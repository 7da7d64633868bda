package broker

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/digest"
	"github.com/activetier/activetier/metadata"
)

// TestDigestMismatchIsLoggedAndPassedOn: the broker's OnDigestMismatch
// logs the mismatch at Error with the partition, epoch and offsets, then
// calls the one Config.Node set, if any; Status shows it as the Node
// keeps it.
func TestDigestMismatchIsLoggedAndPassedOn(t *testing.T) {
	m := &digest.Mismatch{Partition: metadata.TopicPartition{Topic: "t", Partition: 3}, Epoch: 7, Publisher: 2,
		From: 70, To: 80, Want: 0xa, Got: 0xb, What: "reread"}
	for _, withNext := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone", true: "with Node.OnDigestMismatch"}[withNext], func(t *testing.T) {
			var out bytes.Buffer
			b := &Broker{lg: slog.New(slog.NewTextHandler(&out, nil))}
			var got []*digest.Mismatch
			var next func(*digest.Mismatch)
			if withNext {
				next = func(m *digest.Mismatch) { got = append(got, m) }
			}
			b.digestMismatch(next)(m)
			assert.Contains(t, out.String(), "level=ERROR")
			assert.Contains(t, out.String(), "partition=t-3 epoch=7 publisher=2 from=70 last=79 check=reread digest=000000000000000b published=000000000000000a")
			if withNext {
				require.Len(t, got, 1)
				assert.Same(t, m, got[0])
			}
		})
	}
	assert.Equal(t, []DigestMismatch{{Topic: "t", Partition: 3, Epoch: 7, Publisher: 2, From: 70, To: 80, What: "reread"}},
		digestMismatches([]digest.Mismatch{*m}))
}
