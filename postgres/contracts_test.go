package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/commitlayer/commitlayer"
	"github.com/stretchr/testify/require"
)

func TestContractVersions(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	v1src := []byte("id: refund\nkind: action\n")
	v2src := []byte(`{"id":"refund","kind":"outcome"}`)

	r1, created, err := testDB.PutContract(ctx, tn.ID, "refund", v1src)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, 1, r1.Version)
	require.Equal(t, v1src, r1.Source)

	// Re-posting the latest source is idempotent.
	again, created, err := testDB.PutContract(ctx, tn.ID, "refund", v1src)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, r1, again)

	r2, created, err := testDB.PutContract(ctx, tn.ID, "refund", v2src)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, 2, r2.Version)

	// Going back to v1's source is a new version (the latest differs).
	r3, created, err := testDB.PutContract(ctx, tn.ID, "refund", v1src)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, 3, r3.Version)

	for v, want := range map[int]commitlayer.ContractRecord{0: r3, 1: r1, 2: r2, 3: r3} {
		got, err := testDB.GetContract(ctx, tn.ID, "refund", v)
		require.NoError(t, err)
		require.Equal(t, want, got, "version %d", v)
	}
	for _, v := range []int{4, -1} {
		_, err := testDB.GetContract(ctx, tn.ID, "refund", v)
		require.ErrorIs(t, err, commitlayer.ErrNotFound)
	}
	_, err = testDB.GetContract(ctx, tn.ID, "payout", 0)
	require.ErrorIs(t, err, commitlayer.ErrNotFound)

	_, _, err = testDB.PutContract(ctx, tn.ID, "payout", []byte("id: payout\n"))
	require.NoError(t, err)
	list, err := testDB.ListContracts(ctx, tn.ID)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "payout", list[0].ID)
	require.Equal(t, r3, list[1])
}

func TestPutContractBadInput(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	cases := []struct {
		name, tenant, id string
		src              []byte
		want             error
	}{
		{"empty id", tn.ID, "", []byte("x"), commitlayer.ErrInvalid},
		{"empty source", tn.ID, "c", nil, commitlayer.ErrInvalid},
		{"NUL in id", tn.ID, "c\x00", []byte("x"), commitlayer.ErrInvalid},
		{"unknown tenant", "t_missing", "c", []byte("x"), commitlayer.ErrNotFound},
	}
	for _, tc := range cases {
		_, created, err := testDB.PutContract(ctx, tc.tenant, tc.id, tc.src)
		require.ErrorIs(t, err, tc.want, tc.name)
		require.False(t, created)
	}
}

// TestPutContractConcurrent posts distinct sources of one contract at once:
// every post gets its own version, 1..n, with no conflict.
func TestPutContractConcurrent(t *testing.T) {
	testDB := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	const n = 6
	versions := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var r commitlayer.ContractRecord
			r, _, errs[i] = testDB.PutContract(ctx, tn.ID, "c", []byte(fmt.Sprintf("v: %d", i)))
			versions[i] = r.Version
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.ElementsMatch(t, []int{1, 2, 3, 4, 5, 6}, versions)
}
