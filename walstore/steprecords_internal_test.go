package walstore

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
)

// A read of the metadata log reaches the core in steps of at most
// stepBytes (one record at least), so that role changes wait for a step
// rather than for a whole read of many large marker messages.
func TestStepRecords(t *testing.T) {
	recs := func(sizes ...int) []metadata.Record {
		rs := make([]metadata.Record, len(sizes))
		for i, n := range sizes {
			rs[i].Value = make([]byte, n)
		}
		return rs
	}
	for _, tc := range []struct {
		name string
		rs   []metadata.Record
		want int
	}{
		{"empty", recs(), 0},
		{"one small", recs(10), 1},
		{"all fit", recs(100, 200, 300), 3},
		{"exactly full", recs(stepBytes/2, stepBytes/2), 2},
		{"one byte over", recs(stepBytes/2, stepBytes/2, 1), 2},
		{"first alone is too big", recs(stepBytes+1, 10), 1},
		{"second too big", recs(10, stepBytes, 10), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, stepRecords(tc.rs))
		})
	}
}
