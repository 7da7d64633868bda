package memstore_test

import (
	"context"
	"fmt"

	"github.com/activetier/activetier/memstore"
)

// A two-AZ cluster: the broker in use1-az4 uploads an object to its own
// bucket, the broker in use1-az6 reads one byte range of it through the
// reference, and the counters show what it cost.
func ExampleCluster() {
	ctx := context.Background()
	cluster, err := memstore.NewCluster(memstore.ClusterConfig{
		Buckets: map[string]string{
			"use1-az4": "wal--use1-az4--x-s3",
			"use1-az6": "wal--use1-az6--x-s3",
		},
		// The zero Profile waits for nothing; a demo would use
		// memstore.ParseProfile("s3express").
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	leader, _ := cluster.Store("use1-az4")
	follower, _ := cluster.Store("use1-az6")

	ref, err := leader.Put(ctx, "wal/0001", []byte("section-a|section-b|section-c"))
	if err != nil {
		fmt.Println(err)
		return
	}
	section, err := follower.GetRange(ctx, ref, 10, 9)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s from %s\n", section, ref)

	st := cluster.Stats().Total
	fmt.Printf("PUT %d (%d B up), GET %d (%d B down), cross-AZ requests %d\n",
		st.PutRequests, st.BytesUp, st.GetRequests, st.BytesDown, st.CrossAZRequests)
	// Output:
	// section-b from wal--use1-az4--x-s3/wal/0001
	// PUT 1 (29 B up), GET 1 (9 B down), cross-AZ requests 1
}

// A metadata log with four partitions. A zero poll wait makes Read return
// at once when there is nothing new, as a simulation wants.
func ExampleNewLog() {
	ctx := context.Background()
	log, err := memstore.NewLog(4, memstore.WithMaxPollWait(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer log.Close()

	for _, v := range []string{"entry-1", "entry-2"} {
		if _, err := log.Append(ctx, 2, []byte(v)); err != nil {
			fmt.Println(err)
			return
		}
	}
	recs, err := log.Read(ctx, 2, 0, 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range recs {
		fmt.Printf("partition %d offset %d: %s\n", r.Partition, r.Offset, r.Value)
	}
	low, high, _ := log.Watermarks(ctx, 2)
	fmt.Printf("watermarks [%d, %d)\n", low, high)
	// Output:
	// partition 2 offset 0: entry-1
	// partition 2 offset 1: entry-2
	// watermarks [0, 2)
}
