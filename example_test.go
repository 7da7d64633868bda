package activetier_test

import (
	"context"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/metadata/kafkalog"
	"github.com/activetier/activetier/s3express"
	"github.com/activetier/activetier/storage"
	"github.com/activetier/activetier/walstore"
)

// broker stands for what a broker author writes: its own log, its
// controller handling and its replica fetch path. The README's snippet
// (the body of Example_broker) shows where each meets activetier.
type broker struct {
	id  int32
	log storage.LocalLog
}

// sendProgress delivers a follower's progress to the leader's broker, as
// Kafka's fetch request carries it; the leader's broker calls
// RecordProgress with it.
func (b *broker) sendProgress(p walstore.Progress) {}

// Example_broker is the README's library snippet: one Node per broker, on
// S3 Express One Zone and a Kafka metadata topic. It is compiled, not run:
// it needs AWS credentials, directory buckets and a Kafka cluster. The
// README must show this body unchanged (TestReadmeSnippet).
func Example_broker() {
	ctx := context.Background()
	b := &broker{id: 1}
	var tp metadata.TopicPartition
	var epoch int32
	var recordBatch []byte

	// README snippet begins.
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	store, err := s3express.New(awsCfg, s3express.Options{
		Buckets: map[string]string{"use1-az4": "wal--use1-az4--x-s3", "use1-az5": "wal--use1-az5--x-s3", "use1-az6": "wal--use1-az6--x-s3"},
		LocalAZ: "use1-az4",
	})
	if err != nil {
		log.Fatal(err)
	}
	meta, err := kafkalog.New(ctx, kafkalog.Config{SeedBrokers: []string{"kafka-1:9092"}})
	if err != nil {
		log.Fatal(err)
	}
	node, err := walstore.NewNode(walstore.NodeConfig{
		BrokerID: b.id, Store: store, Log: meta, Local: b.log, // the broker's own log
		OnProgress: b.sendProgress, // to the leader's broker, as Kafka's fetch carries it
	})
	if err != nil {
		log.Fatal(err)
	}
	go node.Run(ctx)

	// The controller makes this broker tp's leader at epoch (its log's epoch
	// cache already starts epoch at its end, as makeLeader leaves it) ...
	if err := node.BecomeLeader(ctx, tp, epoch, []int32{2, 3}, -1); err != nil {
		log.Fatal(err)
	}
	// ... a produce request: the batch goes to the broker's log, then here.
	batch := storage.Batch{Epoch: epoch, FirstOffset: 0, LastOffset: 9, Data: recordBatch}
	if err := node.Append(ctx, tp, batch); err != nil {
		log.Fatal(err)
	}
	if err := node.WaitDurable(ctx, tp, epoch, 9); err != nil { // acks-on-upload, if asked for
		log.Fatal(err)
	}
	// ... and later a follower of broker 2 at a higher epoch, or nothing.
	if err := node.BecomeFollower(ctx, tp, epoch+1, 2); err != nil {
		log.Fatal(err)
	}
	if err := node.StopReplica(ctx, tp); err != nil {
		log.Fatal(err)
	}
	// README snippet ends.
}
