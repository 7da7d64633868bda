// Command kfakecluster runs franz-go's kfake, an in-memory Kafka cluster,
// as a process of its own: the metadata log's Kafka in the kafkabroker
// tests. It prints {"kafka":"host:port"} on stdout once it serves, and
// runs until it is signalled or its standard input closes, so that it
// never outlives the test that started it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	topic := flag.String("topic", "__remote_wal_log_metadata", "topic to create")
	partitions := flag.Int("partitions", 3, "its partitions")
	flag.Parse()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(*partitions), *topic))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfakecluster:", err)
		os.Exit(1)
	}
	defer c.Close()
	if err := json.NewEncoder(os.Stdout).Encode(map[string]string{"kafka": c.ListenAddrs()[0]}); err != nil {
		os.Exit(1)
	}
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(done) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	select {
	case <-sig:
	case <-done:
	}
}
