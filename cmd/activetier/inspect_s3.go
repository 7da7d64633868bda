package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/s3express"
	"github.com/activetier/activetier/storage"
)

// s3Source names an object in S3, S3 Express One Zone or an S3-compatible
// server. Credentials and region come from the standard AWS environment
// (AWS_ACCESS_KEY_ID, AWS_PROFILE, AWS_REGION, ...), as every AWS tool reads
// them.
type s3Source struct {
	endpoint string
	bucket   string
	region   string
}

func (s *s3Source) register(fs *flag.FlagSet) {
	fs.StringVar(&s.bucket, "bucket", "", "read KEY from this bucket instead of a file (a directory bucket name base--azid--x-s3 for S3 Express)")
	fs.StringVar(&s.endpoint, "s3-endpoint", "", "`URL` of an S3-compatible server (versitygw, MinIO, ...); empty means AWS itself")
	fs.StringVar(&s.region, "region", "", "AWS region (default: from the AWS environment, else us-east-1)")
}

func (s *s3Source) validate(fs *flag.FlagSet) error {
	if s.bucket == "" && (s.endpoint != "" || s.region != "") {
		name := "s3-endpoint"
		if s.endpoint == "" {
			name = "region"
		}
		return flagError(fs, name, "needs --bucket: it names where KEY is")
	}
	if s.endpoint != "" {
		return checkEndpoint(fs, s.endpoint)
	}
	return nil
}

// open finds the object with one HEAD request. Its ranges are then read
// with range GETs, none larger than inspect asks for: the size the server
// claims decides where the tail is, and ReadFooter checks it against the
// trailer, so a server that claims more than it has gives an error, not an
// allocation of what it claimed.
func (s *s3Source) open(ctx context.Context, key string) (*object, error) {
	name := "s3://" + s.bucket + "/" + key
	var opts []func(*config.LoadOptions) error
	if s.region != "" {
		opts = append(opts, config.WithRegion(s.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if s.endpoint != "" {
		cfg.BaseEndpoint = aws.String(s.endpoint)
	}
	az := bucketAZ(s.bucket)
	store, err := s3express.New(cfg, s3express.Options{
		Buckets:      map[string]string{az: s.bucket},
		LocalAZ:      az,
		S3Compatible: s.endpoint != "",
	})
	if err != nil {
		return nil, err
	}
	opened := false
	defer func() {
		if !opened {
			store.CloseIdleConnections()
		}
	}()
	head, err := store.Client().HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	var status interface{ HTTPStatusCode() int }
	switch {
	case errors.As(err, &status) && status.HTTPStatusCode() == http.StatusNotFound:
		// A HEAD response has no body to say which of the two is missing.
		return nil, fmt.Errorf("%s: no such key or bucket (HTTP 404): %w", name, storage.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", name, err)
	case head.ContentLength == nil || *head.ContentLength < 0:
		return nil, fmt.Errorf("%s: the server gave no object size (Content-Length %v)", name, aws.ToInt64(head.ContentLength))
	}
	opened = true
	return &object{
		name: name, size: *head.ContentLength,
		r:     s3Range{store: store, ref: metadata.ObjectRef{AZ: az, Bucket: s.bucket, Key: key}},
		close: store.CloseIdleConnections,
	}, nil
}

// s3Range reads an object's ranges with the store's GetRange, which
// allocates the length asked for, never what the server sends.
type s3Range struct {
	store *s3express.Store
	ref   metadata.ObjectRef
}

func (r s3Range) readRange(ctx context.Context, off, n int64) ([]byte, error) {
	return r.store.GetRange(ctx, r.ref, off, n)
}

// bucketAZ is the AZ id a directory bucket's name embeds
// ("base--use1-az4--x-s3"), which s3express requires as the bucket's AZ; a
// standard bucket may be mapped from any name.
func bucketAZ(bucket string) string {
	if base, ok := strings.CutSuffix(bucket, "--x-s3"); ok {
		if i := strings.LastIndex(base, "--"); i >= 0 {
			return base[i+2:]
		}
	}
	return "any"
}
