package leadcore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Kind
	}{
		{metadata.ErrClosed, Closed},
		{storage.ErrPermanent, Permanent},
		{storage.ErrUnavailable, Unavailable},
		{errors.New("something else"), Other},
	} {
		require.Equal(t, tc.want, KindOf(fmt.Errorf("wrapped: %w", tc.err)), "%v", tc.err)
	}
}
