package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// inspectRSSBound is the memory the command's documentation promises
// inspect stays within: about twice --max-bytes, plus the runtime's and the
// AWS SDK's own few MiB, for which 48 MiB is ample.
func inspectRSSBound(limit int64) int64 { return 2*limit + 48<<20 }

// binaryTimeout bounds a run of the built binary, so that a regression
// (reading without end) fails the test instead of hanging it.
const binaryTimeout = 2 * time.Minute

func binaryContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), binaryTimeout)
	t.Cleanup(cancel)
	return ctx
}

// sparseFile creates a file of size bytes, zeros but for the given
// writes, without writing (or storing) the zeros.
func sparseFile(t *testing.T, size int64, writes map[int64][]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "object")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Truncate(size))
	for at, b := range writes {
		_, err := f.WriteAt(b, at)
		require.NoError(t, err)
	}
	return path
}

// trailer encodes an object trailer as combiner's documented layout has it.
func trailer(footerPos int64, footer []byte, footerLen uint32, count uint32) []byte {
	t := binary.LittleEndian.AppendUint64(nil, uint64(footerPos))
	t = binary.LittleEndian.AppendUint32(t, footerLen)
	t = binary.LittleEndian.AppendUint32(t, count)
	d := xxhash.New()
	_, _ = d.Write(footer)
	_, _ = d.Write(t)
	t = binary.LittleEndian.AppendUint64(t, d.Sum64())
	t = binary.LittleEndian.AppendUint16(t, combiner.FormatVersion)
	t = binary.LittleEndian.AppendUint16(t, 0)
	return append(t, "ATCO"...)
}

// hugeSectionTail is a valid index and trailer, footer checksum included,
// for an object of size bytes whose one section fills everything between
// header and footer: an index that tells a reader to fetch gigabytes.
func hugeSectionTail(size int64) []byte {
	footerLen := 0
	for {
		footerPos := size - combiner.TrailerSize - int64(footerLen)
		f := binary.AppendUvarint(nil, 1) // one topic
		f = append(f, 0)                  // no topic ID
		f = binary.AppendUvarint(f, 1)
		f = append(f, 't')
		f = binary.AppendUvarint(f, 0) // topic index
		f = binary.AppendUvarint(f, 0) // partition
		f = binary.AppendVarint(f, 0)  // epoch
		f = binary.AppendUvarint(f, 0) // first offset
		f = binary.AppendUvarint(f, 0) // offset span
		f = binary.AppendVarint(f, 0)  // max timestamp
		f = binary.AppendUvarint(f, 1) // batches
		f = binary.AppendUvarint(f, uint64(footerPos-combiner.HeaderSize))
		f = append(f, byte(metadata.CodecNone))
		f = binary.AppendUvarint(f, 1) // uncompressed size
		f = binary.LittleEndian.AppendUint64(f, 0)
		if len(f) == footerLen {
			return append(f, trailer(footerPos, f, uint32(len(f)), 1)...)
		}
		footerLen = len(f)
	}
}

// hugeSectionError is how inspect refuses the section of hugeSectionTail.
func hugeSectionError(size int64) string {
	end := size - int64(len(hugeSectionTail(size)))
	return fmt.Sprintf("section 0 of 1 (t-0, offsets 0-0, bytes 8-%d): %d bytes, larger than --max-bytes 256MiB: not read", end, end-combiner.HeaderSize)
}

// zeros is endless stdin with a safety valve: it ends after max bytes, so
// that a reader that does not stop fails the test instead of filling the
// machine's memory. n counts what was read.
type zeros struct{ n, max int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n >= z.max {
		return 0, io.EOF
	}
	k := min(int64(len(p)), z.max-z.n)
	clear(p[:k])
	z.n += k
	return int(k), nil
}

