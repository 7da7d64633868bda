package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/activetier/activetier/combiner"
)

// inspectOptions are the flags of `activetier inspect`.
type inspectOptions struct {
	json bool
	s3   s3Source
}

func inspectFlags() (*inspectOptions, *flag.FlagSet) {
	o := &inspectOptions{}
	fs := newFlagSet("inspect")
	fs.BoolVar(&o.json, "json", false, "print one JSON object instead of a table")
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
	if fs.NArg() != 1 {
		return usagef("want one object (a file, - for stdin, or with --bucket a key), got %d arguments", fs.NArg())
	}
	name, data, err := o.load(ctx, e, fs.Arg(0))
	if err != nil {
		return err
	}
	rep, err := inspectObject(name, data)
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

// load reads the whole object named on the command line.
func (o *inspectOptions) load(ctx context.Context, e env, arg string) (name string, data []byte, err error) {
	switch {
	case o.s3.bucket != "":
		return o.s3.load(ctx, arg)
	case arg == "-":
		data, err = io.ReadAll(e.stdin)
		if err != nil {
			return "", nil, fmt.Errorf("reading stdin: %w", err)
		}
		return "stdin", data, nil
	default:
		// The path is the user's own argument: reading it is the point.
		data, err = os.ReadFile(arg)
		return arg, data, err
	}
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

// inspectObject lists data's sections from its footer, verifies each one on
// its own (as a follower that fetched only its range would), and then the
// object as a whole (header, and the order of a partition's sections). A
// corrupt object is a report with err set, not an error: the table of what
// could be read is still worth printing.
func inspectObject(name string, data []byte) (*inspection, error) {
	dec, err := combiner.NewDecoder(combiner.DecoderOptions{Concurrency: 1})
	if err != nil {
		return nil, err
	}
	defer dec.Close()

	rep := &inspection{Object: name, Size: int64(len(data)), Sections: []sectionJSON{}}
	fail := func(err error) {
		if rep.err == nil {
			rep.err = err
			rep.Error = err.Error()
		}
	}
	infos, err := combiner.ReadFooter(data, int64(len(data)))
	if err != nil {
		fail(fmt.Errorf("%s: cannot read the index: %w", name, err))
		return rep, nil
	}
	var batches []combiner.Batch
	for i, s := range infos {
		sj := newSectionJSON(i, s)
		section := data[s.Position : s.Position+s.Length] // ReadFooter checked the ranges tile the object
		batches, err = dec.DecodeSection(batches[:0], section, s)
		if err != nil {
			sj.Error = err.Error()
			fail(fmt.Errorf("%s: section %d of %d (%s, offsets %d-%d, bytes %d-%d): %w",
				name, i, len(infos), s.Partition, s.FirstOffset, s.LastOffset, s.Position, s.Position+s.Length, err))
		} else {
			sj.OK = true
			sj.Batches = len(batches)
		}
		rep.Sections = append(rep.Sections, sj)
	}
	if rep.err == nil {
		if _, err := dec.Verify(data); err != nil {
			fail(fmt.Errorf("%s: %w", name, err))
		}
	}
	rep.Valid = rep.err == nil
	return rep, nil
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
