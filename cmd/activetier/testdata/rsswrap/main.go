//go:build linux

// Command rsswrap runs a command with its own streams and writes the
// command's peak resident set, in KiB, to the file $RSSWRAP_OUT; it exits
// with the command's exit code. The tests measure the CLI through it
// because Linux starts a child's peak RSS at its parent's when the parent
// execs it from a shared address space, as Go does: measured directly, the
// CLI would report the test process's memory.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

func main() {
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// If the test kills the wrapper (a timeout), the command goes too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		fmt.Fprintln(os.Stderr, "rsswrap:", err)
		os.Exit(125)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if err := os.WriteFile(os.Getenv("RSSWRAP_OUT"), []byte(strconv.FormatInt(ru.Maxrss, 10)), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "rsswrap:", err)
		os.Exit(125)
	}
	os.Exit(cmd.ProcessState.ExitCode())
}
