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
	fs.StringVar(&p.mem, "memprofile", "", "write a heap profile, taken at the end of the run, to `FILE`")
}

// start begins CPU profiling if asked and returns the function that ends
// it and writes the heap profile; its error is the first that happened.
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
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				errs = append(errs, fmt.Errorf("--cpuprofile: %w", err))
			}
		}
		if p.mem != "" {
			errs = append(errs, writeHeapProfile(p.mem))
		}
		return errors.Join(errs...)
	}, nil
}

func writeHeapProfile(path string) error {
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
