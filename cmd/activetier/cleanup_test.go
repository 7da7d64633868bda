package main

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/activetier/activetier/memstore"
	"github.com/activetier/activetier/metadata"
	"github.com/activetier/activetier/storage"
)

// lateStore makes a PUT the run gave up on land on the server after the
// cleanup listed: each of its first late Deletes puts one more object.
type lateStore struct {
	storage.ObjectStore
	late int
	put  int
}

func (s *lateStore) Delete(ctx context.Context, refs []metadata.ObjectRef) error {
	err := s.ObjectStore.Delete(ctx, refs)
	if s.put < s.late {
		s.put++
		if _, perr := s.ObjectStore.Put(ctx, fmt.Sprintf("run/late-%d", s.put), []byte("late")); perr != nil {
			return perr
		}
	}
	return err
}

// removeLeft deletes what a late PUT adds after the listing, counts it,
// and fails rather than loop when objects never stop appearing.
func TestRemoveLeftCatchesLatePuts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		late      int
		keep      bool
		wantLeft  int
		wantErr   string
		wantAfter int
	}{
		{name: "none late", late: 0, wantLeft: 2},
		{name: "one late", late: 1, wantLeft: 3},
		{name: "late each round but the last", late: leftRounds - 1, wantLeft: 2 + leftRounds - 1},
		{name: "never stops", late: 100, wantLeft: 2 + leftRounds, wantErr: "1 objects still appeared under run/ after 4 rounds", wantAfter: 1},
		{name: "kept", late: 1, keep: true, wantLeft: 2, wantAfter: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				cl, err := memstore.NewCluster(memstore.ClusterConfig{Buckets: map[string]string{"az1": "b1", "az2": "b2"}})
				require.NoError(t, err)
				s1, err := cl.Store("az1")
				require.NoError(t, err)
				s2, err := cl.Store("az2")
				require.NoError(t, err)
				for _, s := range []storage.ObjectStore{s1, s2} {
					_, err := s.Put(ctx, "run/last", []byte("object"))
					require.NoError(t, err)
				}
				admin := &lateStore{ObjectStore: s1, late: tc.late}
				azs, buckets := []string{"az1", "az2"}, map[string]string{"az1": "b1", "az2": "b2"}

				left, err := removeLeft(ctx, admin, azs, buckets, "run/", tc.keep)
				if tc.wantErr != "" {
					require.ErrorContains(t, err, tc.wantErr)
				} else {
					require.NoError(t, err)
				}
				assert.Equal(t, tc.wantLeft, left)
				after, err := objectsLeft(ctx, s1, azs, buckets)
				require.NoError(t, err)
				assert.Len(t, after, tc.wantAfter)
			})
		})
	}
}
