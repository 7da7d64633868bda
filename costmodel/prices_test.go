package costmodel

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exact is the relative tolerance for results that are exact up to float
// rounding.
const exact = 1e-9

func TestPresetsAreReferencePrices(t *testing.T) {
	// docs/design.md, "Reference prices and latencies": us-east-1, 2025.
	x := S3Express2025()
	require.NoError(t, x.Validate())
	assert.Equal(t, []float64{0.00113, 0.00003, 0.0032, 0.0006, 0.11, 0.01, 0.01, 1e9},
		[]float64{x.PutPer1000, x.GetPer1000, x.UploadPerGB, x.RetrievalPerGB, x.StoragePerGBMonth,
			x.CrossAZOutPerGB, x.CrossAZInPerGB, x.BytesPerGB})

	s := S3Standard2025()
	require.NoError(t, s.Validate())
	assert.Equal(t, []float64{0.005, 0.0004, 0, 0}, []float64{s.PutPer1000, s.GetPer1000, s.UploadPerGB, s.RetrievalPerGB})
	assert.Empty(t, x.Note+s.Note, "the S3 lists price everything the model counts")
}

// A file system has no request or per-byte prices, still pays cross-AZ
// transfer for the metadata log, and says what it leaves out.
func TestFilesystemPrices(t *testing.T) {
	f := Filesystem()
	require.NoError(t, f.Validate())
	assert.Equal(t, []float64{0, 0, 0, 0, 0, 0.01, 0.01, 1e9},
		[]float64{f.PutPer1000, f.GetPer1000, f.UploadPerGB, f.RetrievalPerGB, f.StoragePerGBMonth,
			f.CrossAZOutPerGB, f.CrossAZInPerGB, f.BytesPerGB})
	assert.Contains(t, f.Note, "EFS or FSx")
	c, err := RunCost(f, Usage{Puts: 100, Gets: 300, BytesUp: 1e9, BytesDown: 3e9, MetadataBytes: 1e6, ProducedBytes: 1e9, RF: 3})
	require.NoError(t, err)
	assert.Zero(t, c.ActiveTier.PutUSD+c.ActiveTier.GetUSD+c.ActiveTier.UploadUSD+c.ActiveTier.RetrievalUSD)
	assert.InDelta(t, 1e6*0.02/1e9, c.ActiveTier.MetadataUSD, 1e-15)
	assert.InDelta(t, 2*1e9*0.02/1e9, c.BrokerToBroker.ReplicationUSD, 1e-12)
}

func TestGCSPresets(t *testing.T) {
	// The Cloud Storage pricing page (us-central1, 2026) and the VPC
	// network pricing page (inter-zone transfer).
	std := GCSStandard2026()
	require.NoError(t, std.Validate())
	assert.Equal(t, "gcsstandard-2026", std.Name)
	assert.Equal(t, []float64{0.005, 0.0004, 0, 0, 0.020, 0.01, 0, 1e9},
		[]float64{std.PutPer1000, std.GetPer1000, std.UploadPerGB, std.RetrievalPerGB, std.StoragePerGBMonth,
			std.CrossAZOutPerGB, std.CrossAZInPerGB, std.BytesPerGB})

	rapid := GCSRapid2026()
	require.NoError(t, rapid.Validate())
	assert.Equal(t, "gcsrapid-2026", rapid.Name)
	// $0.000150685 per GiB-hour for 730 hours, to the cent.
	assert.InDelta(t, 0.000150685*730, rapid.StoragePerGBMonth, 0.0001)
	assert.Equal(t, std.PutPer1000, rapid.PutPer1000)
	assert.Equal(t, std.CrossAZOutPerGB+std.CrossAZInPerGB, rapid.crossAZPerByte()*rapid.BytesPerGB,
		"one byte crossing zones once pays the sender's side only")

	// Without a retrieval fee, coalescing is bounded by latency alone,
	// as with S3 Standard.
	_, bounded := rapid.CoalesceGapBytes()
	assert.False(t, bounded)

	rapid.StoragePerGBMonth = 1
	assert.Equal(t, 0.11, GCSRapid2026().StoragePerGBMonth, "each call returns its own copy")
}