// Whatever the input's size, inspect reads the index, then one section at
// a time, never more than --max-bytes at once, and fails with one line. A
// file and a bucket's object are read by ranges; what has no size (stdin
// from a pipe, a device) is read up to --max-bytes and no further. The
// peak resident set of the process stays within the documented bound.
func TestInspectMemoryBound(t *testing.T) {
	const gib = 1 << 30
	const limit = defaultInspectMaxBytes
	header := map[int64][]byte{0: objectHeader()}
	zeros2G := sparseFile(t, 2*gib, nil)
	hugeIndex := sparseFile(t, 5*gib, map[int64][]byte{
		// A trailer whose footer is 4 GiB long: ShortTailError asks for it.
		5*gib - combiner.TrailerSize: trailer(5*gib-combiner.TrailerSize-(4*gib-64), nil, 4*gib-64, 1),
	})
	tail := hugeSectionTail(3 * gib)
	hugeSection := sparseFile(t, 3*gib, map[int64][]byte{0: header[0], 3*gib - int64(len(tail)): tail})

	open := func(path string) *os.File {
		f, err := os.Open(path)
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		return f
	}
	for _, tc := range []struct {
		name  string
		args  []string
		stdin func() io.Reader
		limit int64
		want  string
	}{
		{"2 GiB of zeros", []string{"inspect", zeros2G}, nil, limit, zeros2G + ": cannot read the index: combiner: corrupt trailer"},
		{"2 GiB of zeros on stdin", []string{"inspect", "-"}, func() io.Reader { return open(zeros2G) }, limit, "stdin: cannot read the index"},
		{"an index of 4 GiB", []string{"inspect", hugeIndex}, nil, limit, "index and trailer of 4294967264 bytes are larger than --max-bytes 256MiB"},
		{"a section of 3 GiB", []string{"inspect", hugeSection}, nil, limit, hugeSectionError(3 * gib)},
		{"/dev/zero", []string{"inspect", "--max-bytes", "16MiB", "/dev/zero"}, nil, 16 << 20, "/dev/zero: longer than --max-bytes 16MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdin io.Reader
			if tc.stdin != nil {
				stdin = tc.stdin()
			}
			r := runMeasured(binaryContext(t), t, stdin, nil, tc.args...)
			assert.Equal(t, exitFailure, r.code, r.stderr)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
			assert.Contains(t, r.stderr, tc.want)
			t.Logf("peak RSS %.1f MiB", float64(r.maxRSS)/(1<<20))
			assert.Less(t, r.maxRSS, inspectRSSBound(tc.limit), "peak RSS")
		})
	}

	// Endless stdin through a pipe: reading stops just past the limit.
	for _, limit := range []int64{16 << 20, defaultInspectMaxBytes} {
		t.Run(fmt.Sprintf("endless stdin, --max-bytes %s", formatBytes(limit)), func(t *testing.T) {
			z := &zeros{max: 4 * limit}
			r := runMeasured(binaryContext(t), t, z, nil, "inspect", "--max-bytes", formatBytes(limit), "-")
			assert.Equal(t, exitFailure, r.code, r.stderr)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
			assert.Contains(t, r.stderr, "activetier inspect: stdin: longer than --max-bytes "+formatBytes(limit))
			assert.LessOrEqual(t, z.n, limit+2<<20, "read past the limit (the pipe holds at most a few hundred KiB)")
			t.Logf("peak RSS %.1f MiB after %d bytes", float64(r.maxRSS)/(1<<20), z.n)
			assert.Less(t, r.maxRSS, inspectRSSBound(limit), "peak RSS")
		})
	}
}

// manySections is an object of n uncompressed sections, each one batch of
// about size bytes. With 5000 sections its index is longer than
// DefaultTailSize, so that reading it takes a second read of the tail.
func manySections(t *testing.T, n, size int) []byte {
	t.Helper()
	enc, err := combiner.NewEncoder(combiner.EncoderOptions{Codec: metadata.CodecNone})
	require.NoError(t, err)
	defer enc.Close()
	gen := newRecordGen(5)
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var in []combiner.SectionInput
	for p := range n {
		in = append(in, combiner.SectionInput{
			Partition: metadata.TopicPartition{Topic: "logs", Partition: int32(p)},
			Batches:   []storage.Batch{gen.batch(0, 0, now, size)},
		})
	}
	data, _, err := enc.Encode(nil, in)
	require.NoError(t, err)
	return data
}

