package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/google/pprof/profile"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/activetier/activetier/internal/cputime"
	"github.com/activetier/activetier/metadata"
)

// The CPU split of a demo run says which part of the process's CPU was the
// engines' and which the test bench's around them. Every run takes a CPU
// profile (runtime/pprof, 100 samples a second) from the start of
// producing to the end of the checks, the window of cpu_s, and attributes
// each sample on two counts:
//
//   - on whose behalf, by the pprof label activetier on its goroutine:
//     walstore labels its Nodes' engine goroutines leader and follower
//     (goroutines inherit their creator's labels, so the engines' fetches,
//     uploads and local-log calls carry them too); the demo labels the
//     direct readers' goroutines reader and its own demo, and the producer
//     is labelled leader while it is inside a leader's Node.Append;
//   - in which component, by the innermost frame of its stack that belongs
//     to a package the split knows: a frame of klauspost/compress anywhere
//     in the stack makes the sample the codec's, whatever its label;
//     memstore's LocalLog is the local logs, its Log the metadata log, the
//     rest of memstore the object store; the demo's own code (package main,
//     metering, internal/cluster) is the demo's; the engines' packages
//     (walstore, directread, combiner and the cores) are the engines'.
//
// Labels alone cannot tell the store from the engine that called it (a
// labelled goroutine runs both), and frames alone cannot tell a leader from
// a follower (both run the same walstore code), hence both. A sample with
// no known frame (the runtime, the standard library below unlabelled
// goroutines: the background garbage collector, the scheduler) is the
// runtime's. The parts sum to the profiled CPU, which is at most the
// process's: the profiler misses what a thread runs between samples.

// cpuLabel is the pprof label key of the split, and the values it knows.
const (
	cpuLabel     = "activetier"
	roleLeader   = "leader"
	roleFollower = "follower"
	roleReader   = "reader"
	roleDemo     = "demo"
)

// component is where a sample's stack says its CPU went.
type component int

const (
	compNone component = iota // only frames the split does not know
	compEngine
	compCodec
	compObjectStore
	compLocalLog
	compMetadataLog
	compDemo
)

// The module's import path, which prefixes its packages' function names.
const modulePath = "github.com/activetier/activetier"

// engineFrames are the function name prefixes of the engines' packages.
var engineFrames = []string{
	modulePath + "/walstore.", modulePath + "/directread.", modulePath + "/combiner.",
	modulePath + "/internal/leadcore.", modulePath + "/internal/followcore.",
	modulePath + "/internal/readcore.", modulePath + "/internal/rolecore.",
}

// demoFrames are the function name prefixes of the demo's own code; in a
// test binary package main is named by its directory.
var demoFrames = []string{
	"main.", modulePath + "/cmd/activetier.", modulePath + "/metering.", modulePath + "/internal/cluster.",
}

// codecFrames prefix the codecs' functions.
const codecFrames = "github.com/klauspost/compress/"

// frameComponent is the component function name belongs to, compNone if
// the split does not know it.
func frameComponent(name string) component {
	if strings.HasPrefix(name, codecFrames) {
		return compCodec
	}
	if rest, ok := strings.CutPrefix(name, modulePath+"/memstore."); ok {
		switch {
		case strings.HasPrefix(rest, "(*LocalLog)"), strings.HasPrefix(rest, "(*localPartition)"), strings.HasPrefix(rest, "NewLocalLog"):
			return compLocalLog
		case strings.HasPrefix(rest, "(*Log)"), strings.HasPrefix(rest, "(*logPartition)"), strings.HasPrefix(rest, "NewLog"):
			return compMetadataLog
		default:
			return compObjectStore
		}
	}
	for _, p := range engineFrames {
		if strings.HasPrefix(name, p) {
			return compEngine
		}
	}
	for _, p := range demoFrames {
		if strings.HasPrefix(name, p) {
			return compDemo
		}
	}
	return compNone
}

// stackComponent is the component of a sample whose stack is locs, leaf
// first (and each location's lines innermost first, as pprof has them).
func stackComponent(locs []*profile.Location) component {
	found := compNone
	for _, l := range locs {
		for _, ln := range l.Line {
			if ln.Function == nil {
				continue
			}
			c := frameComponent(ln.Function.Name)
			if c == compCodec {
				return compCodec
			}
			if found == compNone {
				found = c
			}
		}
	}
	return found
}

