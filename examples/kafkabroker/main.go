// Command kafkabroker is a Kafka-protocol broker whose replication is
// activetier's: one process per broker, each in its own availability zone
// with its own bucket, records reaching followers only through object
// storage and a metadata log on a Kafka topic. See package broker for what
// it serves, and docs/kafkabroker.md for the wiring.
//
//	kafkabroker -id 0 -az az0 -data /var/lib/kb0 \
//	    -buckets az0=wal-az0,az1=wal-az1,az2=wal-az2 -s3-endpoint http://127.0.0.1:7070 \
//	    -metadata-brokers 127.0.0.1:9092 -controller 127.0.0.1:9000
//
// It prints one JSON line on stdout once it listens,
// {"id":0,"az":"az0","kafka":"127.0.0.1:...","control":"127.0.0.1:...","incarnation":"..."},
// registers with the controller (-controller), and waits for the
// controller's cluster view (POST /v1/cluster on the control address)
// before it has partitions. Restarted on its data, it follows every
// partition and leads none until the controller elects it. It stops on
// SIGTERM or SIGINT, or when its standard input closes with
// -stdin-lifeline.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/activetier/activetier/examples/kafkabroker/broker"
	"github.com/activetier/activetier/examples/kafkabroker/disklog"
	"github.com/activetier/activetier/metadata/kafkalog"
	"github.com/activetier/activetier/s3express"
	"github.com/activetier/activetier/walstore"
)

type options struct {
	id                 int
	az, data           string
	buckets            map[string]string
	endpoint, prefix   string
	metaBrokers        []string
	metaPartitions     int
	kafkaAddr, control string
	controller         string
	interval, lagTime  time.Duration
	createBucket       bool
	lifeline           bool
	verbose            bool
}

func parseFlags(fs *flag.FlagSet, args []string) (options, error) {
	var o options
	var buckets, metaBrokers string
	fs.IntVar(&o.id, "id", -1, "broker id (required)")
	fs.StringVar(&o.az, "az", "", "this broker's availability zone, also its rack (required)")
	fs.StringVar(&o.data, "data", "", "directory of the broker's log (required)")
	fs.StringVar(&buckets, "buckets", "", "every AZ's bucket, as AZ=BUCKET,... (required)")
	fs.StringVar(&o.endpoint, "s3-endpoint", "", "URL of an S3-compatible server (versitygw, MinIO); empty for AWS")
	fs.StringVar(&o.prefix, "key-prefix", "", "prefix of object keys, the same on every broker")
	fs.StringVar(&metaBrokers, "metadata-brokers", "", "the metadata log's Kafka, host:port,... (required)")
	fs.IntVar(&o.metaPartitions, "metadata-partitions", 3, "partitions of the metadata topic, the same on every broker")
	fs.StringVar(&o.kafkaAddr, "kafka", "127.0.0.1:0", "address to serve Kafka clients on")
	fs.StringVar(&o.control, "control", "127.0.0.1:0", "address to serve the control protocol on")
	fs.StringVar(&o.controller, "controller", "", "host:port of the controller's API, to register with at start")
	fs.DurationVar(&o.interval, "interval", 50*time.Millisecond, "flush interval: the longest a batch waits for its object")
	fs.DurationVar(&o.lagTime, "replica-lag-time", 30*time.Second, "how long an in-sync follower may lag before it leaves the in-sync set (replica.lag.time.max.ms)")
	fs.BoolVar(&o.createBucket, "create-bucket", false, "create this AZ's bucket if it does not exist")
	fs.BoolVar(&o.lifeline, "stdin-lifeline", false, "stop when standard input closes (for tests: never outlive the parent)")
	fs.BoolVar(&o.verbose, "verbose", false, "log at debug level")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.id < 0:
		return o, errors.New("-id: missing or negative")
	case o.az == "":
		return o, errors.New("-az: missing")
	case o.data == "":
		return o, errors.New("-data: missing")
	case metaBrokers == "":
		return o, errors.New("-metadata-brokers: missing")
	case o.metaPartitions <= 0:
		return o, errors.New("-metadata-partitions must be positive")
	case o.interval <= 0:
		return o, errors.New("-interval must be positive")
	case o.lagTime <= 0:
		return o, errors.New("-replica-lag-time must be positive")
	}
	o.metaBrokers = strings.Split(metaBrokers, ",")
	o.buckets = make(map[string]string)
	for _, kv := range strings.Split(buckets, ",") {
		az, b, ok := strings.Cut(kv, "=")
		if !ok || az == "" || b == "" {
			return o, fmt.Errorf("-buckets: %q is not AZ=BUCKET", kv)
		}
		if _, dup := o.buckets[az]; dup {
			return o, fmt.Errorf("-buckets: AZ %q is listed twice", az)
		}
		o.buckets[az] = b
	}
	if _, ok := o.buckets[o.az]; !ok {
		return o, fmt.Errorf("-buckets: no bucket for this broker's AZ %q", o.az)
	}
	return o, nil
}

