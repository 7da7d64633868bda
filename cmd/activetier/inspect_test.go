package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

var update = flag.Bool("update", false, "rewrite testdata/sample.obj from sampleObject")

// sampleFile is a combined object checked in as the format was when it was
// written: every later version of the command must still read it.
const sampleFile = "testdata/sample.obj"

// sampleObject encodes a small object like a leader would cut: log
// partitions that zstd shrinks, one partition of incompressible bytes that
// it leaves alone, and a partition whose records span a leader change.
func sampleObject(t *testing.T) ([]byte, []combiner.SectionInfo) {
	t.Helper()
	enc, err := combiner.NewEncoder(combiner.EncoderOptions{Codec: metadata.CodecZstd})
	require.NoError(t, err)
	defer enc.Close()
	gen := newRecordGen(42)
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	batches := func(epoch int32, first int64, n, size int) []storage.Batch {
		var out []storage.Batch
		for range n {
			b := gen.batch(epoch, first, now, size)
			first = b.LastOffset + 1
			now = now.Add(3 * time.Millisecond)
			out = append(out, b)
		}
		return out
	}
	logs := func(p int32) metadata.TopicPartition { return metadata.TopicPartition{Topic: "logs", Partition: p} }
	rng := rand.New(rand.NewPCG(7, 7))
	noise := make([]byte, 3000)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	lead := batches(4, 1200, 2, 2000)
	moved := batches(5, lead[1].LastOffset+1, 1, 1500)
	data, infos, err := enc.Encode(nil, []combiner.SectionInput{
		{Partition: logs(0), Batches: batches(7, 0, 3, 4000)},
		{Partition: logs(1), Batches: batches(7, 500, 2, 3000)},
		{Partition: logs(2), Batches: lead},
		{Partition: logs(2), Batches: moved},
		{Partition: metadata.TopicPartition{Topic: "metrics", Partition: 0}, Batches: []storage.Batch{
			{Epoch: 1, FirstOffset: 90, LastOffset: 99, MaxTimestamp: now.UnixMilli(), Data: noise},
		}},
	})
	require.NoError(t, err)
	return data, infos
}

// inspectBytes inspects data as an object read whole, with the default
// limit.
func inspectBytes(name string, data []byte) (*inspection, error) {
	return inspectObject(context.Background(), &object{name: name, size: int64(len(data)), r: bytesRange(data), close: func() {}}, defaultInspectMaxBytes)
}

func writeSample(t *testing.T) (string, []byte, []combiner.SectionInfo) {
	t.Helper()
	data, infos := sampleObject(t)
	path := filepath.Join(t.TempDir(), "object")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path, data, infos
}

func TestUpdateSample(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite " + sampleFile)
	}
	data, _ := sampleObject(t)
	require.NoError(t, os.WriteFile(sampleFile, data, 0o644))
}

func TestInspectGoodObject(t *testing.T) {
	path, data, infos := writeSample(t)
	r := runCmd(t, "", "inspect", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	assert.Contains(t, r.stdout, fmt.Sprintf("object %s: %d bytes, 5 sections", path, len(data)))
	for i, s := range infos {
		row := fmt.Sprintf("%d  %s  %d  %d-%d", i, s.Partition, s.Epoch, s.FirstOffset, s.LastOffset)
		assert.Contains(t, strings.Join(strings.Fields(r.stdout), "  "), row)
	}
	assert.Contains(t, r.stdout, "zstd", "log lines compress")
	assert.Contains(t, r.stdout, "none", "random bytes are stored as they are")
	assert.Contains(t, r.stdout, "verified: header, index and all 5 sections")
}

// The checked-in sample is a format-version-1 object: it must keep
// verifying, whatever changes in the code that writes objects.
func TestInspectCheckedInSample(t *testing.T) {
	r := runCmd(t, "", "inspect", "--json", sampleFile)
	require.Equal(t, exitOK, r.code, r.stderr)
	var rep inspection
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	assert.True(t, rep.Valid)
	assert.Len(t, rep.Sections, 5)
}

func TestInspectJSON(t *testing.T) {
	path, data, infos := writeSample(t)
	r := runCmd(t, "", "inspect", "--json", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	var rep inspection
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&rep))
	assert.True(t, rep.Valid)
	assert.Empty(t, rep.Error)
	assert.Equal(t, int64(len(data)), rep.Size)
	require.Len(t, rep.Sections, len(infos))
	for i, s := range infos {
		got := rep.Sections[i]
		assert.Equal(t, newSectionJSON(i, s).Checksum, got.Checksum)
		assert.Equal(t, s.Partition.Topic, got.Topic)
		assert.Equal(t, s.Partition.Partition, got.Partition)
		assert.Equal(t, s.Epoch, got.Epoch)
		assert.Equal(t, s.FirstOffset, got.FirstOffset)
		assert.Equal(t, s.LastOffset, got.LastOffset)
		assert.Equal(t, s.Position, got.Position)
		assert.Equal(t, s.Length, got.Length)
		assert.Equal(t, s.Codec.String(), got.Codec)
		assert.Equal(t, s.UncompressedSize, got.UncompressedSize)
		assert.Equal(t, s.Batches, got.Batches, "section %d: batches decoded", i)
		assert.True(t, got.OK)
	}
}

