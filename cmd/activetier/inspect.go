package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/metadata"
)

// inspectOptions are the flags of `activetier inspect`.
type inspectOptions struct {
	json     bool
	maxBytes byteSize
	s3       s3Source
}

// defaultInspectMaxBytes is --max-bytes by default: the decompressed size
// up to which a follower with default options decodes a section, so that
// inspect reads every object such a follower reads.
const defaultInspectMaxBytes = combiner.DefaultMaxUncompressedSize

// minInspectMaxBytes keeps --max-bytes above the trailer and a small index.
const minInspectMaxBytes = 1 << 10

func inspectFlags() (*inspectOptions, *flag.FlagSet) {
	o := &inspectOptions{maxBytes: defaultInspectMaxBytes}
	fs := newFlagSet("inspect")
	fs.BoolVar(&o.json, "json", false, "print one JSON object instead of a table")
	fs.Var(&o.maxBytes, "max-bytes", "the most read into memory at once: an object from stdin or a pipe, the index, one section, one section decompressed (`size`; at most about twice this is held)")
	o.s3.register(fs)
	return o, fs
}

const inspectSynopsis = "inspect [flags] FILE | - | --bucket B [--s3-endpoint URL] KEY"

func runInspect(ctx context.Context, e env, args []string) error {
	o, fs := inspectFlags()
	if help, err := parseFlags(e, fs, inspectSynopsis, args); help || err != nil {
		return err
	}
	if err := o.s3.validate(fs); err != nil {
		return err
	}
	if o.maxBytes < minInspectMaxBytes {
		return flagError(fs, "max-bytes", "must be at least 1KiB")
	}
	if fs.NArg() != 1 {
		return usagef("want one object (a file, - for stdin, or with --bucket a key), got %d arguments", fs.NArg())
	}
	obj, err := o.open(ctx, e, fs.Arg(0))
	if err != nil {
		return err
	}
	defer obj.close()
	rep, err := inspectObject(ctx, obj, int64(o.maxBytes))
	if err != nil {
		return err
	}
	if o.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else if err := rep.writeText(e.stdout); err != nil {
		return err
	}
	return rep.err
}

// object is a combined object inspect reads the way a follower does: by
// byte ranges, the index from the end first, then one section at a time,
// so that no read is larger than --max-bytes whatever size the object has
// or claims to have.
type object struct {
	name string
	// size is the object's size as its source gives it: a file's, or what
	// an S3 server claims. ReadFooter checks it against the trailer.
	size int64
	r    rangeReader
	// close releases the source (a file, idle connections).
	close func()
}

// rangeReader reads one object's bytes.
type rangeReader interface {
	// readRange returns exactly n > 0 bytes from off, or an error.
	readRange(ctx context.Context, off, n int64) ([]byte, error)
}

// open finds the object named on the command line. A regular file, stdin
// redirected from one included, is read by ranges; a pipe or a device has
// no size to go by and is read whole, up to --max-bytes.
func (o *inspectOptions) open(ctx context.Context, e env, arg string) (*object, error) {
	limit := int64(o.maxBytes)
	switch {
	case o.s3.bucket != "":
		return o.s3.open(ctx, arg)
	case arg == "-":
		if f, ok := e.stdin.(*os.File); ok {
			if obj, ok, err := openRegular(f, "stdin"); ok || err != nil {
				return obj, err
			}
		}
		return readWhole(ctx, e.stdin, "stdin", limit)
	}
	// The path is the user's own argument: reading it is the point.
	f, err := os.Open(arg)
	if err != nil {
		return nil, err
	}
	obj, ok, err := openRegular(f, arg)
	if ok {
		return obj, nil // obj closes f
	}
	defer f.Close()
	if err != nil {
		return nil, err
	}
	return readWhole(ctx, f, arg, limit)
}

// openRegular returns f as an object read by ranges from its current
// offset to its end when it is a regular file; ok is false otherwise.
func openRegular(f *os.File, name string) (obj *object, ok bool, err error) {
	st, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", name, err)
	}
	if !st.Mode().IsRegular() {
		return nil, false, nil
	}
	base, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", name, err)
	}
	return &object{name: name, size: max(0, st.Size()-base), r: fileRange{f, base}, close: func() { f.Close() }}, true, nil
}

// fileRange reads a file from base on.
type fileRange struct {
	f    *os.File
	base int64
}

func (r fileRange) readRange(_ context.Context, off, n int64) ([]byte, error) {
	buf := make([]byte, n)
	if _, err := r.f.ReadAt(buf, r.base+off); err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("file ends before byte %d: %w", off+n, io.ErrUnexpectedEOF)
		}
		return nil, err
	}
	return buf, nil
}

// bytesRange is an object read whole.
type bytesRange []byte

func (b bytesRange) readRange(_ context.Context, off, n int64) ([]byte, error) {
	return b[off : off+n], nil // inspectObject asks only for ranges inside the size
}

