package followcore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/internal/storeerr"
)

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{storeerr.ErrNotFound, Gone},
		{storeerr.ErrUnknownBucket, Gone},
		{storeerr.ErrInvalidRange, Gone},
		{combiner.ErrCorrupt, Corrupt},
		{storeerr.ErrPermanent, Refused},
		{storeerr.ErrUnavailable, Unavailable},
		{errors.New("something else"), Failed},
	} {
		require.Equal(t, tc.want, OutcomeOf(fmt.Errorf("wrapped: %w", tc.err)), "%v", tc.err)
	}
	require.Equal(t, Fetched, OutcomeOf(nil))
}