// cpuSplit is a run's profiled CPU, in seconds, by part. The parts sum to
// ProfiledS.
type cpuSplit struct {
	// ProfiledS is the CPU the profile sampled, at most the process's
	// cpu_s over the same window.
	ProfiledS float64 `json:"profiled_s"`
	// The engines' own code (codec, stores and logs excluded), by the
	// label of the goroutine that ran it: the leaders', the followers',
	// the direct readers', and engine code the demo's goroutines called
	// (a failover's elections).
	LeaderS           float64 `json:"leader_s"`
	FollowerS         float64 `json:"follower_s"`
	ReaderS           float64 `json:"reader_s"`
	EngineUnlabelledS float64 `json:"engine_unlabelled_s"`
	// CodecS is zstd or s2, whoever called it; CodecReplicationS the part
	// of it on the leaders' and followers' goroutines (the rest is the
	// direct readers' and the demo's producer compression sample).
	CodecS            float64 `json:"codec_s"`
	CodecReplicationS float64 `json:"codec_replication_s"`
	// ObjectStoreS is memstore's object store, LocalLogS the brokers'
	// memstore.LocalLog, MetadataLogS memstore's metadata log.
	ObjectStoreS float64 `json:"object_store_s"`
	LocalLogS    float64 `json:"local_log_s"`
	MetadataLogS float64 `json:"metadata_log_s"`
	// DemoS is the demo's own code: the generator and producer, the
	// meters and counters around the stores, the samplers, the end-of-run
	// comparison.
	DemoS float64 `json:"demo_s"`
	// RuntimeS is what no known frame or label claims: the background
	// garbage collector, the scheduler.
	RuntimeS float64 `json:"runtime_s"`
}

// EnginesS is the engines' own CPU, every role.
func (s *cpuSplit) EnginesS() float64 {
	return s.LeaderS + s.FollowerS + s.ReaderS + s.EngineUnlabelledS
}

// replicationS is the CPU replication itself cost: the leaders' and
// followers' engines and their codec work.
func (s *cpuSplit) replicationS() float64 { return s.LeaderS + s.FollowerS + s.CodecReplicationS }

func (s *cpuSplit) add(role string, c component, sec float64) {
	s.ProfiledS += sec
	switch c {
	case compCodec:
		s.CodecS += sec
		if role == roleLeader || role == roleFollower {
			s.CodecReplicationS += sec
		}
		return
	case compObjectStore:
		s.ObjectStoreS += sec
		return
	case compLocalLog:
		s.LocalLogS += sec
		return
	case compMetadataLog:
		s.MetadataLogS += sec
		return
	case compDemo:
		s.DemoS += sec
		return
	}
	// The engines' own code, or frames the split does not know: the label
	// says whose.
	switch {
	case role == roleLeader:
		s.LeaderS += sec
	case role == roleFollower:
		s.FollowerS += sec
	case role == roleReader:
		s.ReaderS += sec
	case c == compEngine:
		s.EngineUnlabelledS += sec
	case role == roleDemo:
		s.DemoS += sec
	default:
		s.RuntimeS += sec
	}
}

// errNoCPUSamples says a profile has no CPU time to split.
var errNoCPUSamples = errors.New("the profile has no cpu/nanoseconds sample type")

// splitProfile attributes p's CPU samples as the package doc says.
func splitProfile(p *profile.Profile) (cpuSplit, error) {
	var s cpuSplit
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			idx = i
		}
	}
	if idx < 0 {
		return s, errNoCPUSamples
	}
	for _, smp := range p.Sample {
		var role string
		if v := smp.Label[cpuLabel]; len(v) > 0 {
			role = v[0]
		}
		s.add(role, stackComponent(smp.Location), float64(smp.Value[idx])/1e9)
	}
	return s, nil
}

// cpuProfiler is a run's CPU profile, taken into memory.
type cpuProfiler struct {
	buf bytes.Buffer
	// err is why profiling could not start (another profile runs).
	err     error
	running bool
}

// startCPUProfiler starts the run's profile; if profiling cannot start,
// the run goes on without and the report says why.
func startCPUProfiler() *cpuProfiler {
	p := &cpuProfiler{}
	if p.err = pprof.StartCPUProfile(&p.buf); p.err == nil {
		p.running = true
	}
	return p
}

