package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// profileOptions are the --cpuprofile and --memprofile flags of the
// commands that run the engines.
type profileOptions struct {
	cpu, mem string
}

func (p *profileOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&p.cpu, "cpuprofile", "", "write a CPU profile of the run to `FILE` (read it with go tool pprof)")
	fs.StringVar(&p.mem, "memprofile", "", "write a heap profile, taken once the followers caught up (the cluster still running), to `FILE`")
}

// start begins CPU profiling if asked and returns the function that ends
// it. The heap profile is the run's to take (writeHeapProfile), while the
// cluster is still up: at the end nothing of it is left in the heap.
func (p *profileOptions) start() (stop func() error, err error) {
	var cpu *os.File
	if p.cpu != "" {
		if cpu, err = os.Create(p.cpu); err != nil {
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			return nil, errors.Join(fmt.Errorf("--cpuprofile: %w", err), cpu.Close())
		}
	}
	return func() error {
		if cpu == nil {
			return nil
		}
		pprof.StopCPUProfile()
		if err := cpu.Close(); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		return nil
	}, nil
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
