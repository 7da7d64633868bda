package memstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metadata/metadatatest"
)

// TestLogConformance runs the metadata.Log conformance suite on the
// in-memory log, with the default long poll and with reads that never wait
// (the setting a simulation stepping its own clock uses).
func TestLogConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []memstore.LogOption
	}{
		{"default", nil},
		{"no-poll-wait", []memstore.LogOption{memstore.WithMaxPollWait(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			metadatatest.Run(t, func(t *testing.T, partitions int32) metadata.Log {
				log, err := memstore.NewLog(partitions, tc.opts...)
				require.NoError(t, err)
				return log
			})
		})
	}
}