// stop ends the profile, once; later calls do nothing.
func (p *cpuProfiler) stop() {
	if p.running {
		pprof.StopCPUProfile()
		p.running = false
	}
}

// result parses the stopped profile and splits it.
func (p *cpuProfiler) result() (*profile.Profile, *cpuSplit, error) {
	if p.err != nil {
		return nil, nil, fmt.Errorf("no CPU profile: %w", p.err)
	}
	prof, err := profile.Parse(bytes.NewReader(p.buf.Bytes()))
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the CPU profile: %w", err)
	}
	s, err := splitProfile(prof)
	if err != nil {
		return nil, nil, err
	}
	return prof, &s, nil
}

// labelled runs f with the goroutine labelled role for the CPU split, and
// restores the labels it had.
func labelled(ctx context.Context, role string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels(cpuLabel, role), f)
}

// floorSampleBytes is how much of the produced batches the floor is
// measured on: the first of them, which the local logs hold anyway.
const floorSampleBytes = 64 << 20

// floorMinBytes is the least each part of the floor is timed on: a small
// sample is gone over again until it adds up to this.
const floorMinBytes = 4 << 20

// cpuFloor is the least CPU replicating the run's bytes could take: for
// each produced byte, the codec's encode once (the leader), its decode at
// every follower, and at every replica one copy and one xxhash. It is
// timed on the same process after the run, on the first batches the run
// produced, each batch encoded on its own with the combiner's settings.
type cpuFloor struct {
	Codec       string `json:"codec"`
	SampleBytes int64  `json:"sample_bytes"`
	// The parts, in CPU seconds per GB (10^9 bytes) of batches.
	EncodeSPerGB float64 `json:"encode_s_per_gb"`
	DecodeSPerGB float64 `json:"decode_s_per_gb"`
	CopySPerGB   float64 `json:"copy_s_per_gb"`
	HashSPerGB   float64 `json:"hash_s_per_gb"`
	// SPerReplicatedGB is the floor per GB the followers applied: (encode
	// + (RF-1)·decode + RF·(copy + hash)) / (RF-1).
	SPerReplicatedGB float64 `json:"s_per_replicated_gb"`
	// EnginesSPerReplicatedGB is the leaders' and followers' engines'
	// CPU, their codec work included (cpu_split's leader_s, follower_s
	// and codec_replication_s), per GB the followers applied; Ratio is it
	// over SPerReplicatedGB. 0 without a CPU split.
	EnginesSPerReplicatedGB float64 `json:"engines_s_per_replicated_gb"`
	Ratio                   float64 `json:"ratio"`
}

// measureFloor times the floor on batches for rf replicas.
func measureFloor(codec metadata.Codec, batches [][]byte, rf int) (*cpuFloor, error) {
	f := &cpuFloor{Codec: codec.String()}
	for _, b := range batches {
		f.SampleBytes += int64(len(b))
	}
	if f.SampleBytes == 0 || rf < 2 {
		return f, nil
	}
	reps := int((floorMinBytes + f.SampleBytes - 1) / f.SampleBytes)
	perGB := func(d time.Duration) float64 {
		return d.Seconds() / (float64(f.SampleBytes) * float64(reps) / 1e9)
	}
	var enc *zstd.Encoder
	var dec *zstd.Decoder
	if codec == metadata.CodecZstd {
		var err error
		// The combiner's: concurrency 1, zstd's default level, no CRC.
		if enc, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false)); err != nil {
			return nil, err
		}
		defer enc.Close()
		if dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1)); err != nil {
			return nil, err
		}
		defer dec.Close()
	}
	var buf []byte
	if codec != metadata.CodecNone {
		var err error
		if f.EncodeSPerGB, f.DecodeSPerGB, buf, err = timeCodec(codec, enc, dec, batches, reps, perGB); err != nil {
			return nil, err
		}
	}
	d := timeCPU(func() {
		for range reps {
			for _, b := range batches {
				buf = append(buf[:0], b...)
			}
		}
	})
	f.CopySPerGB = perGB(d)
	d = timeCPU(func() {
		for range reps {
			for _, b := range batches {
				xxhash.Sum64(b)
			}
		}
	})
	f.HashSPerGB = perGB(d)
	followers := float64(rf - 1)
	f.SPerReplicatedGB = (f.EncodeSPerGB + followers*f.DecodeSPerGB + float64(rf)*(f.CopySPerGB+f.HashSPerGB)) / followers
	return f, nil
}

