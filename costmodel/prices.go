package costmodel

import (
	"fmt"
	"slices"
	"strings"
)

// DecimalGB is 10^9 bytes, the gigabyte the presets are quoted in. The
// figures of the 0.3 MB / 100-partition example (docs/design.md, "Worked
// cost examples from the KIP-1176 discussion") only come out exactly with
// it: 0.3 MB at $0.0032/GB is 3e5/1e9 × 0.0032 = $0.96e-6. AWS's own S3
// pricing examples divide by 2^30 (BinaryGB) instead; see Prices.BytesPerGB.
const DecimalGB = 1e9

// BinaryGB is 2^30 bytes (a GiB). Set Prices.BytesPerGB to it to match an AWS
// bill line by line; every per-byte charge then drops by 6.9% on both sides
// of the comparison, and request charges do not change.
const BinaryGB = 1 << 30

// SecondsPerMonth is the month costs are quoted in: 730 hours, the convention
// of AWS's pricing calculator (an actual bill uses the month's real hours).
const SecondsPerMonth = 730 * 3600

// SecondsPerDay is used by Estimate.PerDay.
const SecondsPerDay = 24 * 3600

// Prices is what the model charges for, as plain data: start from a preset
// (S3Express2025, S3Standard2025) and override fields to match a region, a
// later price list or a negotiated discount. Every price is in US dollars and
// must be finite and non-negative; "per GB" means per BytesPerGB bytes.
type Prices struct {
	// Name labels the price list in reports, e.g. "s3express-2025".
	Name string
	// Note says what the list leaves out, for reports to print beside
	// its figures; empty when it prices everything the model counts.
	Note string

	// PutPer1000 is the price of 1000 PUT requests (one per combined object).
	PutPer1000 float64
	// GetPer1000 is the price of 1000 GET requests (one per range a
	// follower reads).
	GetPer1000 float64
	// UploadPerGB is the per-byte fee on bytes PUT. S3 Express One Zone
	// charges it on every byte since April 2025 (before, only on the part of
	// a request above 512 KB); S3 Standard has none.
	UploadPerGB float64
	// RetrievalPerGB is the per-byte fee on bytes read by GET. S3 Express
	// One Zone charges it; S3 Standard has none within a region.
	RetrievalPerGB float64
	// StoragePerGBMonth is the price of keeping one GB for a month.
	StoragePerGBMonth float64

	// CrossAZOutPerGB and CrossAZInPerGB are what EC2 charges for bytes
	// leaving and entering an instance across an AZ boundary: both sides
	// pay, so one byte crossing once costs their sum. Broker-to-broker
	// replication, the metadata log and the follower's fetch to the leader
	// pay them; requests to S3 inside the region do not.
	CrossAZOutPerGB float64
	CrossAZInPerGB  float64

	// BytesPerGB is how many bytes the per-GB prices are quoted for:
	// DecimalGB (the presets, and the worked examples) or BinaryGB (what
	// AWS's S3 pricing examples use). It must be positive.
	BytesPerGB float64
}

// S3Express2025 returns S3 Express One Zone prices in us-east-1 as of 2025
// (the Amazon S3 pricing page; docs/design.md, "Reference prices and
// latencies"), with AWS's $0.01/GB each way for cross-AZ transfer.
func S3Express2025() Prices {
	return Prices{
		Name:              "s3express-2025",
		PutPer1000:        0.00113,
		GetPer1000:        0.00003,
		UploadPerGB:       0.0032,
		RetrievalPerGB:    0.0006,
		StoragePerGBMonth: 0.11,
		CrossAZOutPerGB:   0.01,
		CrossAZInPerGB:    0.01,
		BytesPerGB:        DecimalGB,
	}
}

// S3Standard2025 returns S3 Standard prices in us-east-1 as of 2025: PUT
// $0.005 and GET $0.0004 per 1000, storage $0.023/GB-month (first 50 TB),
// no per-byte fee for transfer with EC2 in the same region (docs/design.md,
// "Reference prices and latencies"). Its latency is an order of magnitude
// above S3 Express (S3StandardLatency), the trade to make where Express is
// not offered.
func S3Standard2025() Prices {
	return Prices{
		Name:              "s3standard-2025",
		PutPer1000:        0.005,
		GetPer1000:        0.0004,
		StoragePerGBMonth: 0.023,
		CrossAZOutPerGB:   0.01,
		CrossAZInPerGB:    0.01,
		BytesPerGB:        DecimalGB,
	}
}

// Filesystem returns the prices of objects on a file system the brokers
// mount (package fsstore on NFS, EFS or FSx): no request, upload,
// retrieval or storage prices, since a file system bills none of them per
// request or per byte moved; cross-AZ transfer at AWS's $0.01/GB each way,
// which the metadata log and broker-to-broker replication still pay. What
// such a file system does cost is not modelled, and Note says so: EFS and
// FSx bill stored or provisioned capacity and throughput (EFS's elastic
// throughput per GB read and written), and a follower that reads another
// AZ's file system (EFS One Zone, FSx single-AZ) moves the bytes across
// AZs, which EC2 bills as cross-AZ transfer.
func Filesystem() Prices {
	return Prices{
		Name: "filesystem",
		Note: "a file system bills no requests; the storage and throughput charges of EFS or FSx, " +
			"and cross-AZ transfer to reach another AZ's file system, are not modelled",
		CrossAZOutPerGB: 0.01,
		CrossAZInPerGB:  0.01,
		BytesPerGB:      DecimalGB,
	}
}