// An index larger than the first tail read is read in a second request, as
// a follower would, within --max-bytes; from a file, from a pipe, and from
// stdin redirected from a file.
func TestInspectLongIndex(t *testing.T) {
	data := manySections(t, 5000, 50)
	require.Greater(t, len(data), 192<<10, "larger than the smaller --max-bytes below")
	path := filepath.Join(t.TempDir(), "object")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	for name, stdin := range map[string]io.Reader{"file": nil, "pipe": strings.NewReader(string(data)), "stdin file": f} {
		t.Run(name, func(t *testing.T) {
			args := []string{"inspect", path}
			if stdin != nil {
				args = []string{"inspect", "-"}
			}
			r := runBinary(binaryContext(t), t, stdin, nil, args...)
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Contains(t, r.stdout, fmt.Sprintf("%d bytes, 5000 sections", len(data)))
			assert.Contains(t, r.stdout, "verified: header, index and all 5000 sections")
		})
	}
	// Larger than --max-bytes, so read by ranges: the tail, the index,
	// then each section.
	r := runCmd(t, "", "inspect", "--max-bytes", "192KiB", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "verified: header, index and all 5000 sections")

	r = runCmd(t, "", "inspect", "--max-bytes", "64KiB", path)
	assert.Equal(t, exitFailure, r.code)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
	assert.Regexp(t, `cannot read the index: index and trailer of \d+ bytes are larger than --max-bytes 64KiB`, r.stderr)
}

// A section longer than --max-bytes is not read, and one that would
// decompress to more is not decompressed; both are named, the others are
// verified, and the command exits 1.
func TestInspectSectionLimit(t *testing.T) {
	r := runCmd(t, "", "inspect", "--json", "--max-bytes", "2KiB", sampleFile)
	assert.Equal(t, exitFailure, r.code)
	var rep inspection
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.Len(t, rep.Sections, 5)
	// Section 0 is 2806 bytes; section 1 is 1638 bytes of zstd that
	// decompress to 6219; section 3 is 668 bytes decompressing to 1601.
	assert.Equal(t, "2806 bytes, larger than --max-bytes 2KiB: not read", rep.Sections[0].Error)
	assert.Contains(t, rep.Sections[1].Error, "combiner: section exceeds the decoder's size limit")
	assert.True(t, rep.Sections[3].OK, rep.Sections[3].Error)
	assert.False(t, rep.Valid)
	assert.Contains(t, r.stderr, "section 0 of 5 (logs-0, offsets 0-47, bytes 8-2814): 2806 bytes, larger than --max-bytes 2KiB")

	r = runCmd(t, "", "inspect", "--max-bytes", "1000", sampleFile)
	assert.Equal(t, exitUsage, r.code)
	assert.Equal(t, "activetier inspect: --max-bytes 1000: must be at least 1KiB\n", r.stderr)
}

// objectHeader is how an object of the format version this build writes
// begins (combiner's documented layout): magic "ATCO", the version as a
// little-endian uint16, and zero flags.
func objectHeader() []byte {
	h := []byte("ATCO\x00\x00\x00\x00")
	binary.LittleEndian.PutUint16(h[4:6], combiner.FormatVersion)
	return h
}

// The test objects' header is what the encoder writes.
func TestObjectHeaderMatchesEncoder(t *testing.T) {
	data, _ := sampleObject(t)
	assert.Equal(t, data[:combiner.HeaderSize], objectHeader())
}

// fakeS3 is an S3 server that lies: it claims an object of 2^62 bytes and
// answers range GETs as mode says. asked counts the bytes the client
// asked for with Range headers.
type fakeS3 struct {
	mode  string
	asked atomic.Int64
}

