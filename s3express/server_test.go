package s3express_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/harness/testenv"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/s3express"
	"github.com/activetier/activetier/storage"
)

// The tests in this file and in conformance_test.go need a real
// S3-compatible server. scripts/test.sh starts versitygw and sets
// ACTIVETIER_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_REGION; without the endpoint they skip, unless
// ACTIVETIER_REQUIRE_SERVERS (which the script sets) says they must run.
const endpointEnv = "ACTIVETIER_S3_ENDPOINT"

// s3Endpoint returns the server's URL or ends the test (see testenv).
func s3Endpoint(t testing.TB) string {
	t.Helper()
	return testenv.Server(t, testenv.S3Endpoint, "an S3 server")
}

// serverConfig loads the AWS configuration the way a user does, pointed
// at the test server.
func serverConfig(t testing.TB) aws.Config {
	t.Helper()
	ep := s3Endpoint(t)
	cfg, err := config.LoadDefaultConfig(context.Background())
	require.NoError(t, err)
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	cfg.BaseEndpoint = aws.String(ep)
	return cfg
}

// Bucket sets standing for three AZs: S3 Express directory bucket names,
// which versitygw stores as ordinary buckets, and standard names.
var (
	directoryBuckets = map[string]string{
		azA: "activetier--use1-az4--x-s3",
		azB: "activetier--use1-az5--x-s3",
		azC: "activetier--use1-az6--x-s3",
	}
	standardBuckets = map[string]string{
		azA: "activetier-test-use1-az4",
		azB: "activetier-test-use1-az5",
		azC: "activetier-test-use1-az6",
	}
)

// newServerStore returns a store in localAZ over the test server.
func newServerStore(t testing.TB, cfg aws.Config, buckets map[string]string, localAZ string, mod func(*s3express.Options)) *s3express.Store {
	t.Helper()
	opts := s3express.Options{Buckets: buckets, LocalAZ: localAZ, S3Compatible: true}
	if mod != nil {
		mod(&opts)
	}
	s, err := s3express.New(cfg, opts)
	require.NoError(t, err)
	t.Cleanup(s.CloseIdleConnections)
	return s
}

// createBuckets creates the buckets on the server if they are not there.
func createBuckets(t testing.TB, cfg aws.Config, buckets map[string]string) {
	t.Helper()
	for az := range buckets {
		s := newServerStore(t, cfg, buckets, az, nil)
		_, err := s.Client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(buckets[az])})
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode() == "BucketAlreadyOwnedByYou" || apiErr.ErrorCode() == "BucketAlreadyExists") {
			err = nil
		}
		require.NoError(t, err, "creating bucket %s", buckets[az])
	}
}

// bucketStyles are the two naming styles every server test runs with.
var bucketStyles = []struct {
	name    string
	buckets map[string]string
}{
	{"directory-names", directoryBuckets},
	{"standard-names", standardBuckets},
}

// uniqueKey returns a key no earlier run used, since buckets persist on a
// server the developer runs.
func uniqueKey(t testing.TB, name string) string {
	return fmt.Sprintf("s3express-test/%s/%016x/%s", t.Name(), rand.Uint64(), name)
}

