package metering_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/harness/memtest"
	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
)

// FuzzMeter feeds the Meter PUT bodies, metadata messages and ranges that
// a broken or hostile peer might produce. Whatever they are, nothing
// panics and the ledger conserves the bill: every request and byte counted
// is in exactly one row.
func FuzzMeter(f *testing.F) {
	body, _ := object(f, map[metadata.TopicPartition]int{tpA: 10, tpB: 30})
	msg, _ := metadata.AppendMessage(nil, &metadata.Message{Object: metadata.ObjectRef{Bucket: "b1", Key: "k"},
		Entries: []metadata.Entry{{Partition: tpA, Object: metadata.ObjectRef{Bucket: "b1", Key: "k"}, Position: 16, Length: 20}}})
	f.Add(body, msg, int64(0), int64(len(body)))
	f.Add([]byte("x"), []byte{}, int64(3), int64(-1))
	f.Fuzz(func(t *testing.T, body, msg []byte, off, n int64) {
		if len(body) == 0 {
			return // the store refuses an empty body; nothing to meter
		}
		ctx := context.Background()
		local, _ := memtest.Stores(t)
		log, err := memstore.NewLog(1)
		require.NoError(t, err)
		defer log.Close()
		m := newMeter(t)
		ref, _ := m.Store(local).Put(ctx, "k", body)
		if ref.Key == "" {
			ref = local.Local()
			ref.Key = "k"
		}
		_, _ = m.Log(log).Append(ctx, 0, msg)
		_, _ = m.Log(log).Read(ctx, 0, 0, 1)
		_, _ = m.Store(local).GetRange(ctx, ref, off, n)

		u, total := m.Usage(), m.Snapshot().Ledger.Total().Share
		for _, c := range []struct {
			name      string
			want, got float64
		}{
			{"puts", float64(u.Puts), total.Puts}, {"gets", float64(u.Gets), total.Gets},
			{"bytes up", float64(u.BytesUp), total.BytesUp}, {"bytes down", float64(u.BytesDown), total.BytesDown},
			{"metadata", float64(u.MetadataBytes), total.MetadataBytes}, {"control", float64(u.ControlBytes), total.ControlBytes},
		} {
			require.LessOrEqual(t, math.Abs(c.want-c.got), 1e-9*max(1, c.want), c.name)
		}
	})
}
