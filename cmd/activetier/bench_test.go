package main

import (
	"testing"
	"time"

	"github.com/activetier/activetier/combiner"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// The generator must outpace the demo's --rate on one core. The baseline
// is the least any producer does per batch: allocate and copy its bytes.
func BenchmarkRecordGen(b *testing.B) {
	gen := newRecordGen(1)
	now := time.Now()
	size := len(gen.batch(0, 0, now, 16<<10).Data)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var off int64
	for b.Loop() {
		batch := gen.batch(0, off, now, 16<<10)
		off = batch.LastOffset + 1
	}
}

func BenchmarkRecordGenBaselineCopy(b *testing.B) {
	src := newRecordGen(1).batch(0, 0, time.Now(), 16<<10).Data
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		dst := make([]byte, len(src))
		copy(dst, src)
	}
}

// inspect decodes every section on its own and checks the header and the
// sections' order, so it costs about one verification, the baseline.
func BenchmarkInspectObject(b *testing.B) {
	data := benchObject(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		rep, err := inspectBytes("object", data)
		if err != nil || !rep.Valid {
			b.Fatal(err, rep.Error)
		}
	}
}

func BenchmarkInspectBaselineVerify(b *testing.B) {
	data := benchObject(b)
	dec, err := combiner.NewDecoder(combiner.DecoderOptions{Concurrency: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer dec.Close()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dec.Verify(data); err != nil {
			b.Fatal(err)
		}
	}
}

// benchObject is a 100-partition zstd object holding about 1.6 MB of
// batches, like one a demo leader cuts.
func benchObject(b *testing.B) []byte {
	b.Helper()
	enc, err := combiner.NewEncoder(combiner.EncoderOptions{Codec: metadata.CodecZstd})
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	gen := newRecordGen(1)
	now := time.Now()
	var in []combiner.SectionInput
	for p := range 100 {
		in = append(in, combiner.SectionInput{Partition: metadata.TopicPartition{Topic: "logs", Partition: int32(p)}, Batches: []storage.Batch{gen.batch(0, 0, now, 16<<10)}})
	}
	data, _, err := enc.Encode(nil, in)
	if err != nil {
		b.Fatal(err)
	}
	return data
}
