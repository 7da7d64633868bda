package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/examples/kafkabroker/broker"
	"github.com/activetier/activetier/examples/kafkabroker/disklog"
	"github.com/activetier/activetier/internal/harness/testenv"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// The programs the process tests run, built once per test binary.
var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func binaries(t *testing.T) (kafkabroker, kfakecluster string) {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "kafkabroker-bin")
		if buildErr != nil {
			return
		}
		for _, pkg := range []string{".", "./kfakecluster"} {
			out, err := exec.Command("go", "build", "-o", binDir, pkg).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	require.NoError(t, buildErr)
	return filepath.Join(binDir, "kafkabroker"), filepath.Join(binDir, "kfakecluster")
}

// s3Endpoint returns the S3 server scripts/test.sh started.
func s3Endpoint(t *testing.T) string {
	t.Helper()
	return testenv.Server(t, testenv.S3Endpoint, "an S3 server")
}

// proc is a child process. Its standard input is its lifeline: it exits
// when the pipe closes, so it never outlives this test binary, and the
// test stops it (and kills it if it does not stop) in a cleanup, whatever
// happened.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	line  []byte // its first line of stdout
	done  chan struct{}
	log   string // its stderr, a file
}

// procLogsEnv names a directory to keep the processes' logs in, past the
// test (by default they go with its temporary directory).
const procLogsEnv = "ACTIVETIER_PROC_LOGS"

func start(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	if dir := os.Getenv(procLogsEnv); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		logPath = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+name+".log")
	}
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{name: name, cmd: cmd, stdin: stdin, done: make(chan struct{}), log: logPath}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(5 * time.Second)
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("%s's log (last 3000 bytes):\n%s", name, tail(b, 3000))
			}
		}
	})
	lines := make(chan []byte, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- bytes.Clone(sc.Bytes())
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l, ok := <-lines:
		require.True(t, ok, "%s exited before it served", name)
		p.line = l
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start in time", name)
	}
	return p
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// stop asks the process to stop (SIGTERM) and kills it if it has not
// within grace.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.stdin.Close()
}

// kill ends the process at once, as a crash would.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
	p.stdin.Close()
}

// procCluster is a kfake process and three broker processes, in az0, az1
// and az2, each with its own bucket on the S3 server, and their
// controller, in the test's process, which the brokers register with.
type procCluster struct {
	t       *testing.T
	kfake   *proc
	brokers []*proc
	args    [][]string // each broker's command line, for a restart
	runs    []int      // each broker's processes so far
	dirs    []string
	infos   []broker.BrokerInfo // every broker started, by id, as it last started
	ctl     *broker.Controller
	// failedOver gets failover's outcome.
	failedOver chan error
}

// startProcCluster starts the controller and the processes, waits for
// the three brokers to register, and places each topic's partitions as it
// places a created topic's: partition p led by broker p % 3 at epoch 1,
// with all three in sync.
func startProcCluster(t *testing.T, topics map[string]int) *procCluster {
	t.Helper()
	endpoint := s3Endpoint(t)
	kb, kfc := binaries(t)
	c := &procCluster{t: t, failedOver: make(chan error, 1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c.ctl, err = broker.NewController(broker.Cluster{Controller: ln.Addr().String()})
	require.NoError(t, err)
	srv := &http.Server{Handler: c.ctl.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); c.ctl.CloseIdleConnections() })

	c.kfake = start(t, "kfake", kfc, "-partitions", "3")
	var kf struct{ Kafka string }
	require.NoError(t, json.Unmarshal(c.kfake.line, &kf))

	run := rand.Uint32()
	var buckets []string
	for az := range 3 {
		buckets = append(buckets, fmt.Sprintf("az%d=kb%08x-az%d", az, run, az))
	}
	for id := range 3 {
		dir := t.TempDir()
		c.dirs = append(c.dirs, dir)
		c.args = append(c.args, []string{"-id", fmt.Sprint(id), "-az", fmt.Sprintf("az%d", id),
			"-data", dir, "-buckets", strings.Join(buckets, ","), "-s3-endpoint", endpoint, "-create-bucket",
			"-metadata-brokers", kf.Kafka, "-interval", "20ms", "-controller", ln.Addr().String(), "-stdin-lifeline"})
		c.brokers = append(c.brokers, nil)
		c.infos = append(c.infos, broker.BrokerInfo{})
		c.runs = append(c.runs, 0)
		c.startBroker(id, kb)
	}
	require.Eventually(t, func() bool { return len(c.ctl.View().Brokers) == 3 }, 30*time.Second, 10*time.Millisecond,
		"the brokers did not register")
	require.NoError(t, c.ctl.Update(t.Context(), func(v *broker.Cluster) {
		for name, n := range topics {
			v.Topics = append(v.Topics, broker.PlaceTopic(name, int32(n), 3, v.Brokers))
		}
	}))
	return c
}

// startBroker starts broker id's process, on its data directory and, after
// the first run, at the addresses it had.
func (c *procCluster) startBroker(id int, bin string) {
	c.t.Helper()
	args := c.args[id]
	if c.runs[id] > 0 {
		args = append(slices.Clone(args), "-kafka", c.infos[id].Kafka, "-control", c.infos[id].Control)
	}
	c.runs[id]++
	p := start(c.t, fmt.Sprintf("broker%d-run%d", id, c.runs[id]), bin, args...)
	var bi broker.BrokerInfo
	require.NoError(c.t, json.Unmarshal(p.line, &bi))
	c.brokers[id], c.infos[id] = p, bi
}

// restart starts broker id again on its own data, as an operator does
// after a crash; it registers with the controller itself.
func (c *procCluster) restart(id int) {
	c.t.Helper()
	kb, _ := binaries(c.t)
	c.startBroker(id, kb)
}

func (c *procCluster) status(id int) broker.Status {
	c.t.Helper()
	resp, err := http.Get("http://" + c.infos[id].Control + "/v1/status")
	require.NoError(c.t, err)
	defer resp.Body.Close()
	var st broker.Status
	require.NoError(c.t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// seeds returns the Kafka addresses of the brokers in the view.
func (c *procCluster) seeds() []string {
	var s []string
	for _, b := range c.ctl.View().Brokers {
		s = append(s, b.Kafka)
	}
	return s
}

// stopAll stops every broker cleanly, so their logs can be read.
func (c *procCluster) stopAll() {
	for _, p := range c.brokers {
		p.stop(10 * time.Second)
	}
}

// readLog returns every batch of tp in broker id's log directory; the
// broker must be stopped.
func (c *procCluster) readLog(id int, tp metadata.TopicPartition) []storage.Batch {
	c.t.Helper()
	l, err := disklog.Open(c.dirs[id], disklog.Options{})
	require.NoError(c.t, err)
	defer l.Close()
	var all []storage.Batch
	for off := int64(0); ; {
		bs, err := l.Read(context.Background(), tp, off, 4<<20)
		require.NoError(c.t, err)
		if len(bs) == 0 {
			return all
		}
		all = append(all, bs...)
		off = bs[len(bs)-1].LastOffset + 1
	}
}
