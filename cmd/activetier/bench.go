package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/pprof/profile"
)

// benchOptions are the flags of `activetier bench`.
type benchOptions struct {
	partitions   string
	rates        string
	duration     time.Duration
	drainTimeout time.Duration
	seed         uint64
	json         bool
	prof         profileOptions
}

func benchFlags() (*benchOptions, *flag.FlagSet) {
	o := &benchOptions{}
	fs := newFlagSet("bench")
	fs.StringVar(&o.partitions, "partitions", "1000,10000,100000", "comma-separated partition `counts` of the grid")
	fs.StringVar(&o.rates, "rates", "10,100", "comma-separated produce `rates` of the grid, in MB/s")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long each run produces")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 30*time.Second, "how long each run waits, after producing, for followers to catch up")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of every run")
	fs.BoolVar(&o.json, "json", false, "print the table as one JSON object")
	o.prof.register(fs)
	fs.Lookup("memprofile").Usage = "write a heap profile of the grid's last run, taken once its followers caught up, to `FILE`"
	return o, fs
}

// benchRow is one run of the grid.
type benchRow struct {
	Partitions         int     `json:"partitions"`
	RateMBPerSec       float64 `json:"rate_mb_per_sec"`
	ProducedMBPerSec   float64 `json:"produced_mb_per_sec"`
	ReplicatedMBPerSec float64 `json:"replicated_mb_per_sec"`
	LagP50MS           float64 `json:"lag_p50_ms"`
	LagP99MS           float64 `json:"lag_p99_ms"`
	// CPUSecondsPerGB is the process's CPU time while producing and
	// draining, harness included, per GB (10^9 bytes) the followers
	// applied.
	CPUSecondsPerGB float64 `json:"cpu_s_per_replicated_gb"`
	// The run's CPU split (the demo's cpu_split) as fractions of its
	// profiled CPU: the engines' own code, the codec, the object store,
	// the local logs and the demo's own code (the metadata log and the
	// runtime are the rest); all 0 without a profile.
	EnginesShare     float64 `json:"engines_cpu_share"`
	CodecShare       float64 `json:"codec_cpu_share"`
	ObjectStoreShare float64 `json:"object_store_cpu_share"`
	LocalLogShare    float64 `json:"local_log_cpu_share"`
	DemoShare        float64 `json:"demo_cpu_share"`
	// EnginesSPerGB is the leaders' and followers' CPU, codec included,
	// per replicated GB, FloorSPerGB the floor's, FloorRatio the one over
	// the other (the demo's cpu_floor).
	EnginesSPerGB float64 `json:"engines_s_per_replicated_gb"`
	FloorSPerGB   float64 `json:"floor_s_per_replicated_gb"`
	FloorRatio    float64 `json:"engines_floor_ratio"`
	PeakRSSBytes  int64   `json:"peak_rss_bytes"`
	// MetadataPerProduced is metadata bytes published per byte produced.
	MetadataPerProduced float64 `json:"metadata_per_produced_byte"`
	DrainMS             float64 `json:"drain_ms"`
	Consistent          bool    `json:"followers_consistent"`
}

// benchMachine is what the table was measured on.
type benchMachine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
}

type benchResult struct {
	Machine     benchMachine `json:"machine"`
	DurationS   float64      `json:"duration_s"`
	PeakRSSNote string       `json:"peak_rss_note"`
	Rows        []benchRow   `json:"rows"`
}

func runBench(ctx context.Context, e env, args []string) error {
	o, fs := benchFlags()
	if help, err := parseFlags(e, fs, "bench [flags]", args); help || err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	parts, err := parseList(fs, "partitions", o.partitions, strconv.Atoi)
	if err != nil {
		return err
	}
	rates, err := parseList(fs, "rates", o.rates, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) })
	if err != nil {
		return err
	}
	// Each run is the demo's, with its flags, validated as the demo
	// validates them.
	type cell struct {
		o   *demoOptions
		cfg simConfig
	}
	var cells []cell
	for _, p := range parts {
		for _, r := range rates {
			do, dfs := demoFlags()
			dargs := []string{"--partitions", strconv.Itoa(p), "--rate", strconv.FormatFloat(r, 'g', -1, 64),
				"--duration", o.duration.String(), "--drain-timeout", o.drainTimeout.String(), "--seed", strconv.FormatUint(o.seed, 10)}
			if err := dfs.Parse(dargs); err != nil {
				return usagef("%v", err)
			}
			cfg, err := do.validate(dfs)
			if err != nil {
				return fmt.Errorf("the run of %d partitions at %g MB/s: %w", p, r, err)
			}
			cells = append(cells, cell{do, cfg})
		}
	}

	// The heap profile is the last run's, the largest in the default grid.
	cells[len(cells)-1].o.prof.mem = o.prof.mem
	cpuOut, err := o.prof.openCPU()
	if err != nil {
		return err
	}
	// --cpuprofile is the runs' profiles merged.
	var profiles []*profile.Profile
	res := benchResult{Machine: thisMachine(), DurationS: o.duration.Seconds()}
	res.PeakRSSNote = "peak RSS of the process during the run"
	var inconsistent int
	for _, c := range cells {
		// Start each run from a clean heap, and its peak RSS from what is
		// resident now, so that runs measure themselves, not the last.
		runtime.GC()
		debug.FreeOSMemory()
		if !resetPeakRSS() {
			res.PeakRSSNote = "peak RSS of the process so far (this system cannot reset it between runs)"
		}
		if !o.json {
			fmt.Fprintf(e.stderr, "bench: %d partitions at %g MB/s for %v\n", c.cfg.partitions, c.o.rate, o.duration)
		}
		rep, err := runSimulation(ctx, c.o, c.cfg, newProgress(io.Discard, false), nil)
		if err != nil {
			return errors.Join(fmt.Errorf("the run of %d partitions at %g MB/s: %w", c.cfg.partitions, c.o.rate, err), closeCPU(cpuOut))
		}
		if rep.cpuProfile != nil {
			profiles = append(profiles, rep.cpuProfile)
		}
		res.Rows = append(res.Rows, benchRowOf(rep))
		if !rep.FollowersConsistent {
			inconsistent++
		}
	}
	if err := writeBenchProfile(cpuOut, profiles, len(cells)); err != nil {
		return err
	}
	if o.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(res)
	} else {
		err = res.writeText(e.stdout)
	}
	if err == nil && inconsistent > 0 {
		err = fmt.Errorf("%d of %d runs ended with follower logs that differ from their leader's (see followers_consistent)", inconsistent, len(res.Rows))
	}
	return err
}

