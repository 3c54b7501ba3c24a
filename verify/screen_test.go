package verify_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/verify"
	"github.com/commitlayer/commitlayer/workflows"
)

// screenOf wakes the actions it is told to, and records what it was asked.
type screenOf struct {
	wake  map[string]bool
	asked []string
	short bool // answer one entry too few (a broken screener)
}

func (s *screenOf) Wakes(_ context.Context, _ string, acts []commitlayer.ActionRecord, _ *commitlayer.FactsDigest) []bool {
	out := make([]bool, len(acts))
	for i, a := range acts {
		s.asked = append(s.asked, a.ID)
		out[i] = s.wake[a.ID]
	}
	if s.short && len(out) > 0 {
		out = out[:len(out)-1]
	}
	return out
}

// TestNotifyFactsWakesOnlyWhatTheScreenPicks: of three watching
// verifications the facts reach, the one that pulled them is not asked
// about, the screen keeps one asleep, and the other is signalled; the one
// kept asleep is counted.
func TestNotifyFactsWakesOnlyWhatTheScreenPicks(t *testing.T) {
	g := newGated()
	close(g.gate)
	recs := []commitlayer.ActionRecord{
		{Action: commitlayer.Action{ID: "act_change"}},
		{Action: commitlayer.Action{ID: "act_same"}},
		{Action: commitlayer.Action{ID: "act_puller"}},
	}
	screen := &screenOf{wake: map[string]bool{"act_change": true}}
	vc := &verify.Client{Temporal: g, Store: noStore{watched: recs}, Screen: screen}
	tenant := "t_screen"
	require.NoError(t, vc.NotifyFacts(context.Background(), tenant, []commitlayer.Subject{"account:a_1"}, nil, "act_puller"))
	require.Equal(t, []string{"act_change", "act_same"}, screen.asked, "the pulling verification is not screened")
	require.Equal(t, 1, g.count(workflows.VerifyWorkflowID(tenant, "act_change")))
	require.Zero(t, g.count(workflows.VerifyWorkflowID(tenant, "act_same")))
	require.Zero(t, g.count(workflows.VerifyWorkflowID(tenant, "act_puller")))
	require.Equal(t, verify.NoticeStats{Sent: 1, Screened: 1}, vc.NoticeStats())
}

// TestNotifyFactsWakesWhatAShortScreenLeavesOut: a screener that answers
// for fewer verifications than asked wakes the rest.
func TestNotifyFactsWakesWhatAShortScreenLeavesOut(t *testing.T) {
	g := newGated()
	close(g.gate)
	recs := []commitlayer.ActionRecord{{Action: commitlayer.Action{ID: "act_a"}}, {Action: commitlayer.Action{ID: "act_b"}}}
	vc := &verify.Client{Temporal: g, Store: noStore{watched: recs}, Screen: &screenOf{short: true}}
	tenant := "t_short"
	require.NoError(t, vc.FactsArrived(context.Background(), tenant, []commitlayer.Subject{"account:a_1"}, nil))
	require.Zero(t, g.count(workflows.VerifyWorkflowID(tenant, "act_a")))
	require.Equal(t, 1, g.count(workflows.VerifyWorkflowID(tenant, "act_b")))
}
