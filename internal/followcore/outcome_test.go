package followcore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/storage"
)

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{storage.ErrNotFound, Gone},
		{storage.ErrUnknownBucket, Gone},
		{storage.ErrInvalidRange, Gone},
		{combiner.ErrCorrupt, Corrupt},
		{storage.ErrPermanent, Refused},
		{storage.ErrUnavailable, Unavailable},
		{errors.New("something else"), Failed},
	} {
		require.Equal(t, tc.want, OutcomeOf(fmt.Errorf("wrapped: %w", tc.err)), "%v", tc.err)
	}
	require.Equal(t, Fetched, OutcomeOf(nil))
}
