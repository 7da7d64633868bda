package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/promexport"
)

// The ledger in --json: every topic's cost, most expensive first, with its
// partition count, the partitions that cost most, summing to cost_usd
// within 0.1%, nothing unattributed; the metadata priced is what the Meter
// around the brokers' metadata log saw, every message the log counted; and
// the headline comparison is like for like.
func TestDemoLedgerAndComparison(t *testing.T) {
	for _, codec := range []string{"zstd", "none"} {
		t.Run(codec, func(t *testing.T) {
			rep := demoJSON(t, "--duration", "1500ms", "--partitions", "30", "--rate", "3", "--seed", "5", "--codec", codec)
			require.NotNil(t, rep.Ledger)
			l := rep.Ledger
			assert.Equal(t, 4, rep.Topics)
			require.Len(t, l.Topics, 4, "the demo's topics, and no unattributed row: %+v", l.Topics)
			partitions := map[string]int{}
			for _, tr := range l.Topics {
				partitions[tr.Topic] = tr.Partitions
				assert.Positive(t, tr.MetadataUSD, tr.Topic)
				assert.Positive(t, tr.ControlUSD, tr.Topic)
			}
			assert.Equal(t, map[string]int{"topic1": 11, "topic2": 9, "topic3": 6, "topic4": 4}, partitions)
			assert.True(t, slices.IsSortedFunc(l.Topics, func(a, b ledgerRow) int {
				return -compareFloat(a.CostUSD, b.CostUSD)
			}), "most expensive first")
			assert.Equal(t, rep.MetadataBytes*costmodel.DefaultMetadataRF+rep.MetadataBytesRead, rep.MetadataCrossAZBytes,
				"the Meter saw every message the log counted")
			assert.LessOrEqual(t, math.Abs(l.SumUSD-rep.CostUSD)/rep.CostUSD, 0.001, "ledger %g, cost_usd %g", l.SumUSD, rep.CostUSD)
			assert.InDelta(t, rep.CostUSD-l.SumUSD, l.UnmeteredUSD, 1e-15)
			require.Len(t, l.TopPartitions, maxLedgerPartitions)
			assert.True(t, slices.IsSortedFunc(l.TopPartitions, func(a, b ledgerRow) int {
				return -compareFloat(a.CostUSD, b.CostUSD)
			}), "most expensive first")
			for _, p := range l.TopPartitions {
				sum := p.PutUSD + p.GetUSD + p.UploadUSD + p.RetrievalUSD + p.MetadataUSD + p.ControlUSD
				assert.InDelta(t, p.CostUSD, sum, 1e-15)
				assert.Positive(t, p.PutUSD)
			}

			assert.Contains(t, rep.Comparison, "like for like")
			if codec == "none" {
				assert.Equal(t, 1.0, rep.ProducerCompressionRatio)
				assert.Equal(t, rep.BytesProduced, rep.BytesProducedCompressed)
				assert.Equal(t, rep.SavingsRatio, rep.SavingsRatioUncompressed)
				return
			}
			assert.Contains(t, rep.Comparison, "as with compression.type=zstd")
			assert.Greater(t, rep.ProducerCompressionRatio, 0.0)
			assert.Less(t, rep.ProducerCompressionRatio, 0.8, "the generated records compress")
			assert.Less(t, rep.BytesProducedCompressed, rep.BytesProduced)
			assert.Less(t, rep.SavingsRatio, rep.SavingsRatioUncompressed,
				"against compressed batches activetier saves less than against uncompressed ones")
		})
	}
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// `demo --metrics-addr` serves /metrics while it runs: a scrape during the
// run parses as Prometheus's text format and shows the run's traffic under
// activetier_ names, each documented by promexport.
func TestDemoMetricsAddr(t *testing.T) {
	errR, errW := io.Pipe()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errR)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "serving metrics at "); ok {
				addr <- a
			}
		}
	}()
	done := make(chan int, 1)
	var out bytes.Buffer
	go func() {
		done <- run(context.Background(), []string{"demo", "--duration", "3s", "--partitions", "12", "--rate", "2",
			"--metrics-addr", "127.0.0.1:0"}, strings.NewReader(""), &out, errW)
		errW.Close()
	}()
	var url string
	select {
	case url = <-addr:
	case code := <-done:
		t.Fatalf("the demo ended (%d) before serving metrics: %s", code, out.String())
	}
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), url)

	// Scrape until the run has stored objects.
	var families map[string]*dtoFamily
	require.Eventually(t, func() bool {
		families = scrape(t, url)
		f := families["activetier_objects_total"]
		return f != nil && f.sum > 0
	}, 20*time.Second, 100*time.Millisecond)
	for name := range families {
		assert.True(t, strings.HasPrefix(name, "activetier_"), name)
		assert.Contains(t, promexport.MetricNames(), name)
	}
	for _, want := range []string{"activetier_store_requests_total", "activetier_store_request_duration_seconds",
		"activetier_cost_usd_total", "activetier_buffered_bytes", "activetier_degraded", "activetier_replication_lag_seconds"} {
		assert.Contains(t, families, want)
	}
	assert.Equal(t, 3, families["activetier_degraded"].series, "one series per broker")
	require.Equal(t, exitOK, <-done, out.String())
	_, err := http.Get(url) //nolint:noctx // the server is gone: the call fails at once
	require.Error(t, err, "the server stops with the demo")
}

