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
	"github.com/activetier/activetier/walstore"
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

// load reads the whole object with one HEAD and one GET. Inspecting needs
// every section; reading them one range at a time would only add requests.
func (s *s3Source) load(ctx context.Context, key string) (string, []byte, error) {
	name := "s3://" + s.bucket + "/" + key
	var opts []func(*config.LoadOptions) error
	if s.region != "" {
		opts = append(opts, config.WithRegion(s.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return name, nil, fmt.Errorf("loading the AWS configuration: %w", err)
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
		return name, nil, err
	}
	defer store.CloseIdleConnections()
	head, err := store.Client().HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	var status interface{ HTTPStatusCode() int }
	switch {
	case errors.As(err, &status) && status.HTTPStatusCode() == http.StatusNotFound:
		// A HEAD response has no body to say which of the two is missing.
		return name, nil, fmt.Errorf("%s: no such key or bucket (HTTP 404): %w", name, walstore.ErrNotFound)
	case err != nil:
		return name, nil, fmt.Errorf("%s: %w", name, err)
	}
	size := aws.ToInt64(head.ContentLength)
	if size == 0 {
		return name, nil, nil
	}
	data, err := store.GetRange(ctx, metadata.ObjectRef{AZ: az, Bucket: s.bucket, Key: key}, 0, size)
	return name, data, err
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
