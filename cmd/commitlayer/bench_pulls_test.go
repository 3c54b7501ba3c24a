package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/activities"
)

func TestPassPullsLineCountsOnlyTheRun(t *testing.T) {
	before := activities.PullStats{Pulled: 1, Joined: 4, Skipped: 1}
	require.Empty(t, passPullsLine(before, before), "no pulling pass, no line")
	got := passPullsLine(before, activities.PullStats{Pulled: 3, Joined: 9, Skipped: 3})
	require.Equal(t, "  pulls per pulling pass 0.22: 2 pulls for 9 passes (5 joined one in flight or queued, 2 skipped)\n", got)
}