type dtoFamily struct {
	series int
	sum    float64
}

// scrape fetches url and parses it as the Prometheus text format.
func scrape(t *testing.T, url string) map[string]*dtoFamily {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // bounded by the client's default and the server's lifetime
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	out := map[string]*dtoFamily{}
	for name, mf := range mfs {
		f := &dtoFamily{series: len(mf.Metric)}
		for _, m := range mf.Metric {
			f.sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
		out[name] = f
	}
	return out
}

func TestDemoMetricsAddrRefused(t *testing.T) {
	r := runCmd(t, "", "demo", "--duration", "1s", "--metrics-addr", "not an address")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "--metrics-addr")
}

// chromium finds Debian's chromium, which scripts/test.sh installs. Outside
// the test script a missing browser skips the test; under it, it fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("ACTIVETIER_REQUIRE_SERVERS") != "" {
		t.Fatal("chromium is not installed, but ACTIVETIER_REQUIRE_SERVERS says scripts/test.sh prepared the machine")
	}
	t.Skip("chromium is not installed; scripts/test.sh installs it")
	return ""
}

// `demo --report` writes one HTML file that needs no network, and a real
// browser renders its four charts, failover marks and tables.
func TestDemoReportInChromium(t *testing.T) {
	browser := chromium(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "run.html")
	r := runCmd(t, "", "demo", "--duration", "2s", "--partitions", "12", "--rate", "2", "--fail-az", "az2", "--report", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	page, err := os.ReadFile(path)
	require.NoError(t, err)
	html := string(page)
	assert.Contains(t, html, "Content-Security-Policy", "the page may fetch nothing")
	assert.NotRegexp(t, regexp.MustCompile(`(?i)(src|href)\s*=\s*"?(https?:)?//`), html, "nothing is loaded from elsewhere")
	assert.NotContains(t, html, "<script", "no script: the charts are drawn in the file")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
		"--user-data-dir=" + filepath.Join(dir, "profile"), "--window-size=1200,1400"}
	dom, err := exec.CommandContext(ctx, browser, append(args, "--dump-dom", "file://"+path)...).Output()
	require.NoError(t, err)
	for _, c := range []string{"throughput", "lag", "requests", "cost"} {
		assert.Contains(t, string(dom), fmt.Sprintf(`data-chart="%s"`, c))
	}
	assert.Equal(t, 4, strings.Count(string(dom), `<svg class="chart"`))
	assert.Equal(t, 8, strings.Count(string(dom), `<polyline class="series"`), "two lines a chart")
	assert.Equal(t, 2*4, strings.Count(string(dom), `class="mark"`), "the AZ going down and the new leaders, on every chart")
	assert.Contains(t, string(dom), "topics that cost most")
	for _, topic := range []string{"topic1 (4 partitions)", "topic2 (3 partitions)", "topic3 (3 partitions)", "topic4 (2 partitions)"} {
		assert.Contains(t, string(dom), "<td>"+topic+"</td>", "every topic's row")
	}
	_, parts, ok := strings.Cut(string(dom), "<th>costliest partitions</th>")
	require.True(t, ok, "the partitions have a heading of their own")
	assert.Equal(t, htmlLedgerParts, len(regexp.MustCompile(`<tr><td>topic[1-4]-[0-9]+</td>`).FindAllString(parts, -1)))

	shot := filepath.Join(dir, "run.png")
	out, err := exec.CommandContext(ctx, browser, append(args, "--screenshot="+shot, "file://"+path)...).CombinedOutput()
	require.NoError(t, err, string(out))
	f, err := os.Open(shot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	// A blank or unstyled page is nearly all one colour; the charts draw
	// lines in several.
	colours := map[[3]uint32]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 12, g >> 12, bl >> 12}]++
		}
	}
	total := (b.Dx() / 2) * (b.Dy() / 2)
	white := colours[[3]uint32{15, 15, 15}]
	assert.Less(t, float64(white)/float64(total), 0.97, "something is drawn")
	for _, c := range [][3]uint32{{2, 6, 14}, {13, 2, 2}} { // the blue and red lines, #2563eb and #dc2626
		assert.Positive(t, colours[c], "a line in %v", c)
	}
}