func main() {
	fs := flag.NewFlagSet("kafkabroker", flag.ContinueOnError)
	o, err := parseFlags(fs, os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "kafkabroker:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if o.lifeline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	}
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kafkabroker:", err)
		os.Exit(1)
	}
}

// run wires the broker: its log, its AZ's store, the metadata log, a Node
// and the two listeners; then serves until ctx ends.
func run(ctx context.Context, o options, stdout io.Writer) error {
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("broker", o.id)

	// The broker's own log, on disk.
	log, err := disklog.Open(o.data, disklog.Options{Logger: logger})
	if err != nil {
		return err
	}
	defer log.Close()

	// Its AZ's bucket for writes; every AZ's for reads.
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	if o.endpoint != "" {
		awsCfg.BaseEndpoint = aws.String(o.endpoint)
	}
	store, err := s3express.New(awsCfg, s3express.Options{
		Buckets: o.buckets, LocalAZ: o.az, KeyPrefix: o.prefix, S3Compatible: o.endpoint != "",
	})
	if err != nil {
		return err
	}
	defer store.CloseIdleConnections()
	if o.createBucket {
		if err := createBucket(ctx, store.Client(), o.buckets[o.az]); err != nil {
			return err
		}
	}

	// The metadata log, on a Kafka topic.
	meta, err := kafkalog.New(ctx, kafkalog.Config{
		SeedBrokers: o.metaBrokers, Partitions: int32(o.metaPartitions), CreateTopic: true, Logger: logger,
	})
	if err != nil {
		return err
	}
	defer meta.Close()

	kl, err := net.Listen("tcp", o.kafkaAddr)
	if err != nil {
		return err
	}
	cl, err := net.Listen("tcp", o.control)
	if err != nil {
		kl.Close()
		return err
	}
	b, err := broker.New(broker.Config{
		ID: int32(o.id), AZ: o.az, Kafka: kl, Control: cl, Log: log, Logger: logger,
		Controller: o.controller, ReplicaLagTime: o.lagTime,
		Node: walstore.NodeConfig{Store: store, Log: meta, Interval: o.interval},
	})
	if err != nil {
		kl.Close()
		cl.Close()
		return err
	}
	// Objects a previous incarnation left behind, once followers had an
	// hour to read them.
	go func() {
		if n, err := b.Node().Sweep(ctx, time.Hour); err != nil && ctx.Err() == nil {
			logger.Warn("sweeping old objects", "err", err)
		} else if n > 0 {
			logger.Info("swept old objects", "deleted", n)
		}
	}()
	if err := json.NewEncoder(stdout).Encode(b.Info()); err != nil {
		return err
	}
	return b.Run(ctx)
}

func createBucket(ctx context.Context, client *s3.Client, bucket string) error {
	_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if err == nil || errors.As(err, &owned) || errors.As(err, &exists) {
		return nil
	}
	return fmt.Errorf("creating bucket %s: %w", bucket, err)
}
