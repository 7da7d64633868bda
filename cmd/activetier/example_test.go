package main

import (
	"context"
	"os"
	"strings"
)

// The cost model for the kind of cluster the KIP-1176 discussion had in
// mind (docs/design.md, "Worked cost examples from the KIP-1176
// discussion"): 30 MB/s over 300
// partitions on 3 brokers in 3 AZs at RF 3, objects cut every 250 ms.
func Example_cost() {
	run(context.Background(), []string{"cost", "--mb-per-sec", "30", "--partitions", "300", "--brokers", "3", "--rf", "3", "--interval", "250ms"},
		strings.NewReader(""), os.Stdout, os.Stderr)
	// Output:
	// workload          30.0 MB/s over 300 partitions on 3 leaders, RF 3, 3 brokers
	// prices            s3express-2025
	// objects           12/s of 2.50 MB, 100 sections each, cut every 250ms
	// range GETs        24/s of 2.50 MB (2 followers per object, 1 GET each)
	// metadata          40.1 KB/s published, 160 KB/s crossing AZs
	// broker-to-broker  60.0 MB/s would cross AZs
	// comparison        like for like: objects and broker-to-broker replication priced on the same 30.0 MB/s, the batches as producers sent them (compressed or not)
	// break-even        activetier pays above 491 KB/s at these settings
	//
	// per month                 activetier  broker-to-broker
	//   PUT requests            $35.64      -
	//   GET requests            $1.89       -
	//   upload                  $252.29     -
	//   retrieval               $94.61      -
	//   storage                 $0          -
	//   metadata (cross-AZ)     $8.43       -
	//   control (cross-AZ)      $9.08       $9.08
	//   replication (cross-AZ)  -           $3,154
	//   total                   $401.93     $3,163
	//
	// activetier saves $2,761 per month (87.3%)
}

// Listing and verifying the checked-in sample object.
func Example_inspect() {
	run(context.Background(), []string{"inspect", "testdata/sample.obj"}, strings.NewReader(""), os.Stdout, os.Stderr)
	// Output:
	// object testdata/sample.obj: 9555 bytes, 5 sections
	//
	// #  partition  epoch  offsets    batches  bytes      codec  size   ratio  checksum          max timestamp             status
	// 0  logs-0     7      0-47       3        8+2806     zstd   12422  4.43   b653970bff0d7614  2025-06-01T12:00:00.015Z  ok
	// 1  logs-1     7      500-523    2        2814+1638  zstd   6219   3.80   194894c73b765c75  2025-06-01T12:00:00.021Z  ok
	// 2  logs-2     4      1200-1215  2        4452+1237  zstd   4141   3.35   7df5f56c3bb2e051  2025-06-01T12:00:00.003Z  ok
	// 3  logs-2     5      1216-1221  1        5689+668   zstd   1601   2.40   70f1fd7604765231  2025-06-01T12:00:00.006Z  ok
	// 4  metrics-0  1      90-99      1        6357+3022  none   3000   0.99   6626787550e3bbb8  2025-06-01T12:00:00.024Z  ok
	//
	// verified: header, index and all 5 sections (checksums, batch tables, decompression)
}
