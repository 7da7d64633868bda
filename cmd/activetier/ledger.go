package main

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/activetier/activetier/metering"
)

// ledgerJSON is the run's cost by topic and partition, from the Meter
// around every broker's store and the metadata log.
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

// ledgerRow is one topic's or partition's cost, by bill line. A
// partition's row has Partition; a topic's has Partitions, how many of its
// partitions the ledger has a row for.
type ledgerRow struct {
	Topic        string  `json:"topic"`
	Partition    *int32  `json:"partition,omitempty"`
	Partitions   int     `json:"partitions,omitempty"`
	CostUSD      float64 `json:"cost_usd"`
	PutUSD       float64 `json:"put_usd"`
	GetUSD       float64 `json:"get_usd"`
	UploadUSD    float64 `json:"upload_usd"`
	RetrievalUSD float64 `json:"retrieval_usd"`
	MetadataUSD  float64 `json:"metadata_usd"`
	ControlUSD   float64 `json:"control_usd"`
}

// How many of the costliest partitions --json lists, and how many topics
// and partitions the text report shows.
const (
	maxLedgerPartitions = 10
	textLedgerTopics    = 5
	textLedgerParts     = 3
)

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

// addLedger fills the report's ledger from the Meter, which wraps every
// broker's store and the metadata log: every request, byte and message is
// attributed as it happened.
func (r *demoReport) addLedger(m *metering.Meter) {
	l := m.Snapshot().Ledger
	out := &ledgerJSON{
		Basis: "object store requests and bytes attributed request by request (a PUT by its sections' bytes, " +
			"a GET by the sections it covered); metadata message by message, split among the entries and markers it carries; " +
			"control traffic one follower fetch per entry read",
		TopPartitions: []ledgerRow{},
	}
	partitions := make(map[string]int)
	for _, p := range l.Partitions {
		partitions[metering.TopicName(p.Partition)]++
	}
	for _, t := range l.Topics() {
		row := newLedgerRow(t, false)
		row.Partitions = partitions[row.Topic]
		out.Topics = append(out.Topics, row)
		out.SumUSD += t.Cost.TotalUSD
	}
	parts := slices.Clone(l.Partitions)
	slices.SortStableFunc(parts, func(a, b metering.Charge) int { return cmp.Compare(b.Cost.TotalUSD, a.Cost.TotalUSD) })
	for _, p := range parts[:min(len(parts), maxLedgerPartitions)] {
		out.TopPartitions = append(out.TopPartitions, newLedgerRow(p, true))
	}
	out.UnmeteredUSD = r.CostUSD - r.Cost.ActiveTier.StorageUSD - out.SumUSD
	r.Ledger = out
}

// writeText lists the topics that cost most, with their share of the
// ledger, and the costliest partitions.
func (l *ledgerJSON) writeText(w io.Writer) error {
	if l == nil || len(l.Topics) == 0 {
		return nil
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\ntopics that cost most\tactivetier\tshare\n")
	for _, t := range l.Topics[:min(len(l.Topics), textLedgerTopics)] {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", topicLabel(t), usd(t.CostUSD), share(t.CostUSD, l.SumUSD))
	}
	if more := len(l.Topics) - textLedgerTopics; more > 0 {
		fmt.Fprintf(tw, "  (%d more in --json)\t\t\n", more)
	}
	if len(l.TopPartitions) > 0 {
		fmt.Fprintf(tw, "costliest partitions\t\t\n")
		for _, p := range l.TopPartitions[:min(len(l.TopPartitions), textLedgerParts)] {
			fmt.Fprintf(tw, "  %s-%d\t%s\t%s\n", p.Topic, *p.Partition, usd(p.CostUSD), share(p.CostUSD, l.SumUSD))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The heading rows have empty cells, which the tabwriter pads.
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// topicLabel names a topic's row with its partition count.
func topicLabel(t ledgerRow) string {
	if t.Partitions == 0 {
		return t.Topic // the unattributed row
	}
	return fmt.Sprintf("%s (%s)", t.Topic, plural(t.Partitions, "partition"))
}

// share is part as a percentage of whole, "-" when whole is not positive.
func share(part, whole float64) string {
	if whole <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*part/whole)
}
