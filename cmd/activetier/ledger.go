package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/metering"
)

// ledgerJSON is the run's cost by topic and partition, from the Meter
// around every broker's store.
type ledgerJSON struct {
	// Basis says how the rows were attributed.
	Basis string `json:"basis"`
	// Topics holds every topic's row, the unattributed row too if not
	// empty, most expensive first.
	Topics []ledgerRow `json:"topics"`
	// TopPartitions holds the maxLedgerPartitions most expensive
	// partitions.
	TopPartitions []ledgerRow `json:"top_partitions"`
	// SumUSD is the sum of Topics: within 0.1% of cost_usd when every
	// request went through the Meter.
	SumUSD float64 `json:"sum_usd"`
	// UnmeteredUSD is cost_usd less SumUSD: requests the Meter did not see,
	// such as the retries an S3 client makes inside one call.
	UnmeteredUSD float64 `json:"unmetered_usd"`
}

// ledgerRow is one topic's or partition's cost, by bill line.
type ledgerRow struct {
	Topic        string  `json:"topic"`
	Partition    *int32  `json:"partition,omitempty"`
	CostUSD      float64 `json:"cost_usd"`
	PutUSD       float64 `json:"put_usd"`
	GetUSD       float64 `json:"get_usd"`
	UploadUSD    float64 `json:"upload_usd"`
	RetrievalUSD float64 `json:"retrieval_usd"`
	MetadataUSD  float64 `json:"metadata_usd"`
	ControlUSD   float64 `json:"control_usd"`
}

const maxLedgerPartitions = 10

func newLedgerRow(c metering.Charge, partition bool) ledgerRow {
	r := ledgerRow{
		Topic: metering.TopicName(c.Partition), CostUSD: c.Cost.TotalUSD,
		PutUSD: c.Cost.PutUSD, GetUSD: c.Cost.GetUSD, UploadUSD: c.Cost.UploadUSD,
		RetrievalUSD: c.Cost.RetrievalUSD, MetadataUSD: c.Cost.MetadataUSD, ControlUSD: c.Cost.ControlUSD,
	}
	if partition {
		p := c.Partition.Partition
		r.Partition = &p
	}
	return r
}

// addLedger fills the report's ledger from the Meter. The demo's metadata
// log belongs to the simulated cluster and is not wrapped, so its traffic
// and the control traffic are spread over the partitions by the sections
// each had in the objects stored: by entry, since each section is
// published as one entry.
func (r *demoReport) addLedger(m *metering.Meter) error {
	if err := m.Spread(costmodel.Share{
		MetadataBytes: float64(r.usage.MetadataBytes), ControlBytes: float64(r.usage.ControlBytes),
	}); err != nil {
		return err
	}
	l := m.Snapshot().Ledger
	out := &ledgerJSON{
		Basis: "object store requests and bytes attributed request by request (a PUT by its sections' bytes, " +
			"a GET by the sections it covered); metadata and control traffic by entry",
		TopPartitions: []ledgerRow{},
	}
	for _, t := range l.Topics() {
		out.Topics = append(out.Topics, newLedgerRow(t, false))
		out.SumUSD += t.Cost.TotalUSD
	}
	parts := slices.Clone(l.Partitions)
	slices.SortStableFunc(parts, func(a, b metering.Charge) int { return cmp.Compare(b.Cost.TotalUSD, a.Cost.TotalUSD) })
	for _, p := range parts[:min(len(parts), maxLedgerPartitions)] {
		out.TopPartitions = append(out.TopPartitions, newLedgerRow(p, true))
	}
	out.UnmeteredUSD = r.CostUSD - r.Cost.ActiveTier.StorageUSD - out.SumUSD
	r.Ledger = out
	return nil
}

// writeText lists the topics that cost most, and the partitions.
func (l *ledgerJSON) writeText(w io.Writer) error {
	if l == nil || len(l.Topics) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\ncost by topic\tactivetier\n")
	for _, t := range l.Topics[:min(len(l.Topics), 5)] {
		fmt.Fprintf(tw, "  %s\t%s\n", t.Topic, usd(t.CostUSD))
	}
	if len(l.TopPartitions) > 0 {
		fmt.Fprintf(tw, "costliest partitions\t\n")
		for _, p := range l.TopPartitions[:min(len(l.TopPartitions), 3)] {
			fmt.Fprintf(tw, "  %s-%d\t%s\n", p.Topic, *p.Partition, usd(p.CostUSD))
		}
	}
	return tw.Flush()
}
