package bench

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

func TestStartRejectsBadRequestsBeforeTouchingAnything(t *testing.T) {
	// No store and no Temporal client: a bad request must be refused
	// before either is used.
	r := &Runner{}
	for name, req := range map[string]Request{
		"unknown scenario":       {Only: []string{"refund/nope"}},
		"unknown workflow":       {Only: []string{"teleport/"}},
		"negative concurrency":   {Concurrency: -1},
		"too much concurrency":   {Concurrency: MaxConcurrency + 1},
		"a replay's concurrency": {ReplayOf: "r1", Concurrency: MaxConcurrency + 1},
		"a replay with a judge":  {ReplayOf: "r1", Judge: "anthropic"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := r.Start(context.Background(), req)
			require.Error(t, err)
			var fe *commitlayer.FieldError
			require.True(t, errors.As(err, &fe), "want a field error (the API answers 422), got %v", err)
		})
	}
}

func TestRunIDsAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newRunID()
		require.False(t, seen[id], id)
		seen[id] = true
	}
}

// TestConcurrencyDefault checks the window a run gets when its request and
// its runner name none: the cores this process may use, bounded.
func TestConcurrencyDefault(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 3, MaxConcurrency + 10} {
		runtime.GOMAXPROCS(procs)
		n, err := (&Runner{}).concurrency(0)
		require.NoError(t, err)
		require.Equal(t, min(procs, MaxConcurrency), n, "GOMAXPROCS %d", procs)
	}
	n, err := (&Runner{DefaultConcurrency: 5}).concurrency(0)
	require.NoError(t, err)
	require.Equal(t, 5, n, "the runner's own default comes first")
	n, err = (&Runner{DefaultConcurrency: 5}).concurrency(7)
	require.NoError(t, err)
	require.Equal(t, 7, n, "the request's comes before both")
}
