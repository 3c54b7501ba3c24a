package activities

import (
	"context"

	"github.com/commitlayer/commitlayer"
)

// VerdictReader reads the verdicts a Screen compares against.
type VerdictReader interface {
	LatestVerdicts(ctx context.Context, tenantID string, actionIDs []string) (map[string]commitlayer.Verdict, error)
}

// Screen decides which watching verifications new facts need to wake.
// A wake costs Temporal a signal and a workflow task (on the dev server,
// 9–15 ms of its CPU each; docs/benchmarks.md), and most facts on a
// watched subject change nothing: a note, a balance, a status the
// contract does not read. The screen evaluates the verification's
// contract over the facts stored now, exactly as the watch's pass would
// (no pull; the watch's passes never pull), and wakes it only when the
// answer differs from the latest stored verdict.
//
// Only verifications whose latest verdict is final and has every source
// available are screened: then the workflow's pass reads what the screen
// reads (no source unreachable for it, nothing provisional about the
// clock). Every other verification is woken, and so is any the screen
// cannot evaluate (an error is a wake, never a skip).
//
// A pass that read before the screened facts were stored and then
// changes the verdict would store an answer that misses them, with no
// wake to follow: Evaluate therefore re-reads after storing a changed
// final verdict (settle), so the facts any screen compared against the
// verdict before count in the one after.
type Screen struct {
	Activities *Activities
	Verdicts   VerdictReader
}

// Wakes reports, for each of acts (watching verifications of the tenant),
// whether the facts stored now may change its verdict. It never fails:
// what it cannot decide it wakes.
func (s *Screen) Wakes(ctx context.Context, tenantID string, acts []commitlayer.ActionRecord) []bool {
	wake := make([]bool, len(acts))
	for i := range wake {
		wake[i] = true
	}
	if s == nil || s.Activities == nil || s.Verdicts == nil || len(acts) == 0 {
		return wake
	}
	ids := make([]string, len(acts))
	for i, a := range acts {
		ids[i] = a.ID
	}
	latest, err := s.Verdicts.LatestVerdicts(ctx, tenantID, ids)
	if err != nil {
		s.Activities.logger(ctx).Debug("screen wakes: latest verdicts", "tenant", tenantID, "error", err)
		return wake
	}
	// The tenant's coverage, read once for every action (ConnectedSources
	// answers a non-nil slice).
	connected, err := s.Activities.Store.ConnectedSources(ctx, tenantID)
	if err != nil || connected == nil {
		return wake
	}
	for i, act := range acts {
		last, ok := latest[act.ID]
		if !ok || last.Provisional || len(last.UnavailableSources) > 0 || last.ContractVersion != act.ContractVersion ||
			s.Activities.now().Before(act.SettlesAt) {
			continue
		}
		c, err := s.Activities.contract(ctx, tenantID, act.Contract, act.ContractVersion)
		if err != nil {
			continue
		}
		v, err := s.Activities.answer(ctx, EvaluateInput{TenantID: tenantID, ActionID: act.ID}, act, c, connected)
		if err != nil || v.Provisional {
			continue
		}
		wake[i] = !v.SameAnswer(last)
	}
	return wake
}
