package fencing

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/internal/harness/scripttest"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// TestScripts plays every script in testdata: decisions on lineages, and
// the failure scenarios played on a follower. Run with -rewrite to write
// the output the package gives now below each command.
func TestScripts(t *testing.T) {
	scripttest.Run(t, func() func(*testing.T, *datadriven.TestData) string {
		return (&scriptEnv{entries: map[string]metadata.Entry{}}).handle
	})
}

// scriptEnv is what a script acts on: the entries it named, and a
// follower.
type scriptEnv struct {
	entries map[string]metadata.Entry
	f       *follower
}

// handle runs one command and returns its output. Lineages are E@S
// lists: local=(5@100, 6@151) is a local lineage, and each input line of
// decide and divergence one publication of the leader's, its markers
// separated by spaces. An entry is R/P:F-L (record epoch R, publisher
// epoch P, offsets F to L) or a name entry gave one.
//
//	decide leo= [local=(...)] entry=      Decide on those lineages
//	divergence leo= [local=(...)]         Divergence on those lineages
//	entry name= e=R/P:F-L                 names an entry
//	follower start=                       a follower with an empty log
//	merge                                 the follower learns a publication
//	                                      (its input line) and truncates
//	                                      if its log now diverges
//	merge-only                            it learns it, and does nothing
//	offer entry=                          it decides, and carries it out
//	peek entry=                           it decides, and does nothing
//	diverges                              Divergence on its lineages
//	state                                 its log, lineages and end
func (e *scriptEnv) handle(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "decide":
		var leo int64
		d.ScanArgs(t, "leo", &leo)
		return describeDecision(Decide(leo, e.local(t, d), e.leader(t, d), e.entry(t, d)))
	case "divergence":
		var leo int64
		d.ScanArgs(t, "leo", &leo)
		to, ok := Divergence(leo, e.local(t, d), e.leader(t, d))
		return fmt.Sprintf("to %d diverged=%v\n", to, ok)
	case "entry":
		var name, spec string
		d.ScanArgs(t, "name", &name)
		d.ScanArgs(t, "e", &spec)
		e.entries[name] = parseEntry(t, d, spec)
		return ""
	case "follower":
		var start int64
		d.ScanArgs(t, "start", &start)
		e.f = newFollower(t, start)
		return ""
	}
	require.NotNil(t, e.f, "%s: no follower: begin with follower", d.Pos)
	f := e.f
	f.t = t
	switch d.Cmd {
	case "merge", "merge-only":
		pubs := publications(t, d)
		require.Len(t, pubs, 1, "%s: merge one publication", d.Pos)
		if d.Cmd == "merge" {
			f.merge(pubs[0]...)
		} else {
			require.NoError(t, f.leader.Merge(pubs[0]...))
		}
		return ""
	case "offer":
		return describeDecision(f.offer(e.entry(t, d)))
	case "peek":
		return describeDecision(Decide(f.leo(), &f.local, &f.leader, e.entry(t, d)))
	case "diverges":
		to, ok := Divergence(f.leo(), &f.local, &f.leader)
		return fmt.Sprintf("to %d diverged=%v\n", to, ok)
	case "state":
		return fmt.Sprintf("log %s\nend %d\nlocal %s\nleader %s\n", runs(f.start, f.log), f.leo(), entries(f.local.Entries()), f.leader.String())
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// describeDecision is d's String, and the fields String leaves out if
// any is set: a decision is compared whole.
func describeDecision(d Decision) string {
	s := d.String()
	rest := d
	rest.Action, rest.Reason = 0, ""
	switch d.Action {
	case Apply:
		rest.From, rest.Limit = 0, 0
	case Truncate:
		rest.TruncateTo = 0
	}
	if rest != (Decision{}) {
		s += fmt.Sprintf(" (%+v)", d)
	}
	return s + "\n"
}

func (e *scriptEnv) local(t *testing.T, d *datadriven.TestData) *Lineage {
	var es []storage.EpochEntry
	if arg, ok := d.Arg("local"); ok {
		for _, v := range arg.Vals {
			es = append(es, parseEpoch(t, d, v))
		}
	}
	return mustLineage(t, es...)
}

func (e *scriptEnv) leader(t *testing.T, d *datadriven.TestData) *LeaderLineage {
	return mustLeader(t, publications(t, d)...)
}

// publications are the input lines of d, one publication each.
func publications(t *testing.T, d *datadriven.TestData) [][]metadata.EpochStart {
	var pubs [][]metadata.EpochStart
	for _, line := range strings.Split(d.Input, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		var p []metadata.EpochStart
		for _, f := range fields {
			ee := parseEpoch(t, d, f)
			p = append(p, mk(ee.Epoch, ee.StartOffset))
		}
		pubs = append(pubs, p)
	}
	return pubs
}

func parseEpoch(t *testing.T, d *datadriven.TestData, s string) storage.EpochEntry {
	var ee storage.EpochEntry
	_, err := fmt.Sscanf(s, "%d@%d", &ee.Epoch, &ee.StartOffset)
	require.NoError(t, err, "%s: epoch %q is not E@S", d.Pos, s)
	return ee
}

func (e *scriptEnv) entry(t *testing.T, d *datadriven.TestData) metadata.Entry {
	var s string
	d.ScanArgs(t, "entry", &s)
	if en, ok := e.entries[s]; ok {
		return en
	}
	return parseEntry(t, d, s)
}

func parseEntry(t *testing.T, d *datadriven.TestData, s string) metadata.Entry {
	var r, p int32
	var first, last int64
	_, err := fmt.Sscanf(s, "%d/%d:%d-%d", &r, &p, &first, &last)
	require.NoError(t, err, "%s: entry %q is neither R/P:F-L nor a name", d.Pos, s)
	return entry(r, p, first, last)
}

// runs renders a log of epochs from start as runs: 5x51 6x30 from 100.
func runs(start int64, log []int32) string {
	if len(log) == 0 {
		return fmt.Sprintf("empty from %d", start)
	}
	var parts []string
	for i := 0; i < len(log); {
		j := i
		for j < len(log) && log[j] == log[i] {
			j++
		}
		parts = append(parts, strconv.Itoa(int(log[i]))+"x"+strconv.Itoa(j-i))
		i = j
	}
	return fmt.Sprintf("%s from %d", strings.Join(parts, " "), start)
}

func entries(es []storage.EpochEntry) string {
	var parts []string
	for _, e := range es {
		parts = append(parts, fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