func TestPresetByName(t *testing.T) {
	assert.Equal(t, []string{"filesystem", "s3express-2025", "s3standard-2025"}, PresetNames())
	for _, name := range PresetNames() {
		p, err := Preset(name)
		require.NoError(t, err)
		assert.Equal(t, name, p.Name)
	}
	_, err := Preset("glacier")
	require.ErrorIs(t, err, ErrInvalid)
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "Prices.Name", fe.Field)
	assert.Contains(t, err.Error(), "s3express-2025")
}

func TestPresetsAreIndependentCopies(t *testing.T) {
	p := S3Express2025()
	p.PutPer1000 = 99
	assert.Equal(t, 0.00113, S3Express2025().PutPer1000)
}

func TestPricesValidateNamesTheField(t *testing.T) {
	bad := map[string]float64{"negative": -0.001, "NaN": math.NaN(), "+Inf": math.Inf(1), "-Inf": math.Inf(-1)}
	fields := []struct {
		name string
		set  func(*Prices, float64)
	}{
		{"Prices.PutPer1000", func(p *Prices, v float64) { p.PutPer1000 = v }},
		{"Prices.GetPer1000", func(p *Prices, v float64) { p.GetPer1000 = v }},
		{"Prices.UploadPerGB", func(p *Prices, v float64) { p.UploadPerGB = v }},
		{"Prices.RetrievalPerGB", func(p *Prices, v float64) { p.RetrievalPerGB = v }},
		{"Prices.StoragePerGBMonth", func(p *Prices, v float64) { p.StoragePerGBMonth = v }},
		{"Prices.CrossAZOutPerGB", func(p *Prices, v float64) { p.CrossAZOutPerGB = v }},
		{"Prices.CrossAZInPerGB", func(p *Prices, v float64) { p.CrossAZInPerGB = v }},
		{"Prices.BytesPerGB", func(p *Prices, v float64) { p.BytesPerGB = v }},
	}
	for _, f := range fields {
		for kind, v := range bad {
			t.Run(f.name+"/"+kind, func(t *testing.T) {
				p := S3Express2025()
				f.set(&p, v)
				err := p.Validate()
				require.ErrorIs(t, err, ErrInvalid)
				var fe *FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, f.name, fe.Field)
				assert.Contains(t, err.Error(), f.name)
			})
		}
	}
	t.Run("Prices.BytesPerGB/zero", func(t *testing.T) {
		p := S3Express2025()
		p.BytesPerGB = 0
		assert.ErrorContains(t, p.Validate(), "Prices.BytesPerGB")
	})
	t.Run("zero prices are valid", func(t *testing.T) {
		assert.NoError(t, Prices{BytesPerGB: DecimalGB}.Validate())
	})
}

func TestPricesValidateReportsEveryBadField(t *testing.T) {
	p := S3Express2025()
	p.PutPer1000, p.CrossAZInPerGB = -1, math.NaN()
	err := p.Validate()
	assert.ErrorContains(t, err, "Prices.PutPer1000")
	assert.ErrorContains(t, err, "Prices.CrossAZInPerGB")
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *FieldError
		require.True(t, errors.As(e, &fe))
		fields = append(fields, fe.Field)
	}
	assert.Equal(t, []string{"Prices.PutPer1000", "Prices.CrossAZInPerGB"}, fields)
}

func TestCoalesceGapBytes(t *testing.T) {
	// One GET ($0.03 per million) buys as much as retrieving 50 KB at
	// $0.0006/GB: read across smaller gaps, split at larger ones.
	gap, bounded := S3Express2025().CoalesceGapBytes()
	require.True(t, bounded)
	assert.InEpsilon(t, 50_000, gap, exact)

	_, bounded = S3Standard2025().CoalesceGapBytes()
	assert.False(t, bounded, "S3 Standard has no retrieval fee in-region")
}
