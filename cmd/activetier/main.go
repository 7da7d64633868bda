package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"
)

// Exit codes. A shell distinguishes "you asked for something impossible"
// (fix the command line) from "it went wrong while running" (look at the
// message), and both from an interrupt.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130 // 128 + SIGINT, as shells report it
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// env is what a subcommand may touch of the process: its streams, and
// whether stdout and stderr are terminals (live progress redraws one line
// there).
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	terminal       bool
	stderrTerminal bool
}

// subcommand is one verb of the command line.
type subcommand struct {
	name    string
	summary string
	// run executes the verb; flags parses and validates its arguments first.
	run func(ctx context.Context, e env, args []string) error
}

func subcommands() []subcommand {
	return []subcommand{
		{"demo", "simulate a multi-AZ cluster replicating through object storage", runDemo},
		{"inspect", "list and verify the sections of a combined object", runInspect},
		{"cost", "price a workload: activetier next to broker-to-broker replication", runCost},
		{"bench", "run the demo over a grid of partitions and rates and tabulate throughput, lag, CPU, memory", runBench},
		{"help", "show usage, or a subcommand's flags", runHelp},
	}
}

// run is the whole command, with the process's streams and arguments passed
// in so that tests drive it directly. It returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := env{stdin: stdin, stdout: stdout, stderr: stderr, terminal: isTerminal(stdout), stderrTerminal: isTerminal(stderr)}
	if len(args) == 0 {
		writeUsage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		name = "help"
	}
	for _, sc := range subcommands() {
		if sc.name == name {
			return exitCode(stderr, "activetier "+name, sc.run(ctx, e, args[1:]))
		}
	}
	return exitCode(stderr, "activetier", usagef("unknown subcommand %q (want demo, inspect, cost, bench or help)", name))
}

// exitCode prints err, if any, as one line prefixed with the command's name
// and maps it to the exit code.
func exitCode(stderr io.Writer, prefix string, err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return exitUsage
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "%s: interrupted\n", prefix)
		return exitInterrupted
	default:
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return exitFailure
	}
}

func runHelp(_ context.Context, e env, args []string) error {
	if len(args) == 0 {
		writeUsage(e.stdout)
		return nil
	}
	if len(args) > 1 {
		return usagef("help takes at most one subcommand, got %d arguments", len(args))
	}
	switch args[0] {
	case "demo":
		_, fs := demoFlags()
		writeFlags(e.stdout, "demo [flags]", fs)
	case "inspect":
		_, fs := inspectFlags()
		writeFlags(e.stdout, inspectSynopsis, fs)
	case "cost":
		_, fs := costFlags()
		writeFlags(e.stdout, "cost [flags]", fs)
	case "bench":
		_, fs := benchFlags()
		writeFlags(e.stdout, "bench [flags]", fs)
	case "help":
		writeUsage(e.stdout)
	default:
		return usagef("unknown subcommand %q (want demo, inspect, cost, bench or help)", args[0])
	}
	return nil
}

func writeUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: activetier <subcommand> [flags]")
	fmt.Fprintln(w)
	for _, sc := range subcommands() {
		fmt.Fprintf(w, "  %-8s %s\n", sc.name, sc.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'activetier help <subcommand>' for its flags.")
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
