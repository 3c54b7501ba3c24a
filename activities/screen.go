package activities

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/commitlayer/commitlayer"
)

// ScreenStore is what a Screen reads for all the verifications of a notice
// at once: their latest verdicts (only their heads for those the new facts
// cannot change), and the facts about their subjects
// (postgres.DB.FactsAboutEach: one query, split per subject).
type ScreenStore interface {
	LatestVerdicts(ctx context.Context, tenantID string, actionIDs []string) (map[string]commitlayer.Verdict, error)
	LatestVerdictHeads(ctx context.Context, tenantID string, actionIDs []string) (map[string]commitlayer.VerdictHead, error)
	FactsAboutEach(ctx context.Context, tenantID string, subjects []commitlayer.Subject) (map[commitlayer.Subject][]commitlayer.Fact, error)
	ActionsOnSubjects(ctx context.Context, tenantID string, subjects []commitlayer.Subject, since time.Time) ([]commitlayer.Action, error)
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
	Store      ScreenStore
	// Concurrency bounds the notices screened at once in this process
	// (zero: half its CPUs, at least one). The screen is background work
	// behind answered POSTs: bounded, a burst of ingest on watched
	// subjects keeps CPUs for the POSTs themselves, and the screens queue.
	Concurrency int

	semOnce sync.Once
	sem     chan struct{}
}

func (s *Screen) acquire(ctx context.Context) bool {
	s.semOnce.Do(func() {
		n := s.Concurrency
		if n <= 0 {
			n = max(1, runtime.GOMAXPROCS(0)/2)
		}
		s.sem = make(chan struct{}, n)
	})
	select {
	case s.sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// Wakes reports, for each of acts (watching verifications of the tenant),
// whether the facts stored now may change its verdict. It never fails:
// what it cannot decide it wakes.
//
// digest, when not nil, digests the new facts the notice is about (every
// one of them, perhaps more): a verification whose contract cannot be
// changed by facts like those (contracts.Contract.MayChange: none of a
// kind it reads, none linking, none in its policy's state) stays asleep
// with nothing read for it. The others are evaluated over what is stored.
func (s *Screen) Wakes(ctx context.Context, tenantID string, acts []commitlayer.ActionRecord, digest *commitlayer.FactsDigest) []bool {
	wake := make([]bool, len(acts))
	for i := range wake {
		wake[i] = true
	}
	if s == nil || s.Activities == nil || s.Store == nil || len(acts) == 0 {
		return wake
	}
	if !s.acquire(ctx) {
		return wake
	}
	defer func() { <-s.sem }()
	// Facts like the digest's cannot change some of them: for those the
	// screen needs their latest verdict's head only (final, every source,
	// its contract version), read without the findings; the others'
	// latest verdicts are read whole, to compare a new answer with.
	quiet := make([]bool, len(acts))
	var quietIDs, fullIDs []string
	for i, act := range acts {
		if digest != nil && !s.mayChange(ctx, tenantID, act, digest) {
			quiet[i] = true
			quietIDs = append(quietIDs, act.ID)
		} else {
			fullIDs = append(fullIDs, act.ID)
		}
	}
	if len(quietIDs) > 0 {
		heads, err := s.Store.LatestVerdictHeads(ctx, tenantID, quietIDs)
		if err != nil {
			s.Activities.logger(ctx).Debug("screen wakes: latest verdict heads", "tenant", tenantID, "error", err)
			return wake
		}
		for i, act := range acts {
			if quiet[i] {
				h, ok := heads[act.ID]
				wake[i] = !(ok && s.settled(h, act))
			}
		}
	}
	if len(fullIDs) == 0 {
		return wake
	}
	latest, err := s.Store.LatestVerdicts(ctx, tenantID, fullIDs)
	if err != nil {
		s.Activities.logger(ctx).Debug("screen wakes: latest verdicts", "tenant", tenantID, "error", err)
		return wake
	}
	// Read once for every action: the tenant's coverage (ConnectedSources
	// answers a non-nil slice), the facts about the screened subjects and
	// the actions on them (for each one's later actions).
	pre := &prefetched{}
	var (
		subjects []commitlayer.Subject
		since    time.Time
	)
	for i, act := range acts {
		if quiet[i] || !s.screened(latest, act) {
			continue
		}
		subjects = append(subjects, act.Subject)
		if since.IsZero() || act.RequestedAt.Before(since) {
			since = act.RequestedAt
		}
	}
	if len(subjects) == 0 {
		return wake
	}
	if pre.connected, err = s.Activities.Store.ConnectedSources(ctx, tenantID); err != nil || pre.connected == nil {
		return wake
	}
	if pre.facts, err = s.Store.FactsAboutEach(ctx, tenantID, subjects); err != nil {
		return wake
	}
	if pre.actions, err = s.Store.ActionsOnSubjects(ctx, tenantID, subjects, since); err != nil {
		return wake
	}
	if pre.actions == nil {
		pre.actions = []commitlayer.Action{} // read, and none: not "read per action"
	}
	for i, act := range acts {
		if !quiet[i] && s.screened(latest, act) {
			wake[i] = s.changes(ctx, tenantID, act, latest[act.ID], pre)
		}
	}
	return wake
}

// mayChange reports whether facts like digest may change act's verdict
// (true when its contract cannot be had: the full screen decides).
func (s *Screen) mayChange(ctx context.Context, tenantID string, act commitlayer.ActionRecord, digest *commitlayer.FactsDigest) bool {
	c, err := s.Activities.contract(ctx, tenantID, act.Contract, act.ContractVersion)
	if err != nil {
		return true
	}
	return c.MayChange(digest, act.RequestedAt)
}

// changes evaluates act over what pre holds and reports whether the answer
// differs from last. An error, and a panic (this runs in the API's
// process, not in an activity that the SDK would guard), is a change.
func (s *Screen) changes(ctx context.Context, tenantID string, act commitlayer.ActionRecord, last commitlayer.Verdict, pre *prefetched) (wake bool) {
	defer func() {
		if r := recover(); r != nil {
			s.Activities.logger(ctx).Error("screen wakes: evaluation panicked; woken", "tenant", tenantID, "action", act.ID, "panic", fmt.Sprint(r))
			wake = true
		}
	}()
	c, err := s.Activities.contract(ctx, tenantID, act.Contract, act.ContractVersion)
	if err != nil {
		return true
	}
	v, err := s.Activities.answer(ctx, EvaluateInput{TenantID: tenantID, ActionID: act.ID}, act, c, pre)
	if err != nil || v.Provisional {
		return true
	}
	return !v.SameAnswer(last)
}

// screened reports whether the screen may keep act asleep: its latest
// verdict is final, for its contract version, with every source available.
func (s *Screen) screened(latest map[string]commitlayer.Verdict, act commitlayer.ActionRecord) bool {
	last, ok := latest[act.ID]
	return ok && s.settled(commitlayer.VerdictHead{Version: last.Version, Provisional: last.Provisional,
		ContractVersion: last.ContractVersion, Unavailable: len(last.UnavailableSources)}, act)
}

// settled reports whether a latest verdict with head h lets the screen
// keep act asleep: final, for act's contract version, with every source
// available, and act past its settlement.
func (s *Screen) settled(h commitlayer.VerdictHead, act commitlayer.ActionRecord) bool {
	return !h.Provisional && h.Unavailable == 0 && h.ContractVersion == act.ContractVersion &&
		!s.Activities.now().Before(act.SettlesAt)
}
