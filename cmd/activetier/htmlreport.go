package main

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"os"
	"strings"
)

// The HTML report is one file that opens anywhere with no network: charts
// are inline SVG drawn here, the style is inline, and a Content Security
// Policy forbids the page to fetch anything at all.

// chartSeries is one line of a chart.
type chartSeries struct {
	name   string
	color  string
	values []float64
}

// chart draws a line chart over xs (seconds) as SVG, with a dashed line per
// mark.
func chart(id, title, unit string, xs []float64, series []chartSeries, marks []timelineMark) template.HTML {
	const w, h, left, right, top, bottom = 560.0, 250.0, 64.0, 16.0, 40.0, 34.0
	maxX, maxY := 0.0, 0.0
	for _, x := range xs {
		maxX = max(maxX, x)
	}
	for _, m := range marks {
		maxX = max(maxX, m.AtS)
	}
	for _, s := range series {
		for _, v := range s.values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				maxY = max(maxY, v)
			}
		}
	}
	if maxX <= 0 {
		maxX = 1
	}
	stepY := niceStep(maxY / 4)
	maxY = stepY * math.Ceil(maxY/stepY)
	if maxY <= 0 {
		maxY, stepY = 1, 0.25
	}
	px := func(x float64) float64 { return left + (w-left-right)*x/maxX }
	py := func(y float64) float64 { return h - bottom - (h-top-bottom)*y/maxY }
	esc := template.HTMLEscapeString

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" data-chart="%s" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s">`, esc(id), w, h, w, h, esc(title))
	fmt.Fprintf(&b, `<text x="%g" y="16" class="title">%s</text>`, left, esc(title))
	lx := left
	for _, s := range series {
		fmt.Fprintf(&b, `<rect x="%g" y="24" width="10" height="3" fill="%s"/><text x="%g" y="30" class="legend">%s</text>`, lx, s.color, lx+14, esc(s.name))
		lx += 14 + 7*float64(len(s.name)) + 16
	}
	for y := 0.0; y <= maxY*1.0001; y += stepY {
		fmt.Fprintf(&b, `<line x1="%g" x2="%g" y1="%.1f" y2="%.1f" class="grid"/><text x="%g" y="%.1f" class="tick" text-anchor="end">%s</text>`,
			left, w-right, py(y), py(y), left-6, py(y)+4, esc(tickLabel(y, unit)))
	}
	stepX := niceStep(maxX / 5)
	for x := 0.0; x <= maxX*1.0001; x += stepX {
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" class="tick" text-anchor="middle">%gs</text>`, px(x), h-bottom+16, x)
	}
	fmt.Fprintf(&b, `<line x1="%g" x2="%g" y1="%g" y2="%g" class="axis"/>`, left, w-right, h-bottom, h-bottom)
	for i, m := range marks {
		// Labels one under the other: marks are often close in time.
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%g" y2="%g" class="mark"/><text x="%.1f" y="%g" class="marklabel">%s</text>`,
			px(m.AtS), px(m.AtS), top, h-bottom, px(m.AtS)+3, top+10+12*float64(i), esc(m.Label))
	}
	for _, s := range series {
		var pts strings.Builder
		for i, v := range s.values {
			if i < len(xs) && !math.IsNaN(v) && !math.IsInf(v, 0) {
				fmt.Fprintf(&pts, "%.1f,%.1f ", px(xs[i]), py(v))
			}
		}
		fmt.Fprintf(&b, `<polyline class="series" fill="none" stroke="%s" stroke-width="2" points="%s"/>`, s.color, strings.TrimSpace(pts.String()))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built from escaped text and numbers only
}

// niceStep rounds a raw tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func tickLabel(v float64, unit string) string {
	if unit == "$" {
		return usd(v)
	}
	return fmt.Sprintf("%g %s", math.Round(v*1000)/1000, unit)
}

var reportTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>activetier demo: {{.Headline}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:24px;color:#111;background:#fff;max-width:1180px}
h1{font-size:20px;margin:0 0 4px} p.sub{color:#555;margin:0 0 16px}
.charts{display:grid;grid-template-columns:repeat(2,560px);gap:16px}
svg.chart{border:1px solid #ddd;border-radius:6px;background:#fcfcfd}
.title{font-size:14px;font-weight:600} .legend,.tick{font-size:11px;fill:#444}
.grid{stroke:#eee} .axis{stroke:#999} .mark{stroke:#b91c1c;stroke-dasharray:4 3} .marklabel{font-size:11px;fill:#b91c1c}
table{border-collapse:collapse;margin:16px 0;font-size:13px} td,th{padding:3px 10px;text-align:left;border-bottom:1px solid #eee}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.headline{font-size:18px;font-weight:600;margin:12px 0 2px}
</style></head><body>
<h1>activetier demo</h1>
<p class="sub">{{.Setup}}</p>
<p class="headline">{{.Headline}}</p>
<p class="sub">{{.Comparison}}</p>
<div class="charts">{{range .Charts}}{{.}}{{end}}</div>
<table><tr><th>cost of this run ({{.Prices}})</th><th>activetier</th><th>cross-AZ replication</th></tr>
{{range .CostLines}}<tr><td>{{.Name}}</td><td class="n">{{.AT}}</td><td class="n">{{.BB}}</td></tr>
{{end}}</table>
<table><tr><th>topics that cost most</th><th>cost</th><th>PUT</th><th>GET</th><th>upload</th><th>retrieval</th><th>metadata</th><th>control</th></tr>
{{range .Rows}}{{template "row" .}}{{end}}{{if .PartRows}}<tr><th>costliest partitions</th><th colspan="7"></th></tr>
{{range .PartRows}}{{template "row" .}}{{end}}{{end}}</table>
<p class="sub">Ledger: {{.Basis}}. Sum {{.LedgerSum}} against the run's {{.Total}}.</p>
<table>{{range .Facts}}<tr><td>{{.Name}}</td><td>{{.Value}}</td></tr>
{{end}}</table>
</body></html>
{{define "row"}}<tr><td>{{.Name}}</td><td class="n">{{.Cost}}</td><td class="n">{{.Put}}</td><td class="n">{{.Get}}</td><td class="n">{{.Upload}}</td><td class="n">{{.Retrieval}}</td><td class="n">{{.Metadata}}</td><td class="n">{{.Control}}</td></tr>
{{end}}
`))

type reportRow struct{ Name, Cost, Put, Get, Upload, Retrieval, Metadata, Control string }
type reportFact struct{ Name, Value string }
type reportLine struct{ Name, AT, BB string }

// writeHTMLReport writes the run's report as one HTML file at path.
func writeHTMLReport(path string, r *demoReport) error {
	xs := make([]float64, len(r.timeline))
	col := func(f func(timelineSample) float64) []float64 {
		v := make([]float64, len(r.timeline))
		for i, s := range r.timeline {
			v[i] = f(s)
		}
		return v
	}
	for i, s := range r.timeline {
		xs[i] = s.AtS
	}
	const blue, red, green, grey = "#2563eb", "#dc2626", "#16a34a", "#6b7280"
	data := map[string]any{
		"Setup": fmt.Sprintf("%d brokers in %d AZs, %s, %d partitions at RF %d, %.0f MB/s for %.0fs, %s sections, prices %s",
			r.Brokers, r.AZs, plural(r.Topics, "topic"), r.Partitions, r.RF, r.RateMBPerSec, r.DurationS, r.Codec, r.Prices),
		"Headline":   headline(r.SavingsRatio, "replicating the same batches across AZs"),
		"Comparison": r.Comparison,
		"Prices":     r.Prices,
		"Charts": []template.HTML{
			chart("throughput", "Throughput", "MB/s", xs, []chartSeries{
				{"produced", blue, col(func(s timelineSample) float64 { return s.ProducedMBps })},
				{"replicated (all followers)", green, col(func(s timelineSample) float64 { return s.ReplicatedMBps })},
			}, r.marks),
			chart("lag", "Replication lag", "ms", xs, []chartSeries{
				{"p50", blue, col(func(s timelineSample) float64 { return s.LagP50MS })},
				{"p99", red, col(func(s timelineSample) float64 { return s.LagP99MS })},
			}, r.marks),
			chart("requests", "Object store requests", "/s", xs, []chartSeries{
				{"PUT", blue, col(func(s timelineSample) float64 { return s.PutsPerS })},
				{"GET", green, col(func(s timelineSample) float64 { return s.GetsPerS })},
			}, r.marks),
			chart("cost", "Cumulative cost", "$", xs, []chartSeries{
				{"activetier", blue, col(func(s timelineSample) float64 { return s.CostUSD })},
				{"cross-AZ replication", grey, col(func(s timelineSample) float64 { return s.CrossAZUSD })},
			}, r.marks),
		},
		"CostLines": costLines(r),
		"Total":     usd(r.CostUSD),
	}
	var rows, partRows []reportRow
	if l := r.Ledger; l != nil {
		for _, t := range l.Topics[:min(len(l.Topics), htmlLedgerTopics)] {
			rows = append(rows, ledgerReportRow(topicLabel(t), t))
		}
		for _, p := range l.TopPartitions[:min(len(l.TopPartitions), htmlLedgerParts)] {
			partRows = append(partRows, ledgerReportRow(fmt.Sprintf("%s-%d", p.Topic, *p.Partition), p))
		}
		data["Basis"], data["LedgerSum"] = l.Basis, usd(l.SumUSD)
	}
	data["Rows"], data["PartRows"] = rows, partRows
	facts := []reportFact{
		{"produced", fmt.Sprintf("%s in %s batches", humanBytes(float64(r.BytesProduced)), thousands(r.BatchesProduced))},
		{"replicated", fmt.Sprintf("%s applied by followers", humanBytes(float64(r.BytesReplicated)))},
		{"objects", fmt.Sprintf("%s uploaded (%s)", thousands(int64(r.Objects)), humanBytes(float64(r.BytesUploaded)))},
		{"lag", fmt.Sprintf("p50 %.0f ms, p99 %.0f ms, max %.0f ms", r.LagP50MS, r.LagP99MS, r.LagMaxMS)},
		{"consistent", fmt.Sprintf("%v: %d follower logs compared with their leader's", r.FollowersConsistent, r.ReplicasCompared)},
	}
	facts = append(facts, r.Digests.lines()...)
	if fo := r.Failover; fo != nil {
		facts = append(facts, reportFact{"failover", fmt.Sprintf("%s down at %.1fs; %d partitions led again at epoch %d after %.0f ms",
			fo.AZ, fo.AtS, fo.PartitionsMoved, fo.NewEpoch, fo.OfflineMS)})
	}
	facts = append(facts, r.cpuLines()...)
	data["Facts"] = append(facts, r.Readers.facts()...)
	var buf bytes.Buffer
	if err := reportTemplate.Execute(&buf, data); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	return nil
}

// How many of the costliest topics and partitions the HTML report lists;
// --json has every topic.
const (
	htmlLedgerTopics = 10
	htmlLedgerParts  = 5
)

func ledgerReportRow(name string, r ledgerRow) reportRow {
	return reportRow{name, usd(r.CostUSD), usd(r.PutUSD), usd(r.GetUSD), usd(r.UploadUSD), usd(r.RetrievalUSD), usd(r.MetadataUSD), usd(r.ControlUSD)}
}

func costLines(r *demoReport) []reportLine {
	at, bb := r.Cost.ActiveTier, r.Cost.BrokerToBroker
	return []reportLine{
		{"PUT requests", usd(at.PutUSD), "-"},
		{"GET requests", usd(at.GetUSD), "-"},
		{"upload", usd(at.UploadUSD), "-"},
		{"retrieval", usd(at.RetrievalUSD), "-"},
		{"metadata (cross-AZ)", usd(at.MetadataUSD), "-"},
		{"control (cross-AZ)", usd(at.ControlUSD), usd(bb.ControlUSD)},
		{fmt.Sprintf("replication (RF %d, cross-AZ)", r.RF), "-", usd(bb.ReplicationUSD)},
		{"total", usd(r.CostUSD), usd(r.CrossAZCostUSD)},
		{"a month at this rate", usd(r.CostUSDPerMonth), usd(r.CrossAZCostUSDPerMonth)},
	}
}
