// Package promexport exports activetier's metrics to Prometheus: a
// prometheus.Collector over a metering.Meter (requests, bytes, errors,
// latencies and the cost ledger, measured by the Meter's wrappers around
// the broker's object store and metadata log) and over the broker's
// walstore.Node (its engines' counters and gauges, read with Stats and
// Health at scrape time). It is a package of its own so that nothing else
// in activetier imports Prometheus.
//
// A broker registers the Collector on its own registry, never the global
// one:
//
//	meter, _ := metering.New(metering.Config{Prices: costmodel.S3Express2025()})
//	node, _ := walstore.NewNode(walstore.NodeConfig{Store: meter.Store(store), Log: meter.Log(log), ...})
//	c, _ := promexport.New(promexport.Config{Meter: meter, Nodes: []promexport.Node{{Broker: "1", Engine: node}}})
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(c)
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Series per partition are off by default and bounded when on
// (Config.PartitionSeries); series per topic are bounded by
// Config.MaxTopics. Series are unique whatever the metadata says: what
// is labelled alike is exported as one series, the sum of its parts (a
// topic created again under its old name gets a new topic id in Kafka,
// and its incarnations share the name's series, as they share the
// ledger's rows; see package metering). A series that cannot be made is
// left out and counted (activetier_scrape_skipped_series), so that one
// partition never fails a scrape.
//
// # Metrics
//
// Every metric the Collector exports, with its type, labels and meaning
// (op is put, get, delete or list for the store and append, read,
// watermarks or trim for the metadata log; kind is an error kind of
// package metering; line is a line of the bill as costmodel.Breakdown
// names it):
//
//	activetier_store_requests_total               counter   op                      Object store requests made, failed ones included, by operation.
//	activetier_store_errors_total                 counter   op,kind                 Object store requests that failed, by operation and kind of error.
//	activetier_store_request_duration_seconds     histogram op                      Time per object store request (put: upload, get: fetch), by operation.
//	activetier_store_uploaded_bytes_total         counter   -                       Body bytes of every PUT made.
//	activetier_store_downloaded_bytes_total       counter   -                       Bytes returned by successful range GETs.
//	activetier_metadata_requests_total            counter   op                      Metadata log calls made, by operation.
//	activetier_metadata_errors_total              counter   op,kind                 Metadata log calls that failed, by operation and kind of error.
//	activetier_metadata_request_duration_seconds  histogram op                      Time per metadata log call, by operation.
//	activetier_metadata_appended_bytes_total      counter   -                       Bytes of metadata messages appended.
//	activetier_metadata_read_bytes_total          counter   -                       Bytes of metadata messages read.
//	activetier_cost_usd_total                     counter   topic,line              Cost attributed to each topic, in US dollars, by bill line (put, get, upload, retrieval, metadata, control).
//	activetier_partition_cost_usd_total           counter   topic,partition,line    Cost attributed to each partition, by bill line; only with PartitionSeries.
//	activetier_produced_bytes_total               counter   broker                  Batch bytes appended to the leader engine.
//	activetier_objects_total                      counter   broker                  Combined objects stored by the leader engine.
//	activetier_object_bytes_total                 counter   broker                  Bytes of the combined objects stored.
//	activetier_objects_deleted_total              counter   broker                  Combined objects removed by garbage collection.
//	activetier_retries_total                      counter   broker,kind             Failed attempts that were retried, by kind (upload, publish).
//	activetier_replicated_bytes_total             counter   broker                  Bytes the follower engine appended to the local log.
//	activetier_applied_entries_total              counter   broker                  Metadata entries (or parts) the follower engine applied.
//	activetier_fetch_errors_total                 counter   broker,kind             Failed section fetches, by kind (corrupt, not_found, other).
//	activetier_truncations_total                  counter   broker                  Local log truncations on divergence from the leader.
//	activetier_digest_checks_total                counter   broker,result           Comparisons of the local log's rolling digest with one its leader published, by result (match, mismatch).
//	activetier_buffered_bytes                     gauge     broker                  Bytes appended to the leader engine and not yet published.
//	activetier_uploads_in_flight                  gauge     broker                  Objects cut and not yet stored.
//	activetier_held_entries                       gauge     broker                  Entries the follower engine holds, waiting for a gap, a marker or a retry.
//	activetier_lag_offsets                        gauge     broker                  Offsets announced in metadata and not yet applied, over the partitions followed.
//	activetier_partition_lag_offsets              gauge     broker,topic,partition  Offsets announced and not yet applied, per partition; only with PartitionSeries.
//	activetier_degraded                           gauge     broker                  1 while uploads or publishes have failed for longer than DegradedAfter: replicate the ordinary way.
//	activetier_replication_lag_seconds            histogram broker                  Time from a section's newest record timestamp to its append on this follower.
//	activetier_scrape_skipped_series              gauge     -                       Series this scrape left out because a label value was not valid UTF-8 (a topic name no Kafka broker accepts).
//
// The cost counters are in the price list of the Meter's Config; summed
// over topics (and the rows metering.OverflowTopic and
// metering.UnattributedTopic) they equal costmodel.RunCost of the same
// traffic, storage aside. examples/grafana/activetier.json is a dashboard
// over these metrics.
package promexport
