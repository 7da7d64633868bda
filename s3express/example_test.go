package s3express_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/activetier/activetier/s3express"
	"github.com/activetier/activetier/storage"
)

// A broker in use1-az4 writes a combined object to its own AZ's directory
// bucket and reads a byte range of an object another broker wrote in
// use1-az5. It needs AWS credentials and the three buckets, so it has no
// Output to check.
func Example() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"))
	if err != nil {
		log.Fatal(err)
	}
	store, err := s3express.New(cfg, s3express.Options{
		Buckets: map[string]string{
			"use1-az4": "wal--use1-az4--x-s3",
			"use1-az5": "wal--use1-az5--x-s3",
			"use1-az6": "wal--use1-az6--x-s3",
		},
		LocalAZ:   "use1-az4",
		KeyPrefix: "cluster-a/",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.CloseIdleConnections()

	ref, err := store.Put(ctx, "objects/broker-1/000042", []byte("combined object bytes"))
	switch {
	case errors.Is(err, storage.ErrAlreadyExists):
		log.Fatal("key already written: keys must be unique per upload")
	case err != nil:
		log.Fatal(err) // ErrUnavailable: retry later with backoff
	}
	fmt.Println("stored", ref)

	peer := ref
	peer.AZ, peer.Bucket, peer.Key = "use1-az5", "wal--use1-az5--x-s3", "objects/broker-2/000007"
	section, err := store.GetRange(ctx, peer, 1024, 4096)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("read", len(section), "bytes")
}
