package fsstore_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/fsstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// The environment of a writer process: the deployment's root directory
// (its presence makes TestMain run childMain), the writer's number, and
// when to start, in Unix nanoseconds, so that all writers start together.
const (
	childEnv      = "FSSTORE_TEST_CHILD_DIR"
	childIDEnv    = "FSSTORE_TEST_CHILD_ID"
	childStartEnv = "FSSTORE_TEST_CHILD_START"
)

// What each writer process does: Put raceKeys keys that every writer
// puts, and ownKeys keys of its own, all in one directory.
const (
	writers  = 4
	raceKeys = 100
	ownKeys  = 25
)

func raceKey(k int) string   { return fmt.Sprintf("race/key-%03d", k) }
func ownKey(c, k int) string { return fmt.Sprintf("race/own-%d-%03d", c, k) }
func childOpts(root string) fsstore.Options {
	return fsstore.Options{
		Buckets: map[string]fsstore.Bucket{
			"az1": {Dir: filepath.Join(root, "az1")},
			"az2": {Dir: filepath.Join(root, "az2")},
		},
		LocalAZ: "az1",
	}
}

// raceBody is writer c's body for key number k: a header naming both and
// the length, then bytes derived from them. Writers' bodies for one key
// differ in length and content, so a mix of two, or a prefix of one, is
// told apart from any whole body by checkBody. Every sixteenth body is
// 256 KiB, so that writes overlap.
func raceBody(c, k int) []byte {
	n := 64 + (c*131+k*17)%4096
	if k%16 == 0 {
		n = 256<<10 + c
	}
	b := make([]byte, n)
	binary.BigEndian.PutUint32(b[0:], uint32(c))
	binary.BigEndian.PutUint32(b[4:], uint32(k))
	binary.BigEndian.PutUint32(b[8:], uint32(n))
	r := rand.New(rand.NewPCG(uint64(c), uint64(k)))
	for i := 12; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// checkBody returns the writer of a whole body of key number k, or an
// error saying how data is not one.
func checkBody(data []byte, k int) (int, error) {
	if len(data) < 12 {
		return 0, fmt.Errorf("%d bytes: shorter than a header", len(data))
	}
	c, gotK := int(binary.BigEndian.Uint32(data)), int(binary.BigEndian.Uint32(data[4:]))
	if gotK != k || c >= writers {
		return 0, fmt.Errorf("header names writer %d, key %d", c, gotK)
	}
	if !bytes.Equal(data, raceBody(c, k)) {
		return 0, fmt.Errorf("%d bytes, not writer %d's body of %d bytes", len(data), c, len(raceBody(c, k)))
	}
	return c, nil
}

// childMain is one writer process. It prints "won KEY" for each key its
// Put created, and fails (exit 1, the reason on stderr) on any outcome the
// contract does not allow: an error other than ErrAlreadyExists, or a
// read of anything but a whole body.
func childMain(root string) int {
	c, err := strconv.Atoi(os.Getenv(childIDEnv))
	start, err2 := strconv.ParseInt(os.Getenv(childStartEnv), 10, 64)
	if err != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "bad environment:", err, err2)
		return 2
	}
	s, err := fsstore.New(childOpts(root))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	time.Sleep(time.Until(time.Unix(0, start)))

	var mu sync.Mutex
	var problems []string
	problem := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	// A reader lists the directory and reads every object it lists while
	// the writers write: each must be whole.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		// Objects never change once whole, so each is read once: the
		// first read after it is listed is the one that could see part.
		seen := map[string]bool{}
		for {
			select {
			case <-stop:
				return
			default:
			}
			infos, err := s.List(ctx, s.Local().Bucket, "race/")
			if err != nil {
				problem("List: %v", err)
				return
			}
			for _, info := range infos {
				if seen[info.Ref.Key] || strings.Contains(info.Ref.Key, "/own-") {
					continue
				}
				seen[info.Ref.Key] = true
				k, _ := strconv.Atoi(strings.TrimPrefix(info.Ref.Key, "race/key-"))
				data, err := s.GetRange(ctx, info.Ref, 0, info.Size)
				if err != nil {
					problem("GetRange of listed %s (%d bytes): %v", info.Ref.Key, info.Size, err)
					continue
				}
				if _, err := checkBody(data, k); err != nil {
					problem("reader: %s: %v", info.Ref.Key, err)
				}
			}
		}
	})

	out := bufio.NewWriter(os.Stdout)
	for k := range raceKeys {
		key := raceKey(k)
		_, err := s.Put(ctx, key, raceBody(c, k))
		switch {
		case err == nil:
			fmt.Fprintf(out, "won %s\n", key)
		case !errors.Is(err, storage.ErrAlreadyExists):
			problem("Put %s: %v", key, err)
		}
		// Whoever won, the key now reads as one whole body.
		infos, err := s.List(ctx, s.Local().Bucket, key)
		if err != nil || len(infos) != 1 {
			problem("List %s after Put: %v, %d objects", key, err, len(infos))
			continue
		}
		data, err := s.GetRange(ctx, infos[0].Ref, 0, infos[0].Size)
		if err != nil {
			problem("GetRange %s after Put: %v", key, err)
		} else if _, err := checkBody(data, k); err != nil {
			problem("%s after Put: %v", key, err)
		}
		if k < ownKeys {
			if _, err := s.Put(ctx, ownKey(c, k), raceBody(c, k)); err != nil {
				problem("Put %s: %v", ownKey(c, k), err)
			}
		}
	}
	close(stop)
	wg.Wait()
	if err := out.Flush(); err != nil {
		problem("writing to stdout: %v", err)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		return 1
	}
	return 0
}

