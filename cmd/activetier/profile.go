package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/google/pprof/profile"
)

// profileOptions are the --cpuprofile and --memprofile flags of the
// commands that run the engines.
type profileOptions struct {
	cpu, mem string
}

func (p *profileOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&p.cpu, "cpuprofile", "", "write a CPU profile of the run, from the start of producing to the end of the checks, to `FILE` (read it with go tool pprof)")
	fs.StringVar(&p.mem, "memprofile", "", "write a heap profile, taken once the followers caught up (the cluster still running), to `FILE`")
}

// openCPU creates the --cpuprofile file, if asked, before anything runs,
// so that a path that cannot be written fails at once; nil if not asked.
// The profile is the one every run takes for its CPU split
// (cpusplit.go), from the start of producing to the end of the checks.
func (p *profileOptions) openCPU() (*os.File, error) {
	if p.cpu == "" {
		return nil, nil
	}
	f, err := os.Create(p.cpu)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return f, nil
}

// writeCPUProfile writes prof to f, if f is open.
func writeCPUProfile(f *os.File, prof *profile.Profile) error {
	if f == nil {
		return nil
	}
	if prof == nil {
		return errors.New("--cpuprofile: no CPU profile was taken (the process's CPU profiler was in use)")
	}
	if err := prof.Write(f); err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	return nil
}

// closeCPU closes f, if open.
func closeCPU(f *os.File) error {
	if f == nil {
		return nil
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	return nil
}

// writeHeapProfile writes the heap profile to path, if one is asked for.
func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	runtime.GC() // the profile shows the live heap as of the last GC
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		return errors.Join(fmt.Errorf("--memprofile: %w", err), f.Close())
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	return nil
}
