package costmodel_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/activetier/activetier/costmodel"
)

// The 0.3 MB / 100-partition example of docs/design.md, "Worked cost
// examples from the KIP-1176 discussion": 0.3 MB of 100 partitions in one
// object, one PUT, read 100 times (one follower per partition, RF=2).
func ExampleRunCost() {
	c, err := costmodel.RunCost(costmodel.S3Express2025(), costmodel.Usage{
		Puts: 1, Gets: 100, BytesUp: 300_000, BytesDown: 300_000,
		ProducedBytes: 300_000, RF: 2,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	at := c.ActiveTier
	fmt.Printf("write $%.3g, read $%.3g, total $%.3g\n", at.WriteUSD(), at.ReadUSD(), at.TotalUSD)
	fmt.Printf("broker-to-broker $%.3g, savings %.1f%%\n", c.BrokerToBroker.TotalUSD, 100*c.SavingsRatio)
	// Output:
	// write $2.09e-06, read $3.18e-06, total $5.27e-06
	// broker-to-broker $6e-06, savings 12.2%
}

// A month of 100 MB/s at RF=3 over 1000 partitions and 6 brokers, cut every
// 100 ms.
func ExampleWorkloadCost() {
	e, err := costmodel.WorkloadCost(costmodel.S3Express2025(), costmodel.Workload{
		BytesPerSecond: 100e6, Partitions: 1000, Brokers: 6, RF: 3,
		FlushInterval: 100 * time.Millisecond,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	m := e.PerMonth()
	at := m.ActiveTier
	fmt.Printf("objects of %.2f MB, %.0f PUTs/s, %.0f GETs/s\n", e.ObjectBytes/1e6, e.PutsPerSecond, e.GetsPerSecond)
	fmt.Printf("activetier $%.0f/month: PUT %.0f, GET %.0f, upload %.0f, retrieval %.0f, metadata %.0f, control %.0f\n",
		at.TotalUSD, at.PutUSD, at.GetUSD, at.UploadUSD, at.RetrievalUSD, at.MetadataUSD, at.ControlUSD)
	fmt.Printf("broker-to-broker $%.0f/month, savings %.1f%%\n", m.BrokerToBroker.TotalUSD, 100*m.SavingsRatio)
	// Output:
	// objects of 1.67 MB, 60 PUTs/s, 300 GETs/s
	// activetier $1506/month: PUT 178, GET 24, upload 841, retrieval 315, metadata 72, control 76
	// broker-to-broker $10588/month, savings 85.8%
}

// Plan 100 MB/s within a 150 ms p99 replication lag on S3 Express.
func ExamplePlanWorkload() {
	plan, err := costmodel.PlanWorkload(costmodel.S3Express2025(), costmodel.PlanRequest{
		Workload: costmodel.Workload{BytesPerSecond: 100e6, Partitions: 1000, Brokers: 6, RF: 3},
		P99Lag:   150 * time.Millisecond,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(plan.FlushInterval, plan.MaxObjectBytes, plan.Pays)
	fmt.Println(plan.Reason)
	// Output:
	// 102ms 1700864 true
	// flush every 102ms: p99 replication lag 149ms (p50 90ms) within the 150ms budget; objects of 1.7 MB from 6 leaders (58.8 PUTs/s, 294 GETs/s: 5 followers read each object); activetier $1,499/month vs broker-to-broker $10,586/month saves $9,088/month (85.8%)
}

// Where the savings cross zero for the setting above: the throughput below
// which, and the broker count from which, activetier costs more.
func ExampleBreakEvenThroughput() {
	w := costmodel.Workload{Partitions: 1000, Brokers: 6, RF: 3, FlushInterval: 100 * time.Millisecond}
	bps, err := costmodel.BreakEvenThroughput(costmodel.S3Express2025(), w)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("pays above %.2f MB/s\n", bps/1e6)

	w.BytesPerSecond, w.Brokers = 100e6, 0
	brokers, err := costmodel.BreakEvenBrokers(costmodel.S3Express2025(), w)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("at 100 MB/s, stops paying at %d brokers\n", brokers)

	w.BytesPerSecond = 1e9
	_, err = costmodel.BreakEvenBrokers(costmodel.S3Express2025(), w)
	fmt.Println(errors.Is(err, costmodel.ErrNoBreakEven), err)
	// Output:
	// pays above 2.92 MB/s
	// at 100 MB/s, stops paying at 251 brokers
	// true costmodel: no break-even point: activetier still pays at 1001 brokers, where each partition has its own leader
}