// Writers in separate processes race to create the same keys, and keys of
// their own, in one directory, while reading back everything they list:
// each key has exactly one creator, whose whole body it holds; no reader
// ever sees part of an object; and no temporary file is left.
func TestPutRaceAcrossProcesses(t *testing.T) {
	root := t.TempDir()
	opts := childOpts(root)
	for _, b := range opts.Buckets {
		mkdir(t, b.Dir)
	}
	start := strconv.FormatInt(time.Now().Add(time.Second).UnixNano(), 10)
	type child struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
	}
	children := make([]*child, writers)
	for c := range children {
		ch := &child{cmd: exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")}
		ch.cmd.Env = append(os.Environ(), childEnv+"="+root, childIDEnv+"="+strconv.Itoa(c), childStartEnv+"="+start)
		ch.cmd.Stdout, ch.cmd.Stderr = &ch.stdout, &ch.stderr
		require.NoError(t, ch.cmd.Start())
		children[c] = ch
	}
	winners := map[string][]int{}
	for c, ch := range children {
		err := ch.cmd.Wait()
		require.NoError(t, err, "writer %d failed:\n%s", c, ch.stderr.String())
		for line := range strings.Lines(ch.stdout.String()) {
			key, ok := strings.CutPrefix(strings.TrimSpace(line), "won ")
			require.True(t, ok, "writer %d printed %q", c, line)
			winners[key] = append(winners[key], c)
		}
	}

	s := newStore(t, opts)
	ctx := t.Context()
	for k := range raceKeys {
		key := raceKey(k)
		require.Len(t, winners[key], 1, "%s: writers %v all created it", key, winners[key])
		want := raceBody(winners[key][0], k)
		got, err := s.GetRange(ctx, localRef(s, key), 0, int64(len(want)))
		require.NoError(t, err, key)
		require.True(t, bytes.Equal(want, got), "%s holds another body than its creator's", key)
	}
	infos, err := s.List(ctx, s.Local().Bucket, "race/")
	require.NoError(t, err)
	assert.Len(t, infos, raceKeys+writers*ownKeys, "every race key and every writer's own keys")
	for c := range writers {
		for k := range ownKeys {
			want := raceBody(c, k)
			got, err := s.GetRange(ctx, localRef(s, ownKey(c, k)), 0, int64(len(want)))
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), ownKey(c, k))
		}
	}
	assert.Empty(t, tempFiles(t, root), "temporary files left behind")
}

// localRef names key in s's local bucket.
func localRef(s *fsstore.Store, key string) metadata.ObjectRef {
	r := s.Local()
	r.Key = key
	return r
}

// tempFiles lists every file under root whose name starts with ".".
func tempFiles(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && path != root {
			found = append(found, path)
		}
		return nil
	}))
	return found
}