// timeCodec times encoding batches reps times, then decoding them, with
// codec (zstd or s2), in CPU seconds per GB; buf is scratch, returned for
// reuse.
func timeCodec(codec metadata.Codec, enc *zstd.Encoder, dec *zstd.Decoder, batches [][]byte, reps int,
	perGB func(time.Duration) float64) (encS, decS float64, buf []byte, err error) {
	packed := make([][]byte, len(batches))
	d := timeCPU(func() {
		for r := range reps {
			for i, b := range batches {
				switch codec {
				case metadata.CodecZstd:
					buf = enc.EncodeAll(b, buf[:0])
				case metadata.CodecS2:
					buf = s2.Encode(buf[:cap(buf)], b)
				}
				if r == 0 {
					packed[i] = bytes.Clone(buf)
				}
			}
		}
	})
	encS = perGB(d)
	var decodeErr error
	d = timeCPU(func() {
		for range reps {
			for i, b := range batches {
				var err error
				switch codec {
				case metadata.CodecZstd:
					buf, err = dec.DecodeAll(packed[i], buf[:0])
				case metadata.CodecS2:
					buf, err = s2.Decode(buf[:cap(buf)], packed[i])
				}
				if err == nil && len(buf) != len(b) {
					err = fmt.Errorf("batch %d decodes to %d bytes, not %d", i, len(buf), len(b))
				}
				decodeErr = errors.Join(decodeErr, err)
			}
		}
	})
	if decodeErr != nil {
		return 0, 0, nil, fmt.Errorf("timing the floor's decode: %w", decodeErr)
	}
	return encS, perGB(d), buf, nil
}

// timeCPU is the process's CPU time fn takes, or where that cannot be
// read its wall time. After a run nothing else of the demo's is running.
func timeCPU(fn func()) time.Duration {
	c0, ok0 := cputime.Process()
	t0 := time.Now()
	fn()
	c1, ok1 := cputime.Process()
	if ok0 && ok1 {
		return c1 - c0
	}
	return time.Since(t0)
}

// cpuLines are the report's lines on the CPU: the split and the floor.
func (r *demoReport) cpuLines() []reportFact {
	var out []reportFact
	if s := r.CPUSplit; s != nil {
		out = append(out, reportFact{"cpu", fmt.Sprintf("%.2f s from the start of producing to the end of the checks, %.2f s of it profiled and split",
			r.CPUSeconds, s.ProfiledS)})
		out = append(out, reportFact{"cpu split", fmt.Sprintf(
			"engines %.2f s (leaders %.2f, followers %.2f, readers %.2f, other goroutines %.2f), codec %.2f s (%.2f of it replication's), "+
				"object store %.2f s, local logs %.2f s, metadata log %.2f s, demo %.2f s, runtime %.2f s",
			s.EnginesS(), s.LeaderS, s.FollowerS, s.ReaderS, s.EngineUnlabelledS, s.CodecS, s.CodecReplicationS,
			s.ObjectStoreS, s.LocalLogS, s.MetadataLogS, s.DemoS, s.RuntimeS)})
	} else {
		out = append(out, reportFact{"cpu", fmt.Sprintf("%.2f s from the start of producing to the end of the checks; split %s", r.CPUSeconds, r.CPUSplitNote)})
	}
	if f := r.CPUFloor; f != nil && f.SampleBytes > 0 {
		v := fmt.Sprintf("%.2f s per replicated GB: %s encode %.2f, decode %.2f, copy %.3f, xxhash %.3f s/GB, timed on the first %s of the batches",
			f.SPerReplicatedGB, f.Codec, f.EncodeSPerGB, f.DecodeSPerGB, f.CopySPerGB, f.HashSPerGB, humanBytes(float64(f.SampleBytes)))
		if f.EnginesSPerReplicatedGB > 0 {
			v += fmt.Sprintf("; the engines (leaders and followers, codec included) %.2f s per replicated GB, %.1f× the floor", f.EnginesSPerReplicatedGB, f.Ratio)
		}
		out = append(out, reportFact{"cpu floor", v})
	}
	return out
}