// TestServerPutIfAbsentRaceAcrossBrokers races two brokers in one AZ
// (separate stores, so separate connection pools) writing the same keys
// with megabyte bodies, so that the uploads overlap on the server: exactly
// one writer wins each key and the object is the winner's body.
func TestServerPutIfAbsentRaceAcrossBrokers(t *testing.T) {
	cfg := serverConfig(t)
	for _, style := range bucketStyles {
		t.Run(style.name, func(t *testing.T) {
			createBuckets(t, cfg, style.buckets)
			brokers := []*s3express.Store{
				newServerStore(t, cfg, style.buckets, azA, nil),
				newServerStore(t, cfg, style.buckets, azA, nil),
			}
			const rounds, writersPerBroker = 4, 6
			seed := rand.Uint64()
			t.Logf("bodies seeded with %d", seed)
			for round := range rounds {
				key := uniqueKey(t, fmt.Sprintf("race-%d", round))
				n := len(brokers) * writersPerBroker
				bodies := make([][]byte, n)
				for i := range bodies {
					bodies[i] = randomBytes(1<<20+i, seed+uint64(round*n+i))
				}
				errs := make([]error, n)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						<-start
						_, errs[i] = brokers[i%len(brokers)].Put(t.Context(), key, bodies[i])
					})
				}
				close(start)
				wg.Wait()
				winner := -1
				for i, err := range errs {
					if err == nil {
						require.Equal(t, -1, winner, "round %d: writers %d and %d both won (seed %d)", round, winner, i, seed)
						winner = i
						continue
					}
					require.ErrorIs(t, err, storage.ErrAlreadyExists, "round %d writer %d (seed %d)", round, i, seed)
				}
				require.NotEqual(t, -1, winner, "round %d: nobody won (seed %d)", round, seed)
				ref := metadata.ObjectRef{AZ: azA, Bucket: style.buckets[azA], Key: key}
				got, err := brokers[0].GetRange(t.Context(), ref, 0, int64(len(bodies[winner])))
				require.NoError(t, err)
				require.True(t, bytes.Equal(bodies[winner], got), "round %d: the object is not the winner's body", round)
				_, err = brokers[0].GetRange(t.Context(), ref, 0, int64(len(bodies[winner]))+1)
				require.ErrorIs(t, err, storage.ErrInvalidRange, "round %d: the object has the winner's size", round)
				require.NoError(t, brokers[1].Delete(t.Context(), []metadata.ObjectRef{ref}))
			}
		})
	}
}

// TestServerBadInput checks each bad input gives a clear error and exactly
// the requests it needs: none when the store can tell by itself, one when
// only the server knows the object's size.
func TestServerBadInput(t *testing.T) {
	cfg := serverConfig(t)
	for _, style := range bucketStyles {
		t.Run(style.name, func(t *testing.T) {
			createBuckets(t, cfg, style.buckets)
			var requests atomic.Int64
			s := newServerStore(t, cfg, style.buckets, azA, func(o *s3express.Options) {
				o.ClientOptions = append(o.ClientOptions, countRequests(&requests))
			})
			ctx := t.Context()
			expect := func(name string, want int64, fn func() error, kind error) {
				t.Helper()
				before := requests.Load()
				err := fn()
				assert.Equal(t, want, requests.Load()-before, "%s: requests made", name)
				requireKind(t, err, kind, name)
				t.Logf("%s: %v", name, err)
			}

			data := []byte("0123456789")
			ref, err := s.Put(ctx, uniqueKey(t, "ten-bytes"), data)
			require.NoError(t, err)
			empty, err := s.Put(ctx, uniqueKey(t, "empty"), nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Delete(context.Background(), []metadata.ObjectRef{ref, empty}) })
			get := func(r metadata.ObjectRef, off, n int64) func() error {
				return func() error { _, err := s.GetRange(ctx, r, off, n); return err }
			}
			unknown := metadata.ObjectRef{AZ: "use1-az9", Bucket: "activetier-unconfigured", Key: ref.Key}

			expect("GetRange of an unconfigured bucket", 0, get(unknown, 0, 1), storage.ErrUnknownBucket)
			expect("Delete naming an unconfigured bucket", 0, func() error {
				return s.Delete(ctx, []metadata.ObjectRef{ref, unknown})
			}, storage.ErrUnknownBucket)
			expect("List of an unconfigured bucket", 0, func() error {
				_, err := s.List(ctx, unknown.Bucket, "")
				return err
			}, storage.ErrUnknownBucket)
			expect("GetRange with zero length", 0, get(ref, 0, 0), storage.ErrInvalidRange)
			expect("GetRange with negative offset", 0, get(ref, -5, 1), storage.ErrInvalidRange)
			expect("GetRange straddling the end", 1, get(ref, 5, 10), storage.ErrInvalidRange)
			expect("GetRange starting at the end", 1, get(ref, 10, 1), storage.ErrInvalidRange)
			expect("GetRange far past the end", 1, get(ref, 1<<40, 1), storage.ErrInvalidRange)
			expect("GetRange of a zero-length object", 1, get(empty, 0, 1), storage.ErrInvalidRange)
			expect("GetRange of a missing object", 1, get(metadata.ObjectRef{AZ: azB, Bucket: style.buckets[azB], Key: uniqueKey(t, "missing")}, 0, 1), storage.ErrNotFound)
			expect("Put of an existing key", 1, func() error { _, err := s.Put(ctx, ref.Key, []byte("new")); return err }, storage.ErrAlreadyExists)

			got, err := s.GetRange(ctx, ref, 0, int64(len(data)))
			require.NoError(t, err)
			assert.Equal(t, data, got, "refused requests changed nothing")
		})
	}

	t.Run("malformed directory bucket name", func(t *testing.T) {
		var requests atomic.Int64
		buckets := map[string]string{azA: "activetier--use1-az4--x-s3", azB: "activetier--use1-az5-x-s3"}
		s, err := s3express.New(cfg, s3express.Options{Buckets: buckets, LocalAZ: azA, S3Compatible: true,
			ClientOptions: []func(*s3.Options){countRequests(&requests)}})
		require.ErrorContains(t, err, `Options.Buckets["use1-az5"]`)
		require.ErrorContains(t, err, "activetier--use1-az5-x-s3")
		assert.Nil(t, s)
		assert.Zero(t, requests.Load())
	})
}

