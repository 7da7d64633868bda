package s3express_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/s3express"
	"github.com/activetier/activetier/storage/storagetest"
)

// The benchmarks compare the store, which goes through the SDK, with the
// same requests made directly with net/http against the same server: the
// baseline ("raw") signs with SigV4 and an unsigned payload, the least a
// correct client does. Run them with the server up:
//
//	bash scripts/test.sh go test -run '^$' -bench . -benchtime 100x ./s3express/
//
// Over plain HTTP the SDK hashes every PUT body (SHA-256) for the
// signature, which over HTTPS, as on AWS, it does not (it signs
// UNSIGNED-PAYLOAD and sends a trailing checksum); the sdk-unsigned-payload
// case shows the SDK without that hash.

var benchSizes = []int{64 << 10, 1 << 20, 4 << 20}

func BenchmarkPut(b *testing.B) {
	cfg := serverConfig(b)
	createBuckets(b, cfg, directoryBuckets)
	bucketName := directoryBuckets[azA]
	for _, size := range benchSizes {
		body := randomBytes(size, 1)
		b.Run(fmt.Sprintf("size=%s/client=sdk", sizeName(size)), func(b *testing.B) {
			benchStorePut(b, newServerStore(b, cfg, directoryBuckets, azA, nil), body)
		})
		b.Run(fmt.Sprintf("size=%s/client=sdk-unsigned-payload", sizeName(size)), func(b *testing.B) {
			benchStorePut(b, newServerStore(b, cfg, directoryBuckets, azA, func(o *s3express.Options) {
				o.ClientOptions = append(o.ClientOptions, s3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware))
			}), body)
		})
		b.Run(fmt.Sprintf("size=%s/client=raw", sizeName(size)), func(b *testing.B) {
			raw := newRawClient(b, cfg)
			// Only characters SigV4 leaves unescaped, since the
			// baseline does no escaping of its own.
			prefix := fmt.Sprintf("s3express-bench/raw-%016x/", rand.Uint64())
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				raw.put(b, bucketName, prefix+strconv.Itoa(i), body)
			}
			b.StopTimer()
			raw.deletePrefix(b, bucketName, prefix)
		})
	}
}

func benchStorePut(b *testing.B, s *s3express.Store, body []byte) {
	prefix := uniqueKey(b, "sdk")
	ctx := context.Background()
	var refs []metadata.ObjectRef
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ref, err := s.Put(ctx, prefix+strconv.Itoa(i), body)
		if err != nil {
			b.Fatal(err)
		}
		refs = append(refs, ref)
	}
	b.StopTimer()
	require.NoError(b, s.Delete(ctx, refs))
}

func BenchmarkGetRange(b *testing.B) {
	cfg := serverConfig(b)
	createBuckets(b, cfg, directoryBuckets)
	writer := newServerStore(b, cfg, directoryBuckets, azA, nil)
	const objectSize = 8 << 20
	data := randomBytes(objectSize, 2)
	ref, err := writer.Put(context.Background(), uniqueKey(b, "object"), data)
	require.NoError(b, err)
	b.Cleanup(func() { _ = writer.Delete(context.Background(), []metadata.ObjectRef{ref}) })

	for _, size := range []int{4 << 10, 256 << 10, 1 << 20} {
		// Ranges walk through the object so that consecutive reads do
		// not hit the same bytes.
		offset := func(i int) int64 { return int64(i*size) % (objectSize - int64(size)) }
		b.Run(fmt.Sprintf("size=%s/client=sdk", sizeName(size)), func(b *testing.B) {
			reader := newServerStore(b, cfg, directoryBuckets, azB, nil)
			ctx := context.Background()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := reader.GetRange(ctx, ref, offset(i), int64(size)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("size=%s/client=raw", sizeName(size)), func(b *testing.B) {
			raw := newRawClient(b, cfg)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				raw.getRange(b, ref.Bucket, ref.Key, offset(i), int64(size))
			}
		})
	}
}

// randomBytes returns n incompressible bytes determined by seed.
func randomBytes(n int, seed uint64) []byte {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	var buf bytes.Buffer
	buf.Grow(n)
	r := rand.NewChaCha8(key)
	_, _ = io.CopyN(&buf, r, int64(n))
	return buf.Bytes()
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MiB"
	}
	return strconv.Itoa(n>>10) + "KiB"
}

// rawClient makes path-style S3 requests with net/http and a SigV4
// signature over an unsigned payload.
type rawClient struct {
	endpoint string
	http     *http.Client
	creds    aws.Credentials
	region   string
	signer   *v4.Signer
}

func newRawClient(b *testing.B, cfg aws.Config) *rawClient {
	creds, err := cfg.Credentials.Retrieve(context.Background())
	require.NoError(b, err)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = s3express.DefaultConcurrency
	b.Cleanup(tr.CloseIdleConnections)
	return &rawClient{
		endpoint: aws.ToString(cfg.BaseEndpoint),
		http:     &http.Client{Transport: tr, Timeout: s3express.DefaultFirstByteTimeout},
		creds:    creds,
		region:   cfg.Region,
		// S3 signs the path as sent, without escaping it a second time.
		signer: v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }),
	}
}

func (c *rawClient) do(b *testing.B, req *http.Request) *http.Response {
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	if err := c.signer.SignHTTP(req.Context(), c.creds, req, "UNSIGNED-PAYLOAD", "s3", c.region, time.Now()); err != nil {
		b.Fatal(err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	return resp
}

func (c *rawClient) put(b *testing.B, bucketName, key string, body []byte) {
	req, err := http.NewRequest(http.MethodPut, c.endpoint+"/"+bucketName+"/"+key, bytes.NewReader(body))
	require.NoError(b, err)
	req.Header.Set("If-None-Match", "*")
	resp := c.do(b, req)
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("PUT %s/%s: %s: %s", bucketName, key, resp.Status, msg)
	}
}

func (c *rawClient) getRange(b *testing.B, bucketName, key string, offset, length int64) []byte {
	req, err := http.NewRequest(http.MethodGet, c.endpoint+"/"+bucketName+"/"+key, nil)
	require.NoError(b, err)
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	resp := c.do(b, req)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent {
		b.Fatalf("GET %s/%s: %s", bucketName, key, resp.Status)
	}
	buf := make([]byte, length)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		b.Fatal(err)
	}
	return buf
}

// deletePrefix removes what a raw benchmark wrote, through a store.
func (c *rawClient) deletePrefix(b *testing.B, bucketName, prefix string) {
	cfg := serverConfig(b)
	s := newServerStore(b, cfg, directoryBuckets, azA, nil)
	infos, err := s.List(context.Background(), bucketName, prefix)
	require.NoError(b, err)
	refs := make([]metadata.ObjectRef, len(infos))
	for i, info := range infos {
		refs[i] = info.Ref
	}
	require.NoError(b, s.Delete(context.Background(), refs))
}

// BenchmarkReadRange compares GetRange with ReadRange into a reused buffer,
// from 64 KiB to 4 MiB, in one run: B/op and MB/s per method, and a logged
// line per size (-v) with ReadRange's time and allocation as multiples of
// GetRange's.
func BenchmarkReadRange(b *testing.B) {
	cfg := serverConfig(b)
	createBuckets(b, cfg, directoryBuckets)
	storagetest.BenchmarkRanges(b, newServerStore(b, cfg, directoryBuckets, azA, nil), newServerStore(b, cfg, directoryBuckets, azB, nil))
}