// readWhole reads an object that has no size to go by (stdin, a pipe, a
// device) into memory, failing as soon as it is longer than limit.
func readWhole(ctx context.Context, r io.Reader, name string, limit int64) (*object, error) {
	// Chunks, joined once at the end, so that the buffer never grows by
	// copying a larger and larger prefix.
	const chunkSize = 1 << 20
	var chunks [][]byte
	total := int64(0)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		buf := make([]byte, min(chunkSize, limit+1-total))
		n, err := io.ReadFull(r, buf)
		chunks = append(chunks, buf[:n])
		total += int64(n)
		if total > limit {
			return nil, fmt.Errorf("%s: longer than --max-bytes %s; give a larger --max-bytes, or the object as a file, which is read by ranges", name, formatBytes(limit))
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
	}
	data := chunks[0]
	if len(chunks) > 1 {
		data = bytes.Join(chunks, nil)
	}
	return &object{name: name, size: total, r: bytesRange(data), close: func() {}}, nil
}

// inspection is what `activetier inspect` reports about one object.
type inspection struct {
	Object   string        `json:"object"`
	Size     int64         `json:"size"`
	Sections []sectionJSON `json:"sections"`
	// Valid is true when the footer, the header and every section verified.
	Valid bool `json:"valid"`
	// Error is the first problem found, naming the part of the object.
	Error string `json:"error,omitempty"`

	err error
}

type sectionJSON struct {
	Index            int    `json:"index"`
	Topic            string `json:"topic"`
	TopicID          string `json:"topic_id,omitempty"`
	Partition        int32  `json:"partition"`
	Epoch            int32  `json:"epoch"`
	FirstOffset      int64  `json:"first_offset"`
	LastOffset       int64  `json:"last_offset"`
	Batches          int    `json:"batches"`
	MaxTimestampMS   int64  `json:"max_timestamp_ms"`
	Position         int64  `json:"position"`
	Length           int64  `json:"length"`
	Codec            string `json:"codec"`
	UncompressedSize int64  `json:"uncompressed_size"`
	Checksum         string `json:"checksum"`
	OK               bool   `json:"ok"`
	Error            string `json:"error,omitempty"`
}

// inspectObject lists obj's sections from its index, verifies each one on
// its own (from its range only, as a follower does), and then the object as
// a whole: its header, and the order of a partition's sections, which is
// what combiner's Verify checks beyond the sections. An object of at most
// limit bytes is read at once; a larger one by ranges, the index and then
// one section at a time. No read is larger than limit, and no section
// decompresses to more. A corrupt object is a
// report with err set, not an error: the table of what could be read is
// still worth printing.
func inspectObject(ctx context.Context, obj *object, limit int64) (*inspection, error) {
	dec, err := combiner.NewDecoder(combiner.DecoderOptions{Concurrency: 1, MaxUncompressedSize: limit})
	if err != nil {
		return nil, err
	}
	defer dec.Close()

	name := obj.name
	if _, whole := obj.r.(bytesRange); !whole && obj.size > 0 && obj.size <= limit {
		// Small enough to hold: one read (one GET) instead of one per
		// section.
		data, err := obj.r.readRange(ctx, 0, obj.size)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		obj = &object{name: name, size: obj.size, r: bytesRange(data)}
	}
	rep := &inspection{Object: name, Size: obj.size, Sections: []sectionJSON{}}
	fail := func(err error) {
		if rep.err == nil {
			rep.err = err
			rep.Error = err.Error()
		}
	}
	infos, err := readIndex(ctx, obj, limit)
	if err != nil {
		fail(fmt.Errorf("%s: cannot read the index: %w", name, err))
		return rep, nil
	}
	type last struct {
		epoch  int32
		offset int64
	}
	seen := make(map[metadata.TopicPartition]last, len(infos))
	for i, s := range infos {
		sj := newSectionJSON(i, s)
		where := fmt.Sprintf("%s: section %d of %d (%s, offsets %d-%d, bytes %d-%d)",
			name, i, len(infos), s.Partition, s.FirstOffset, s.LastOffset, s.Position, s.Position+s.Length)
		n, err := readSection(ctx, obj, dec, s, limit)
		if err != nil {
			sj.Error = err.Error()
			fail(fmt.Errorf("%s: %w", where, err))
		} else {
			sj.OK = true
			sj.Batches = n
		}
		rep.Sections = append(rep.Sections, sj)
		// The index is checksummed: the order is checked whether or not
		// the section's bytes were good.
		if p, ok := seen[s.Partition]; ok && (s.FirstOffset <= p.offset || s.Epoch < p.epoch) {
			fail(fmt.Errorf("%s: epoch %d from offset %d follows an earlier section of the partition with epoch %d up to offset %d",
				where, s.Epoch, s.FirstOffset, p.epoch, p.offset))
		}
		seen[s.Partition] = last{epoch: s.Epoch, offset: s.LastOffset}
	}
	if err := checkHeader(ctx, obj); err != nil {
		fail(fmt.Errorf("%s: %w", name, err))
	}
	rep.Valid = rep.err == nil
	return rep, nil
}