// TestServerErrorDetails checks what the errors of a real server carry.
func TestServerErrorDetails(t *testing.T) {
	cfg := serverConfig(t)
	createBuckets(t, cfg, directoryBuckets)
	s := newServerStore(t, cfg, directoryBuckets, azA, nil)

	missing := metadata.ObjectRef{AZ: azB, Bucket: directoryBuckets[azB], Key: uniqueKey(t, "missing")}
	_, err := s.GetRange(t.Context(), missing, 0, 1)
	requireKind(t, err, storage.ErrNotFound, "GetRange of a missing object")
	var se *s3express.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "NoSuchKey", se.Code)
	assert.NotEmpty(t, se.RequestID)
	assert.Contains(t, err.Error(), missing.Bucket+"/"+missing.Key)

	// A configured bucket that does not exist on the server needs an
	// operator: it is storage.ErrPermanent, never ErrUnavailable, so no
	// engine waits for it to heal.
	buckets := map[string]string{azA: directoryBuckets[azA], azB: "activetier-never-created"}
	s = newServerStore(t, cfg, buckets, azA, nil)
	_, err = s.GetRange(t.Context(), metadata.ObjectRef{AZ: azB, Bucket: buckets[azB], Key: "k"}, 0, 1)
	requireKind(t, err, storage.ErrPermanent, "GetRange from a bucket that does not exist")
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "NoSuchBucket", se.Code)
}

// TestServerLargeObject writes an object larger than the SDK's 100-continue
// threshold and reads ranges at its edges and across 64 KiB boundaries.
func TestServerLargeObject(t *testing.T) {
	cfg := serverConfig(t)
	createBuckets(t, cfg, directoryBuckets)
	writer := newServerStore(t, cfg, directoryBuckets, azC, func(o *s3express.Options) { o.Checksum = "CRC32C" })
	reader := newServerStore(t, cfg, directoryBuckets, azA, nil)
	seed := rand.Uint64()
	data := randomBytes(9<<20+3, seed)
	ref, err := writer.Put(t.Context(), uniqueKey(t, "large"), data)
	require.NoError(t, err)
	t.Cleanup(func() { _ = writer.Delete(context.Background(), []metadata.ObjectRef{ref}) })
	for _, r := range [][2]int64{{0, int64(len(data))}, {0, 1}, {int64(len(data)) - 1, 1}, {65535, 65538}, {3 << 20, 5 << 20}} {
		got, err := reader.GetRange(t.Context(), ref, r[0], r[1])
		require.NoError(t, err, "range %v", r)
		require.True(t, bytes.Equal(data[r[0]:r[0]+r[1]], got), "range %v (seed %d)", r, seed)
	}
}

