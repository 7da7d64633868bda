package promexport

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// table renders the metric table of doc.go from the metrics themselves.
func table() string {
	var b strings.Builder
	for _, m := range metrics {
		kind := map[prometheus.ValueType]string{prometheus.CounterValue: "counter", prometheus.GaugeValue: "gauge", histogram: "histogram"}[m.kind]
		labels := strings.Join(m.labels, ",")
		if labels == "" {
			labels = "-"
		}
		fmt.Fprintf(&b, "//\t%-45s %-9s %-23s %s\n", m.name, kind, labels, m.help)
	}
	return b.String()
}

// The package documentation's table lists exactly the metrics exported,
// with their types, labels and help.
func TestDocTable(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	require.Contains(t, string(doc), table(), "doc.go's table should read:\n%s", table())
}
