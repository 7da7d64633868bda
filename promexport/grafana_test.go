package promexport_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/promexport"
)

// The Grafana dashboard in examples/ parses, queries only metrics the
// Collector exports (histograms through their _bucket series), and shows
// every metric that is exported by default.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("../examples/grafana/activetier.json")
	require.NoError(t, err)
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	require.NoError(t, dec.Decode(&dash))
	require.NotEmpty(t, dash.UID)
	names := promexport.MetricNames()
	used := map[string]bool{}
	ids := map[int]bool{}
	metricRE := regexp.MustCompile(`\bactivetier_[a-z0-9_]+`)
	for _, p := range dash.Panels {
		require.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			found := metricRE.FindAllString(tg.Expr, -1)
			require.NotEmpty(t, found, "%s: %s queries no activetier metric", p.Title, tg.Expr)
			for _, m := range found {
				base := m
				if b, ok := strings.CutSuffix(m, "_bucket"); ok {
					base = b
					require.True(t, strings.HasSuffix(base, "_seconds"), "%s: _bucket of a histogram only", m)
				}
				require.Contains(t, names, base, "%s queries %s, which the exporter does not export", p.Title, m)
				used[base] = true
			}
		}
	}
	for _, n := range names {
		if slices.Contains([]string{"activetier_partition_cost_usd_total", "activetier_partition_lag_offsets"}, n) {
			continue // only with Config.PartitionSeries
		}
		require.True(t, used[n], "the dashboard does not show %s", n)
	}
}
