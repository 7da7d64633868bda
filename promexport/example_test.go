package promexport_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/activetier/activetier/costmodel"
	"github.com/activetier/activetier/metering"
	"github.com/activetier/activetier/promexport"
)

// A broker registers the Collector on a registry of its own, and serves it
// with promhttp.HandlerFor(reg, promhttp.HandlerOpts{}). Nodes (the
// broker's walstore.Node, labelled with its ID) add the engine metrics.
func Example() {
	meter, _ := metering.New(metering.Config{Prices: costmodel.S3Express2025()})
	c, err := promexport.New(promexport.Config{Meter: meter})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, _ := reg.Gather()
	for _, mf := range mfs[:3] {
		fmt.Println(mf.GetName())
	}
	// Output:
	// activetier_metadata_appended_bytes_total
	// activetier_metadata_read_bytes_total
	// activetier_metadata_request_duration_seconds
}