func benchRowOf(rep *demoReport) benchRow {
	row := benchRow{
		Partitions: rep.Partitions, RateMBPerSec: rep.RateMBPerSec, ProducedMBPerSec: rep.ProducedMBPerSec,
		LagP50MS: rep.LagP50MS, LagP99MS: rep.LagP99MS, PeakRSSBytes: rep.PeakRSSBytes,
		DrainMS: rep.DrainMS, Consistent: rep.FollowersConsistent,
	}
	// Replication ends when the drain does.
	if s := rep.DurationS + rep.DrainMS/1e3; s > 0 {
		row.ReplicatedMBPerSec = float64(rep.BytesReplicated) / 1e6 / s
	}
	if rep.BytesReplicated > 0 {
		row.CPUSecondsPerGB = rep.CPUSeconds / (float64(rep.BytesReplicated) / 1e9)
	}
	if s := rep.CPUSplit; s != nil && s.ProfiledS > 0 {
		row.EnginesShare, row.CodecShare = s.EnginesS()/s.ProfiledS, s.CodecS/s.ProfiledS
		row.ObjectStoreShare, row.LocalLogShare, row.DemoShare = s.ObjectStoreS/s.ProfiledS, s.LocalLogS/s.ProfiledS, s.DemoS/s.ProfiledS
	}
	if f := rep.CPUFloor; f != nil {
		row.EnginesSPerGB, row.FloorSPerGB, row.FloorRatio = f.EnginesSPerReplicatedGB, f.SPerReplicatedGB, f.Ratio
	}
	if rep.BytesProduced > 0 {
		row.MetadataPerProduced = float64(rep.MetadataBytes) / float64(rep.BytesProduced)
	}
	return row
}

func (r *benchResult) writeText(w io.Writer) error {
	m := r.Machine
	fmt.Fprintf(w, "%d CPUs (%s), %s, %s/%s; %v runs; lag from produce to follower append\n\n",
		m.CPUs, cmp.Or(m.CPUModel, "model unknown"), m.GoVersion, m.OS, m.Arch, time.Duration(r.DurationS*float64(time.Second)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "partitions\trate MB/s\tproduced MB/s\treplicated MB/s\tlag p50 ms\tlag p99 ms\tCPU s/GB\t"+
		"engines %\tcodec %\tstore %\tlocal logs %\tdemo %\tengines s/GB\tfloor s/GB\t× floor\tpeak RSS MiB\tmetadata %\tconsistent\t")
	for _, row := range r.Rows {
		consistent := "yes"
		if !row.Consistent {
			consistent = "NO"
		}
		fmt.Fprintf(tw, "%d\t%g\t%.1f\t%.1f\t%.0f\t%.0f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t%.1f\t%.0f\t%.3f\t%s\t\n",
			row.Partitions, row.RateMBPerSec, row.ProducedMBPerSec, row.ReplicatedMBPerSec, row.LagP50MS, row.LagP99MS,
			row.CPUSecondsPerGB, 100*row.EnginesShare, 100*row.CodecShare, 100*row.ObjectStoreShare, 100*row.LocalLogShare, 100*row.DemoShare,
			row.EnginesSPerGB, row.FloorSPerGB, row.FloorRatio,
			float64(row.PeakRSSBytes)/(1<<20), 100*row.MetadataPerProduced, consistent)
	}
	return tw.Flush()
}

// writeBenchProfile merges the runs' CPU profiles into --cpuprofile, if
// asked, and closes it; every one of the runs must have one.
func writeBenchProfile(f *os.File, profiles []*profile.Profile, runs int) error {
	if f == nil {
		return nil
	}
	var merged *profile.Profile
	var err error
	if len(profiles) == runs {
		if merged, err = profile.Merge(profiles); err != nil {
			err = fmt.Errorf("--cpuprofile: merging the runs' profiles: %w", err)
		}
	}
	if err == nil {
		err = writeCPUProfile(f, merged)
	}
	return errors.Join(err, closeCPU(f))
}

// parseList parses flag name's comma-separated positive values.
func parseList[T int | float64](fs *flag.FlagSet, name, list string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for s := range strings.SplitSeq(list, ",") {
		v, err := parse(strings.TrimSpace(s))
		if err != nil || v <= 0 {
			return nil, flagError(fs, name, fmt.Sprintf("%q is not a positive number", strings.TrimSpace(s)))
		}
		out = append(out, v)
	}
	return out, nil
}

// thisMachine describes the machine: CPUs, their model (Linux), Go.
func thisMachine() benchMachine {
	m := benchMachine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}