const fakeSize = int64(1) << 62

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodHead {
		w.Header().Set("Content-Length", strconv.FormatInt(fakeSize, 10))
		if f.mode == "no size" {
			w.Header().Del("Content-Length")
			w.Header().Set("Transfer-Encoding", "chunked")
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	var first, last int64
	if _, err := fmt.Sscanf(req.Header.Get("Range"), "bytes=%d-%d", &first, &last); err != nil {
		http.Error(w, "want a range", http.StatusBadRequest)
		return
	}
	n := last - first + 1
	f.asked.Add(n)
	var body func(p []byte, at int64)
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := func(p []byte, _ int64) {
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
	}
	switch f.mode {
	case "garbage":
		body = garbage
	case "ignores range":
		// The whole claimed object, as if Range were not supported.
		w.Header().Set("Content-Length", strconv.FormatInt(fakeSize, 10))
		w.WriteHeader(http.StatusOK)
		f.stream(w, fakeSize, garbage)
		return
	case "huge index":
		// Zeros ending in a trailer whose footer is 4 GiB long.
		tr := trailer(fakeSize-combiner.TrailerSize-(4<<30-64), nil, 4<<30-64, 1)
		body = func(p []byte, at int64) {
			clear(p)
			for i := range p {
				if k := at + int64(i) - (fakeSize - combiner.TrailerSize); k >= 0 {
					p[i] = tr[k]
				}
			}
		}
	case "huge section":
		tail := hugeSectionTail(fakeSize)
		body = func(p []byte, at int64) {
			clear(p)
			for i := range p {
				if k := at + int64(i) - (fakeSize - int64(len(tail))); k >= 0 {
					p[i] = tail[k]
				}
			}
		}
	}
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, fakeSize))
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(http.StatusPartialContent)
	f.stream(w, n, func(p []byte, at int64) { body(p, first+at) })
}

// stream writes n bytes made by fill, at most 64 MiB of them, which is far
// more than inspect should ever ask a server for.
func (f *fakeS3) stream(w io.Writer, n int64, fill func(p []byte, at int64)) {
	buf := make([]byte, 32<<10)
	for at := int64(0); at < min(n, 64<<20); {
		p := buf[:min(int64(len(buf)), n-at)]
		fill(p, at)
		k, err := w.Write(p)
		if err != nil {
			return
		}
		at += int64(k)
	}
}

// A server that claims a 4 EiB object makes inspect read only the ranges it
// would read of any object; it fails with one line naming the object, and
// its memory stays within the bound.
func TestInspectLyingS3Server(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want string
	}{
		{"garbage", "s3://bucket/key: cannot read the index: combiner: corrupt trailer"},
		{"ignores range", "s3://bucket/key: cannot read the index:"},
		{"huge index", "s3://bucket/key: cannot read the index: index and trailer of 4294967264 bytes are larger than --max-bytes 256MiB"},
		{"huge section", "s3://bucket/key: " + hugeSectionError(fakeSize)},
		{"no size", "s3://bucket/key: the server gave no object size"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			fake := &fakeS3{mode: tc.mode}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			dir := t.TempDir()
			env := []string{
				"AWS_ACCESS_KEY_ID=fake", "AWS_SECRET_ACCESS_KEY=fake", "AWS_REGION=us-east-1",
				"AWS_CONFIG_FILE=" + filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "credentials"),
				"AWS_EC2_METADATA_DISABLED=true", "AWS_MAX_ATTEMPTS=1",
			}
			r := runMeasured(binaryContext(t), t, nil, env, "inspect", "--s3-endpoint", srv.URL, "--bucket", "bucket", "key")
			assert.Equal(t, exitFailure, r.code, r.stderr)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
			assert.Contains(t, r.stderr, tc.want)
			assert.LessOrEqual(t, fake.asked.Load(), int64(2*combiner.DefaultTailSize), "bytes asked of the server")
			t.Logf("peak RSS %.1f MiB; %d bytes asked for", float64(r.maxRSS)/(1<<20), fake.asked.Load())
			assert.Less(t, r.maxRSS, inspectRSSBound(defaultInspectMaxBytes), "peak RSS")
		})
	}
}