// readIndex reads the object's tail, as a follower rebuilding metadata
// would: DefaultTailSize bytes, then the whole index if it is longer,
// provided it is within limit.
func readIndex(ctx context.Context, obj *object, limit int64) ([]combiner.SectionInfo, error) {
	n := min(obj.size, combiner.DefaultTailSize, limit)
	var tail []byte
	if n > 0 {
		var err error
		if tail, err = obj.r.readRange(ctx, obj.size-n, n); err != nil {
			return nil, err
		}
	}
	infos, err := combiner.ReadFooter(tail, obj.size)
	var short *combiner.ShortTailError
	if !errors.As(err, &short) || short.Need <= n {
		return infos, err
	}
	// ReadFooter checked that the index ends the object, so Need is within
	// the size; the limit is the user's.
	if short.Need > limit {
		return nil, fmt.Errorf("index and trailer of %d bytes are larger than --max-bytes %s", short.Need, formatBytes(limit))
	}
	if tail, err = obj.r.readRange(ctx, obj.size-short.Need, short.Need); err != nil {
		return nil, err
	}
	return combiner.ReadFooter(tail, obj.size)
}

// readSection reads and decodes one section's range and returns its batch
// count. The batches are dropped at once: only the verdict is kept.
func readSection(ctx context.Context, obj *object, dec *combiner.Decoder, s combiner.SectionInfo, limit int64) (int, error) {
	if s.Length > limit {
		return 0, fmt.Errorf("%d bytes, larger than --max-bytes %s: not read", s.Length, formatBytes(limit))
	}
	section, err := obj.r.readRange(ctx, s.Position, s.Length)
	if err != nil {
		return 0, err
	}
	batches, err := dec.DecodeSection(nil, section, s)
	return len(batches), err
}

// checkHeader checks the object's first bytes, which no section covers.
func checkHeader(ctx context.Context, obj *object) error {
	if obj.size < combiner.HeaderSize {
		return fmt.Errorf("corrupt header: object of %d bytes", obj.size)
	}
	got, err := obj.r.readRange(ctx, 0, combiner.HeaderSize)
	if err != nil {
		return fmt.Errorf("reading the header: %w", err)
	}
	if _, err := combiner.CheckHeader(got); err != nil {
		return fmt.Errorf("%w (header %x)", err, got)
	}
	return nil
}

func newSectionJSON(i int, s combiner.SectionInfo) sectionJSON {
	sj := sectionJSON{
		Index: i, Topic: s.Partition.Topic, Partition: s.Partition.Partition, Epoch: s.Epoch,
		FirstOffset: s.FirstOffset, LastOffset: s.LastOffset, Batches: s.Batches, MaxTimestampMS: s.MaxTimestamp,
		Position: s.Position, Length: s.Length, Codec: s.Codec.String(), UncompressedSize: s.UncompressedSize,
		Checksum: fmt.Sprintf("%016x", s.Checksum),
	}
	if s.Partition.TopicID != ([16]byte{}) {
		sj.TopicID = hex.EncodeToString(s.Partition.TopicID[:])
	}
	return sj
}

func (r *inspection) writeText(w io.Writer) error {
	fmt.Fprintf(w, "object %s: %d bytes, %d sections\n\n", r.Object, r.Size, len(r.Sections))
	if len(r.Sections) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "#\tpartition\tepoch\toffsets\tbatches\tbytes\tcodec\tsize\tratio\tchecksum\tmax timestamp\tstatus")
		for _, s := range r.Sections {
			status := "ok"
			if !s.OK {
				status = "CORRUPT"
			}
			ratio := "-"
			if s.Length > 0 {
				ratio = fmt.Sprintf("%.2f", float64(s.UncompressedSize)/float64(s.Length))
			}
			fmt.Fprintf(tw, "%d\t%s-%d\t%d\t%d-%d\t%d\t%d+%d\t%s\t%d\t%s\t%s\t%s\t%s\n",
				s.Index, s.Topic, s.Partition, s.Epoch, s.FirstOffset, s.LastOffset, s.Batches,
				s.Position, s.Length, s.Codec, s.UncompressedSize, ratio, s.Checksum,
				time.UnixMilli(s.MaxTimestampMS).UTC().Format("2006-01-02T15:04:05.000Z"), status)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if r.Valid {
		_, err := fmt.Fprintf(w, "verified: header, index and all %d sections (checksums, batch tables, decompression)\n", len(r.Sections))
		return err
	}
	_, err := fmt.Fprintf(w, "NOT valid: %s\n", r.Error)
	return err
}