// One flipped byte anywhere in a section fails that section, named by its
// index, partition and offsets, and the command exits 1; the other sections
// are still listed as good.
func TestInspectFlippedByteInSection(t *testing.T) {
	_, data, infos := writeSample(t)
	for i, s := range infos {
		for _, at := range []int64{s.Position, s.Position + s.Length/2, s.Position + s.Length - 1} {
			t.Run(fmt.Sprintf("section %d byte %d", i, at), func(t *testing.T) {
				bad := bytes.Clone(data)
				bad[at] ^= 0x20
				path := filepath.Join(t.TempDir(), "bad")
				require.NoError(t, os.WriteFile(path, bad, 0o600))

				r := runCmd(t, "", "inspect", path)
				assert.Equal(t, exitFailure, r.code)
				require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
				assert.Contains(t, r.stderr, fmt.Sprintf("section %d of %d (%s, offsets %d-%d,", i, len(infos), s.Partition, s.FirstOffset, s.LastOffset))
				assert.Contains(t, r.stdout, "CORRUPT")
				assert.Equal(t, len(infos)-1, strings.Count(r.stdout, "  ok\n"), "the other sections verify")

				r = runCmd(t, "", "inspect", "--json", path)
				assert.Equal(t, exitFailure, r.code)
				var rep inspection
				require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
				assert.False(t, rep.Valid)
				assert.False(t, rep.Sections[i].OK)
				assert.NotEmpty(t, rep.Sections[i].Error)
				assert.Contains(t, rep.Error, fmt.Sprintf("section %d of %d", i, len(infos)))
			})
		}
	}
}

// Outside the sections: the header, the footer index and the trailer.
func TestInspectFlippedByteOutsideSections(t *testing.T) {
	_, data, _ := writeSample(t)
	n := len(data)
	for _, tc := range []struct {
		name string
		at   int
		want string
	}{
		{"header", 2, "header"},
		{"footer", n - combiner.TrailerSize - 5, "footer"},
		{"trailer", n - 3, "trailer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := bytes.Clone(data)
			bad[tc.at] ^= 0x01
			r := runCmd(t, string(bad), "inspect", "-")
			assert.Equal(t, exitFailure, r.code)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
			assert.Contains(t, r.stderr, "activetier inspect: stdin")
			assert.Contains(t, r.stderr, tc.want)
			assert.Contains(t, r.stdout, "NOT valid")
		})
	}
}

// Every flipped byte of the object is detected somewhere: in a section,
// the header, the index or the trailer.
func TestInspectDetectsEveryFlippedByte(t *testing.T) {
	data, _ := sampleObject(t)
	for at := range len(data) {
		if at%3 != 0 && testing.Short() {
			continue
		}
		bad := bytes.Clone(data)
		bad[at] ^= 1 << (at % 8)
		rep, err := inspectBytes("object", bad)
		require.NoError(t, err)
		require.False(t, rep.Valid, "byte %d flipped, not detected", at)
	}
}

func TestInspectStdinAndFailures(t *testing.T) {
	_, data, _ := writeSample(t)
	r := runCmd(t, string(data), "inspect", "-")
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "object stdin:")

	for _, tc := range []struct {
		name, stdin string
		args        []string
		want        string
	}{
		{"missing file", "", []string{"inspect", filepath.Join(t.TempDir(), "nope")}, "no such file"},
		{"empty", "", []string{"inspect", "-"}, "stdin: cannot read the index"},
		{"truncated", string(data[:len(data)-10]), []string{"inspect", "-"}, "stdin: cannot read the index"},
		{"not an object", strings.Repeat("x", 4096), []string{"inspect", "-"}, "stdin: cannot read the index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCmd(t, tc.stdin, tc.args...)
			assert.Equal(t, exitFailure, r.code)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
			assert.Contains(t, r.stderr, tc.want)
		})
	}
}

// Against the S3-compatible server scripts/test.sh starts (versitygw), the
// way an operator would point the command at a bucket.
func TestInspectS3(t *testing.T) {
	endpoint := s3TestEndpoint(t)
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	require.NoError(t, err)
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	// A transport of the test's own, closed last, so that goleak finds
	// none of its connections.
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
		o.HTTPClient = &http.Client{Transport: transport}
	})
	bucket := fmt.Sprintf("activetier-inspect-%d", time.Now().UnixNano()%1e9)
	_, err = client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	require.NoError(t, err)
	data, _ := sampleObject(t)
	bad := bytes.Clone(data)
	bad[len(data)/2] ^= 0xff
	for key, body := range map[string][]byte{"good/object": data, "bad/object": bad} {
		_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for _, key := range []string{"good/object", "bad/object"} {
			_, _ = client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		}
		_, _ = client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	})

	r := runCmd(t, "", "inspect", "--s3-endpoint", endpoint, "--bucket", bucket, "good/object")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "object s3://"+bucket+"/good/object")
	assert.Contains(t, r.stdout, "verified")

	r = runCmd(t, "", "inspect", "--s3-endpoint", endpoint, "--bucket", bucket, "bad/object")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "s3://"+bucket+"/bad/object: section")

	r = runCmd(t, "", "inspect", "--s3-endpoint", endpoint, "--bucket", bucket, "missing/object")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "missing/object")

	// The built binary, with an object larger than --max-bytes, which it
	// reads as a follower does: the tail, then each section's range.
	ranged := manySections(t, 20, 1000)
	require.Greater(t, len(ranged), 4<<10)
	_, err = client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("ranged/object"), Body: bytes.NewReader(ranged)})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("ranged/object")})
	})
	rb := runBinary(binaryContext(t), t, nil, nil, "inspect", "--max-bytes", "4KiB", "--s3-endpoint", endpoint, "--bucket", bucket, "ranged/object")
	require.Equal(t, exitOK, rb.code, rb.stderr)
	assert.Contains(t, rb.stdout, fmt.Sprintf("object s3://%s/ranged/object: %d bytes, 20 sections", bucket, len(ranged)))
	assert.Contains(t, rb.stdout, "verified: header, index and all 20 sections")
}