// GCSStandard2026 returns Cloud Storage prices for a regional bucket of the
// Standard class in us-central1, from the Cloud Storage pricing page as of
// 2026: Class A operations (uploads, listings) $0.005 and Class B
// operations (reads) $0.0004 per 1000, storage $0.020/GB-month, no
// per-byte fee for reads from Compute Engine in the same region. Cross-zone
// traffic between brokers is the VPC network pricing page's $0.01/GB for
// data leaving a zone for another zone of the same region; Google Cloud
// does not charge the receiving side, so CrossAZInPerGB is zero (AWS
// charges both). Like S3 Standard it has no zonal latency; it is the
// choice where zonal buckets are not offered.
//
// Not yet a Preset name: the demo's --preset flag lists Preset's names.
func GCSStandard2026() Prices {
	return Prices{
		Name:              "gcsstandard-2026",
		PutPer1000:        0.005,
		GetPer1000:        0.0004,
		StoragePerGBMonth: 0.020,
		CrossAZOutPerGB:   0.01,
		CrossAZInPerGB:    0,
		BytesPerGB:        DecimalGB,
	}
}

// GCSRapid2026 returns Cloud Storage prices for a zonal bucket (Rapid
// Bucket, the Rapid storage class), Cloud Storage's analogue of S3 Express
// One Zone, in a us-central1 zone: storage $0.11/GB-month (the Cloud
// Storage pricing page of 2026 quotes Rapid storage at $0.000150685 per
// GiB-hour; times 730 hours), cross-zone traffic as GCSStandard2026.
//
// The operation prices are regional Standard's Class A and B ($0.005 and
// $0.0004 per 1000), and neither uploads nor reads carry a per-byte fee:
// the price list this preset was taken from gave no separate operation or
// data-processing price for zonal buckets. Check the pricing page for the
// zone's operation prices, and whether reads of a zonal bucket from
// another zone are charged as inter-zone transfer, and override the
// fields; with such a charge the follower's reads cost what the replication
// they replace costs, and tiering saves nothing on the wire.
//
// Not yet a Preset name: the demo's --preset flag lists Preset's names.
func GCSRapid2026() Prices {
	p := GCSStandard2026()
	p.Name = "gcsrapid-2026"
	p.StoragePerGBMonth = 0.11
	return p
}

// presets maps the names accepted by Preset to their constructors. It is a
// function, not a variable, so no caller can change what a name means.
func presets() map[string]func() Prices {
	return map[string]func() Prices{
		"s3express-2025":  S3Express2025,
		"s3standard-2025": S3Standard2025,
		"filesystem":      Filesystem,
	}
}

// PresetNames returns the names Preset accepts, sorted.
func PresetNames() []string {
	names := make([]string, 0, 3)
	for name := range presets() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Preset returns the named price list ("s3express-2025", "s3standard-2025",
// "filesystem"), for command-line flags and configuration files.
func Preset(name string) (Prices, error) {
	if mk, ok := presets()[name]; ok {
		return mk(), nil
	}
	return Prices{}, &FieldError{Field: "Prices.Name", Value: name,
		Problem: "unknown preset (want one of " + strings.Join(PresetNames(), ", ") + ")"}
}

// Validate reports every field that is negative, NaN or infinite, and a
// BytesPerGB that is not positive, naming each field.
func (p Prices) Validate() error {
	var c checker
	c.nonNegative("Prices.PutPer1000", p.PutPer1000)
	c.nonNegative("Prices.GetPer1000", p.GetPer1000)
	c.nonNegative("Prices.UploadPerGB", p.UploadPerGB)
	c.nonNegative("Prices.RetrievalPerGB", p.RetrievalPerGB)
	c.nonNegative("Prices.StoragePerGBMonth", p.StoragePerGBMonth)
	c.nonNegative("Prices.CrossAZOutPerGB", p.CrossAZOutPerGB)
	c.nonNegative("Prices.CrossAZInPerGB", p.CrossAZInPerGB)
	c.positive("Prices.BytesPerGB", p.BytesPerGB)
	return c.err()
}

// The per-unit prices the formulas use. They assume Validate passed.

func (p Prices) perPut() float64           { return p.PutPer1000 / 1000 }
func (p Prices) perGet() float64           { return p.GetPer1000 / 1000 }
func (p Prices) uploadPerByte() float64    { return p.UploadPerGB / p.BytesPerGB }
func (p Prices) retrievalPerByte() float64 { return p.RetrievalPerGB / p.BytesPerGB }
func (p Prices) crossAZPerByte() float64 {
	return (p.CrossAZOutPerGB + p.CrossAZInPerGB) / p.BytesPerGB
}
func (p Prices) storagePerByteSec() float64 {
	return p.StoragePerGBMonth / p.BytesPerGB / SecondsPerMonth
}

// CoalesceGapBytes returns the gap below which a follower should read the
// unwanted bytes between two of its sections rather than issue a second range
// GET: one GET costs as much as retrieving this many bytes. At S3 Express 2025
// prices it is 50,000 bytes. bounded is false when retrieval is free (S3
// Standard): then any gap costs nothing and only latency limits coalescing.
func (p Prices) CoalesceGapBytes() (gap float64, bounded bool) {
	if p.RetrievalPerGB == 0 {
		return 0, false
	}
	return p.perGet() / p.retrievalPerByte(), true
}

// String names the price list and its main figures.
func (p Prices) String() string {
	return fmt.Sprintf("%s (PUT $%g/1000, GET $%g/1000, upload $%g/GB, retrieval $%g/GB, cross-AZ $%g+$%g/GB)",
		p.Name, p.PutPer1000, p.GetPer1000, p.UploadPerGB, p.RetrievalPerGB, p.CrossAZOutPerGB, p.CrossAZInPerGB)
}
