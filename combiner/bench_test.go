package combiner

import (
	"fmt"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/activetier/activetier/internal/bufpool"
	"github.com/activetier/activetier/internal/cputime"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// Benchmarks encode and decode an object of 100 partitions of Kafka-like
// log batches (about 1 MiB at 1x; 10x has ten times the batches per
// partition, to show that allocations do not grow with batches). Every
// benchmark sets bytes to the batch data, so MB/s compare directly with
// BenchmarkBaselineCopyXXHash: the least any encoder or verifier must do is
// to copy the bytes once and hash them once.
//
// Each benchmark also reports cpu-MB/s, the same throughput over the
// process's CPU time (all threads, GC included) instead of wall time. On a
// shared machine, where other processes stretch wall time unevenly, the
// CPU figures give the steadier ratios.
//
//	go test ./combiner -run '^$' -bench . -benchtime 200x -count 5

const (
	benchPartitions = 100
	benchBatches    = 3
	benchRecords    = 14
)

var benchScales = []int{1, 10}

// cpuMeter reports throughput over CPU time; start it just before the
// b.Loop loop and stop it just after.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuMeter {
	t, ok := cputime.Process()
	return cpuMeter{start: t, ok: ok}
}

func (m cpuMeter) stop(b *testing.B, bytes int) {
	end, ok := cputime.Process()
	if !m.ok || !ok || end <= m.start {
		return
	}
	cpu := end - m.start
	b.ReportMetric(float64(bytes)*float64(b.N)/cpu.Seconds()/1e6, "cpu-MB/s")
}

func benchSections(scale int) []SectionInput {
	return newKafkaGen(1).workload(benchPartitions, benchBatches*scale, benchRecords)
}

func BenchmarkBaselineCopyXXHash(b *testing.B) {
	for _, scale := range benchScales {
		b.Run(fmt.Sprintf("%dx", scale), func(b *testing.B) {
			sections := benchSections(scale)
			total := totalBytes(sections)
			buf := make([]byte, 0, total)
			var sum uint64
			b.SetBytes(int64(total))
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				buf = buf[:0]
				for _, s := range sections {
					for _, bt := range s.Batches {
						buf = append(buf, bt.Data...)
					}
				}
				sum += xxhash.Sum64(buf)
			}
			cpu.stop(b, total)
			if sum == 1 {
				b.Log("unlikely")
			}
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, codec := range codecs {
		for _, scale := range benchScales {
			b.Run(fmt.Sprintf("%s/%dx", codec, scale), func(b *testing.B) {
				sections := benchSections(scale)
				total := totalBytes(sections)
				enc := newEncoder(b, EncoderOptions{Codec: codec})
				// One encode outside the loop sizes dst and the encoder's
				// scratch buffers, as in a long-running leader.
				dst, _, err := enc.Encode(nil, sections)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(total))
				b.ReportAllocs()
				cpu := startCPU()
				for b.Loop() {
					dst, _, err = enc.Encode(dst[:0], sections)
					if err != nil {
						b.Fatal(err)
					}
				}
				cpu.stop(b, total)
				b.ReportMetric(float64(total)/float64(len(dst)), "ratio")
			})
		}
	}
}

// BenchmarkDecodeVerify is a follower's work for a whole object: list the
// sections from the object's tail, then verify and decode every section
// from its own range.
func BenchmarkDecodeVerify(b *testing.B) {
	for _, codec := range codecs {
		for _, scale := range benchScales {
			b.Run(fmt.Sprintf("%s/%dx", codec, scale), func(b *testing.B) {
				sections := benchSections(scale)
				total := totalBytes(sections)
				enc := newEncoder(b, EncoderOptions{Codec: codec})
				obj, _, err := enc.Encode(nil, sections)
				if err != nil {
					b.Fatal(err)
				}
				dec := newDecoder(b, DecoderOptions{})
				size := int64(len(obj))
				tail := obj[max(0, size-DefaultTailSize):]
				batches := make([]storage.Batch, 0, benchBatches*scale)
				b.SetBytes(int64(total))
				b.ReportAllocs()
				cpu := startCPU()
				for b.Loop() {
					infos, err := ReadFooter(tail, size)
					if err != nil {
						b.Fatal(err)
					}
					for _, s := range infos {
						batches, err = dec.DecodeSection(batches[:0], obj[s.Position:s.Position+s.Length], s)
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				cpu.stop(b, total)
				b.ReportMetric(float64(total)/float64(len(obj)), "ratio")
				compressed := 0
				infos, _ := ReadFooter(tail, size)
				for _, s := range infos {
					if s.Codec != metadata.CodecNone {
						compressed++
					}
				}
				b.ReportMetric(float64(compressed), "compressed-sections")
			})
		}
	}
}

// BenchmarkSmallSections encodes, and lists and decodes, an object of
// DefaultMaxPartitions sections of one small batch each (about 300 bytes),
// uncompressed: the workload where per-section costs (headers, footer
// entries, checksum setup) weigh most against the bytes.
func BenchmarkSmallSections(b *testing.B) {
	sections := newKafkaGen(2).workload(DefaultMaxPartitions, 1, 1)
	total := totalBytes(sections)
	enc := newEncoder(b, EncoderOptions{})
	obj, _, err := enc.Encode(nil, sections)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		dst := make([]byte, 0, len(obj))
		b.SetBytes(int64(total))
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			if dst, _, err = enc.Encode(dst[:0], sections); err != nil {
				b.Fatal(err)
			}
		}
		cpu.stop(b, total)
	})
	b.Run("decode-verify", func(b *testing.B) {
		dec := newDecoder(b, DecoderOptions{})
		batches := make([]storage.Batch, 0, 1)
		b.SetBytes(int64(total))
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			infos, err := ReadFooter(obj, int64(len(obj)))
			if err != nil {
				b.Fatal(err)
			}
			for _, s := range infos {
				if batches, err = dec.DecodeSection(batches[:0], obj[s.Position:s.Position+s.Length], s); err != nil {
					b.Fatal(err)
				}
			}
		}
		cpu.stop(b, total)
	})
}

// BenchmarkBuilderCut is a leader's work per object: add the batches of 100
// partitions to a Builder and cut them, encoding into new buffers or into
// the buffers of earlier objects given back (BuilderConfig.Buffer), as the
// leader does once their upload succeeded. Compare the two in one run.
func BenchmarkBuilderCut(b *testing.B) {
	for _, reuse := range []bool{false, true} {
		name := "new-buffers"
		if reuse {
			name = "reused-buffers"
		}
		b.Run(name, func(b *testing.B) {
			sections := benchSections(10)
			total := totalBytes(sections)
			pool := bufpool.New(64 << 20)
			cfg := BuilderConfig{}
			if reuse {
				cfg.Buffer = pool.Get
			}
			builder, err := NewBuilder(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer builder.Close()
			var objs []Object
			b.SetBytes(int64(total))
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				for _, s := range sections {
					for _, batch := range s.Batches {
						if err := builder.Add(s.Partition, batch, time.Time{}); err != nil {
							b.Fatal(err)
						}
					}
				}
				if objs, err = builder.Cut(objs[:0]); err != nil {
					b.Fatal(err)
				}
				if reuse {
					for _, o := range objs {
						pool.Put(o.Data)
					}
				}
			}
			cpu.stop(b, total)
		})
	}
}