// TestServerReusesConnections checks that sequential requests ride one
// kept-alive connection: a new TCP (and on AWS, TLS) connection per
// request would cost more than an S3 Express GET itself.
func TestServerReusesConnections(t *testing.T) {
	cfg := serverConfig(t)
	createBuckets(t, cfg, directoryBuckets)
	s := newServerStore(t, cfg, directoryBuckets, azA, nil)
	var fresh, reused atomic.Int64
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if info.Reused {
			reused.Add(1)
		} else {
			fresh.Add(1)
		}
	}})
	data := bytes.Repeat([]byte("abcdefgh"), 1<<14)
	var refs []metadata.ObjectRef
	for i := range 5 {
		ref, err := s.Put(ctx, uniqueKey(t, fmt.Sprint(i)), data)
		require.NoError(t, err)
		refs = append(refs, ref)
		_, err = s.GetRange(ctx, ref, int64(i), 4096)
		require.NoError(t, err)
	}
	require.NoError(t, s.Delete(ctx, refs))
	assert.Equal(t, int64(1), fresh.Load(), "connections dialled for 11 sequential requests")
	assert.Equal(t, int64(10), reused.Load())
}

// serverEnv names the S3 server at ACTIVETIER_S3_ENDPOINT, for the tests
// that check what a particular server does: scripts/test.sh sets it to
// versitygw or minio.
const serverEnv = "ACTIVETIER_S3_SERVER"

// TestServerEncryptionHeader checks what a server does with each
// encryption setting. The default sends no header, so the bucket's own
// encryption applies, and every server stores the object. An explicit
// SSE-S3 or SSE-KMS header is up to the server: versitygw accepts it and
// stores the object; MinIO without a KMS refuses it with 501
// NotImplemented, which AWS documents as a request that will never
// succeed, so the store reports storage.ErrPermanent after one attempt
// and the engines do not retry it as an outage. Another server must do one
// of the two.
func TestServerEncryptionHeader(t *testing.T) {
	cfg := serverConfig(t)
	server := os.Getenv(serverEnv)
	createBuckets(t, cfg, standardBuckets)
	for _, c := range []struct {
		name string
		mod  func(*s3express.Options)
	}{
		{"bucket-default", func(o *s3express.Options) {}},
		{"sse-s3", func(o *s3express.Options) { o.SSE = s3express.SSES3 }},
		{"sse-kms", func(o *s3express.Options) { o.SSE = s3express.SSEKMS }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var requests atomic.Int64
			s := newServerStore(t, cfg, standardBuckets, azA, func(o *s3express.Options) {
				c.mod(o)
				o.ClientOptions = append(o.ClientOptions, countRequests(&requests))
			})
			body := []byte("encrypted or not")
			key := uniqueKey(t, "object")
			ref, err := s.Put(t.Context(), key, body)
			t.Logf("%s on %q: %v after %d requests", c.name, server, err, requests.Load())
			refused := err != nil // another server may do either
			switch server {
			case "minio":
				refused = c.name != "bucket-default"
			case "versitygw":
				refused = false
			}
			switch {
			case refused:
				requireKind(t, err, storage.ErrPermanent, c.name)
				var se *s3express.Error
				require.ErrorAs(t, err, &se)
				if server == "minio" {
					assert.Equal(t, "NotImplemented", se.Code)
					var re *awshttp.ResponseError
					require.ErrorAs(t, err, &re)
					assert.Equal(t, http.StatusNotImplemented, re.HTTPStatusCode())
				}
				assert.Equal(t, int64(1), requests.Load(), "a permanent refusal is not retried")
				_, err = s.GetRange(t.Context(), metadata.ObjectRef{AZ: azA, Bucket: standardBuckets[azA], Key: key}, 0, 1)
				requireKind(t, err, storage.ErrNotFound, "nothing was stored")
			default:
				require.NoError(t, err)
				t.Cleanup(func() { _ = s.Delete(context.Background(), []metadata.ObjectRef{ref}) })
				got, err := s.GetRange(t.Context(), ref, 0, int64(len(body)))
				require.NoError(t, err)
				assert.Equal(t, body, got)
			}
		})
	}
}
