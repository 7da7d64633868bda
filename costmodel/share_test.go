package costmodel_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/costmodel"
)

// Shares priced one by one add up to RunCost of the whole run, storage
// aside: a ledger split into shares loses nothing.
func TestPriceShareAddsUpToRunCost(t *testing.T) {
	p := costmodel.S3Express2025()
	u := costmodel.Usage{Puts: 1000, Gets: 30000, BytesUp: 4e9, BytesDown: 8e9, MetadataBytes: 3e7, ControlBytes: 5e6, ProducedBytes: 9e9, RF: 3}
	want, err := costmodel.RunCost(p, u)
	require.NoError(t, err)
	var sum float64
	for _, w := range []float64{0.5, 0.3, 0.2} {
		b, err := costmodel.PriceShare(p, costmodel.Share{
			Puts: w * float64(u.Puts), Gets: w * float64(u.Gets), BytesUp: w * float64(u.BytesUp),
			BytesDown: w * float64(u.BytesDown), MetadataBytes: w * float64(u.MetadataBytes), ControlBytes: w * float64(u.ControlBytes),
		})
		require.NoError(t, err)
		sum += b.TotalUSD
	}
	require.InDelta(t, want.ActiveTier.TotalUSD, sum, 1e-12)
}

func TestShareValidate(t *testing.T) {
	for _, s := range []costmodel.Share{{Puts: -1}, {BytesDown: math.NaN()}, {ControlBytes: math.Inf(1)}} {
		_, err := costmodel.PriceShare(costmodel.S3Express2025(), s)
		var fe *costmodel.FieldError
		require.ErrorAs(t, err, &fe)
	}
	_, err := costmodel.PriceShare(costmodel.Prices{}, costmodel.Share{})
	require.Error(t, err)
}
