package activities_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/postgres"
)

func (fx *fixture) store(t *testing.T, facts ...commitlayer.Fact) {
	t.Helper()
	_, err := fx.db.InsertFacts(context.Background(), fx.tenant, facts)
	require.NoError(t, err)
}

func ledgerFact(typ, subject, id string, at time.Time, attrs commitlayer.Attrs) commitlayer.Fact {
	return commitlayer.Fact{Source: "ledger", Type: typ, Subject: commitlayer.Subject(subject), ExternalID: id,
		OccurredAt: at, Attrs: attrs}
}

func (fx *fixture) record(t testing.TB, id string) commitlayer.ActionRecord {
	t.Helper()
	rec, err := fx.db.GetAction(context.Background(), fx.tenant, id)
	require.NoError(t, err)
	return rec
}

// TestScreenWakesOnlyVerificationsTheFactsChange: a settled verification
// whose final verdict the new facts leave as it is is not woken; one they
// change is; so is every one the screen cannot vouch for (no verdict yet,
// a provisional one, a source unavailable to its last pass).
func TestScreenWakesOnlyVerificationsTheFactsChange(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	settled := fx.now.Add(-20 * time.Minute) // settles 10 minutes after the request: past
	for _, acc := range []string{"acc_1", "acc_2", "acc_3", "acc_4"} {
		fx.store(t, ledgerFact("account_opened", "account:"+acc, "open-"+acc, settled.Add(-time.Hour), commitlayer.Attrs{"status": "active"}),
			ledgerFact("payout_sent", "account:"+acc, "po-"+acc, settled.Add(time.Second), commitlayer.Attrs{"amount": 500}))
	}
	final := fx.action(t, "agent-1", "account:acc_1", 500, settled)
	require.False(t, fx.evaluate(t, final, activities.EvaluateInput{}).Verdict.Provisional)
	provisional := fx.action(t, "agent-2", "account:acc_2", 500, fx.now.Add(-time.Minute))
	require.True(t, fx.evaluate(t, provisional, activities.EvaluateInput{}).Verdict.Provisional)
	unavailable := fx.action(t, "agent-3", "account:acc_3", 500, settled)
	require.NotEmpty(t, fx.evaluate(t, unavailable, activities.EvaluateInput{
		Unreachable: map[string]string{"ledger": "refused"}}).Verdict.UnavailableSources)
	never := fx.action(t, "agent-4", "account:acc_4", 500, settled)

	screen := &activities.Screen{Activities: fx.acts, Store: fx.db}
	acts := []commitlayer.ActionRecord{fx.record(t, final), fx.record(t, provisional), fx.record(t, unavailable), fx.record(t, never)}

	// A note on every account changes no verdict.
	for _, acc := range []string{"acc_1", "acc_2", "acc_3", "acc_4"} {
		fx.store(t, ledgerFact("note_added", "account:"+acc, "note-"+acc, fx.now, commitlayer.Attrs{"text": "called the customer"}))
	}
	require.Equal(t, []bool{false, true, true, true}, screen.Wakes(ctx, fx.tenant, acts, nil))

	// A second payout on the settled one's account breaks its effect's
	// count: it is woken.
	fx.store(t, ledgerFact("payout_sent", "account:acc_1", "po-acc_1-again", fx.now, commitlayer.Attrs{"amount": 500}))
	require.Equal(t, []bool{true, true, true, true}, screen.Wakes(ctx, fx.tenant, acts, nil))

	// Once its pass stored the new verdict, the same facts wake it no more.
	changed := fx.evaluate(t, final, activities.EvaluateInput{})
	require.True(t, changed.Changed)
	require.Equal(t, commitlayer.StatusFail, changed.Verdict.Status)
	require.Equal(t, []bool{false}, screen.Wakes(ctx, fx.tenant, acts[:1], nil))

	// A later payout action on the account ends the first one's window:
	// the second payout is the later action's, and the first verdict is a
	// PASS again. The screen reads later actions its own way (all the
	// actions on the subjects at once); it must agree with the pass.
	fx.action(t, "agent-1", "account:acc_1", 500, fx.now.Add(-time.Second))
	back := fx.evaluate(t, final, activities.EvaluateInput{})
	require.True(t, back.Changed)
	require.Equal(t, commitlayer.StatusPass, back.Verdict.Status, "%+v", back.Verdict.Findings)
	require.Equal(t, []bool{false}, screen.Wakes(ctx, fx.tenant, acts[:1], nil))

	// A contract the screen cannot load is a wake, not a skip.
	broken := acts[0]
	broken.ContractVersion = 9
	require.Equal(t, []bool{true}, screen.Wakes(ctx, fx.tenant, []commitlayer.ActionRecord{broken}, nil))
	// No screen at all wakes everything.
	var none *activities.Screen
	require.Equal(t, []bool{true, true}, none.Wakes(ctx, fx.tenant, acts[:2], nil))
}

// settledPass is a fixture with one settled payout whose final verdict,
// a PASS, is stored.
func settledPass(t *testing.T) (*fixture, string) {
	t.Helper()
	fx := newFixture(t)
	settled := fx.now.Add(-20 * time.Minute)
	fx.store(t, ledgerFact("account_opened", "account:acc_1", "open", settled.Add(-time.Hour), commitlayer.Attrs{"status": "active"}),
		ledgerFact("payout_sent", "account:acc_1", "po", settled.Add(time.Second), commitlayer.Attrs{"amount": 500}))
	id := fx.action(t, "agent-1", "account:acc_1", 500, settled)
	require.Equal(t, commitlayer.StatusPass, fx.evaluate(t, id, activities.EvaluateInput{}).Verdict.Status)
	return fx, id
}

// racingStore stores facts right after the first FactsAbout read it is
// armed for: facts that land while a pass reads.
type racingStore struct {
	activities.Store
	fx    *fixture
	t     *testing.T
	mu    sync.Mutex
	facts []commitlayer.Fact
}

func (s *racingStore) FactsAbout(ctx context.Context, tenantID string, subjects []commitlayer.Subject) ([]commitlayer.Fact, error) {
	out, err := s.Store.FactsAbout(ctx, tenantID, subjects)
	s.mu.Lock()
	late := s.facts
	s.facts = nil
	s.mu.Unlock()
	if len(late) > 0 {
		s.fx.store(s.t, late...)
	}
	return out, err
}

// TestEvaluateRereadsAfterAFinalVerdictChanges: facts stored while a
// watching pass reads — whose screen compared them against the verdict
// before this pass's, and woke nobody — count in the verdict the pass
// leaves: a changed final verdict is read again.
func TestEvaluateRereadsAfterAFinalVerdictChanges(t *testing.T) {
	fx, id := settledPass(t)

	// A second payout is stored (the pass reads it), and a third lands
	// while the pass reads.
	fx.store(t, ledgerFact("payout_sent", "account:acc_1", "po-2", fx.now.Add(-time.Second), commitlayer.Attrs{"amount": 500}))
	racing := &racingStore{Store: fx.db, fx: fx, t: t,
		facts: []commitlayer.Fact{ledgerFact("payout_sent", "account:acc_1", "po-3", fx.now, commitlayer.Attrs{"amount": 500})}}
	fx.acts.Store = racing
	res := fx.evaluate(t, id, activities.EvaluateInput{})
	require.True(t, res.Changed)
	fx.acts.Store = fx.db
	// What the pass left is what all three payouts say, not what the read
	// before the third said.
	want, err := fx.db.FactsAbout(context.Background(), fx.tenant, []commitlayer.Subject{"account:acc_1"})
	require.NoError(t, err)
	require.Len(t, want, 4)
	again := fx.evaluate(t, id, activities.EvaluateInput{})
	require.False(t, again.Changed, "the verdict the pass left missed the payout stored during its read: %+v", res.Verdict.Findings)
	require.Equal(t, res.Verdict.Version, again.Verdict.Version)
	require.Equal(t, 3, res.Verdict.Version, "v1 PASS, v2 two payouts, v3 three")
	t.Logf("findings: %+v", res.Verdict.Findings)

	// And what the screen sees next is that verdict: nothing to wake.
	screen := &activities.Screen{Activities: fx.acts, Store: fx.db}
	require.Equal(t, []bool{false}, screen.Wakes(context.Background(), fx.tenant, []commitlayer.ActionRecord{fx.record(t, id)}, nil))
}

// panicStore panics where a pass reads the actions a limit counts.
type panicStore struct{ activities.Store }

func (panicStore) PriorActions(context.Context, string, string, string, commitlayer.Subject, time.Time, time.Time, string) ([]commitlayer.Action, error) {
	panic("store broke")
}

// TestScreenWakesWhatPanics: the screen runs in the API's process, where
// no activity guards it: a panic while evaluating is a wake and a log
// line, never a crash.
func TestScreenWakesWhatPanics(t *testing.T) {
	fx, id := settledPass(t)
	acts := []commitlayer.ActionRecord{fx.record(t, id)}
	screen := &activities.Screen{Activities: fx.acts, Store: fx.db}
	require.Equal(t, []bool{false}, screen.Wakes(context.Background(), fx.tenant, acts, nil))
	fx.acts.Store = panicStore{fx.db}
	require.Equal(t, []bool{true}, screen.Wakes(context.Background(), fx.tenant, acts, nil))
	require.Contains(t, fx.logs.String(), "evaluation panicked")
}

// blockingVerdicts holds each LatestVerdicts call until released, and
// reports how many are inside at once.
type blockingVerdicts struct {
	activities.ScreenStore
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	inside  int
	most    int
}

func (b *blockingVerdicts) LatestVerdicts(context.Context, string, []string) (map[string]commitlayer.Verdict, error) {
	b.mu.Lock()
	b.inside++
	b.most = max(b.most, b.inside)
	b.mu.Unlock()
	b.entered <- struct{}{}
	<-b.release
	b.mu.Lock()
	b.inside--
	b.mu.Unlock()
	return map[string]commitlayer.Verdict{}, nil
}

// TestScreenBoundsItsConcurrency: with Concurrency 1, a second notice's
// screen waits for the first; a notice whose context ends while it waits
// wakes everything it names.
func TestScreenBoundsItsConcurrency(t *testing.T) {
	store := &blockingVerdicts{entered: make(chan struct{}, 4), release: make(chan struct{})}
	screen := &activities.Screen{Activities: &activities.Activities{}, Store: store, Concurrency: 1}
	acts := []commitlayer.ActionRecord{{Action: commitlayer.Action{ID: "act_1"}}}
	done := make(chan []bool, 2)
	for range 2 {
		go func() { done <- screen.Wakes(context.Background(), "t", acts, nil) }()
	}
	<-store.entered
	select {
	case <-store.entered:
		t.Fatal("two screens ran at once with Concurrency 1")
	case <-time.After(50 * time.Millisecond):
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.Equal(t, []bool{true}, screen.Wakes(ctx, "t", acts, nil), "a screen that cannot start wakes")
	store.release <- struct{}{}
	<-store.entered
	store.release <- struct{}{}
	require.Equal(t, []bool{true}, <-done) // no verdict stored: woken
	require.Equal(t, []bool{true}, <-done)
	require.Equal(t, 1, store.most)
}

// countingStore counts FactsAbout reads.
type countingStore struct {
	activities.Store
	reads int
}

func (s *countingStore) FactsAbout(ctx context.Context, tenantID string, subjects []commitlayer.Subject) ([]commitlayer.Fact, error) {
	s.reads++
	return s.Store.FactsAbout(ctx, tenantID, subjects)
}

// TestSettlementIsReadOnce: the first final verdict follows a provisional
// one, which no screen keeps anyone asleep on, so the settlement pass
// reads once; a change of a final verdict reads again.
func TestSettlementIsReadOnce(t *testing.T) {
	fx := newFixture(t)
	requested := fx.now.Add(-time.Minute)
	fx.store(t, ledgerFact("account_opened", "account:acc_1", "open", requested.Add(-time.Hour), commitlayer.Attrs{"status": "active"}),
		ledgerFact("payout_sent", "account:acc_1", "po", requested.Add(time.Second), commitlayer.Attrs{"amount": 500}))
	id := fx.action(t, "agent-1", "account:acc_1", 500, requested)
	require.True(t, fx.evaluate(t, id, activities.EvaluateInput{Provisional: true}).Verdict.Provisional)

	counting := &countingStore{Store: fx.db}
	fx.acts.Store = counting
	fx.acts.Now = func() time.Time { return fx.now.Add(20 * time.Minute) } // past settles_at
	final := fx.evaluate(t, id, activities.EvaluateInput{})
	require.True(t, final.Changed)
	require.False(t, final.Verdict.Provisional)
	require.Equal(t, 1, counting.reads, "the settlement pass read twice")

	fx.store(t, ledgerFact("payout_sent", "account:acc_1", "po-2", fx.now, commitlayer.Attrs{"amount": 500}))
	counting.reads = 0
	reversed := fx.evaluate(t, id, activities.EvaluateInput{})
	require.True(t, reversed.Changed)
	require.Equal(t, 2, counting.reads, "a changed final verdict is read again")
}

// batchCountingStore is the postgres store (its one-round-trip pass
// reads included) counting the reads a pass makes apart from them.
type batchCountingStore struct {
	*postgres.DB
	batches, reads, histories int
}

func (s *batchCountingStore) ReadPass(ctx context.Context, tenantID string, r commitlayer.PassReadRequest) (commitlayer.PassRead, error) {
	s.batches++
	return s.DB.ReadPass(ctx, tenantID, r)
}

func (s *batchCountingStore) FactsAbout(ctx context.Context, tenantID string, subjects []commitlayer.Subject) ([]commitlayer.Fact, error) {
	s.reads++
	return s.DB.FactsAbout(ctx, tenantID, subjects)
}

func (s *batchCountingStore) VerdictHistory(ctx context.Context, tenantID, actionID string) ([]commitlayer.Verdict, error) {
	s.histories++
	return s.DB.VerdictHistory(ctx, tenantID, actionID)
}

// TestSettlementIsReadOnceInOneRoundTrip: TestSettlementIsReadOnce on a
// store that reads a pass at once: the settlement pass is one batch, and
// the verdict it read tells that the one before was provisional (no
// history read); a changed final verdict is read again.
func TestSettlementIsReadOnceInOneRoundTrip(t *testing.T) {
	fx := newFixture(t)
	requested := fx.now.Add(-time.Minute)
	fx.store(t, ledgerFact("account_opened", "account:acc_1", "open", requested.Add(-time.Hour), commitlayer.Attrs{"status": "active"}),
		ledgerFact("payout_sent", "account:acc_1", "po", requested.Add(time.Second), commitlayer.Attrs{"amount": 500}))
	id := fx.action(t, "agent-1", "account:acc_1", 500, requested)
	require.True(t, fx.evaluate(t, id, activities.EvaluateInput{Provisional: true}).Verdict.Provisional)

	counting := &batchCountingStore{DB: fx.db}
	fx.acts.Store = counting
	fx.acts.Now = func() time.Time { return fx.now.Add(20 * time.Minute) } // past settles_at
	final := fx.evaluate(t, id, activities.EvaluateInput{})
	require.True(t, final.Changed)
	require.False(t, final.Verdict.Provisional)
	require.Equal(t, commitlayer.StatusPass, final.Verdict.Status)
	require.Equal(t, [3]int{1, 0, 0}, [3]int{counting.batches, counting.reads, counting.histories},
		"batches, reads apart, history reads of the settlement pass")

	fx.store(t, ledgerFact("payout_sent", "account:acc_1", "po-2", fx.now, commitlayer.Attrs{"amount": 500}))
	*counting = batchCountingStore{DB: fx.db}
	reversed := fx.evaluate(t, id, activities.EvaluateInput{})
	require.True(t, reversed.Changed)
	require.Equal(t, commitlayer.StatusFail, reversed.Verdict.Status)
	require.Equal(t, [3]int{1, 1, 0}, [3]int{counting.batches, counting.reads, counting.histories},
		"a changed final verdict is read again, and the verdict read tells it followed a final one")
}

// countingScreenStore counts the screen's reads of facts, and of latest
// verdicts whole and by their heads.
type countingScreenStore struct {
	activities.ScreenStore
	mu              sync.Mutex
	reads           int
	verdicts, heads int
}

func (s *countingScreenStore) LatestVerdicts(ctx context.Context, tenantID string, ids []string) (map[string]commitlayer.Verdict, error) {
	s.mu.Lock()
	s.verdicts++
	s.mu.Unlock()
	return s.ScreenStore.LatestVerdicts(ctx, tenantID, ids)
}

func (s *countingScreenStore) LatestVerdictHeads(ctx context.Context, tenantID string, ids []string) (map[string]commitlayer.VerdictHead, error) {
	s.mu.Lock()
	s.heads++
	s.mu.Unlock()
	return s.ScreenStore.LatestVerdictHeads(ctx, tenantID, ids)
}

func (s *countingScreenStore) FactsAboutEach(ctx context.Context, tenantID string, subjects []commitlayer.Subject) (map[commitlayer.Subject][]commitlayer.Fact, error) {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	return s.ScreenStore.FactsAboutEach(ctx, tenantID, subjects)
}

// TestScreenSparesWithoutAReadWhatTheDigestClears: a notice whose digest
// says its facts are of a kind the contract never reads keeps a settled
// verification asleep without reading a fact; a digest of a kind it reads,
// of a link, or of its source before the action is screened over what is
// stored, as before; and the screen's preconditions hold either way.
func TestScreenSparesWithoutAReadWhatTheDigestClears(t *testing.T) {
	fx, id := settledPass(t)
	ctx := context.Background()
	store := &countingScreenStore{ScreenStore: fx.db}
	screen := &activities.Screen{Activities: fx.acts, Store: store}
	rec := fx.record(t, id)
	acts := []commitlayer.ActionRecord{rec}
	digest := func(facts ...commitlayer.Fact) *commitlayer.FactsDigest {
		fx.store(t, facts...)
		return commitlayer.DigestFacts(facts)
	}

	note := digest(ledgerFact("note_added", "account:acc_1", "note-1", fx.now, commitlayer.Attrs{"text": "called"}))
	require.Equal(t, []bool{false}, screen.Wakes(ctx, fx.tenant, acts, note))
	require.Zero(t, store.reads, "a digest the contract cannot read is screened without a read")
	require.Equal(t, [2]int{0, 1}, [2]int{store.verdicts, store.heads}, "nor a verdict's findings: its head only")

	// Of the contract's source and before the action: the policy's state
	// reads it. Screened over the store (and the note changes nothing).
	early := digest(ledgerFact("note_added", "account:acc_1", "note-early", rec.RequestedAt.Add(-time.Minute), commitlayer.Attrs{"text": "earlier"}))
	require.Equal(t, []bool{false}, screen.Wakes(ctx, fx.tenant, acts, early))
	require.Equal(t, 1, store.reads)
	// A status from before the action that breaks the policy: woken.
	frozen := digest(ledgerFact("status_changed", "account:acc_1", "frozen", rec.RequestedAt.Add(-time.Second), commitlayer.Attrs{"status": "frozen"}))
	require.Equal(t, []bool{true}, screen.Wakes(ctx, fx.tenant, acts, frozen))
	require.Equal(t, 2, store.reads)

	// A link: screened over the store.
	linked := ledgerFact("note_added", "account:acc_1", "note-linked", fx.now, nil)
	linked.Links = []commitlayer.Subject{"customer:c_1"}
	require.Equal(t, []bool{true}, screen.Wakes(ctx, fx.tenant, acts, digest(linked)), "the frozen status still counts")
	require.Equal(t, 3, store.reads)

	// The effect's kind: a second payout is read and wakes it, whatever
	// the notice's other facts.
	fx2, id2 := settledPass(t)
	store2 := &countingScreenStore{ScreenStore: fx2.db}
	screen2 := &activities.Screen{Activities: fx2.acts, Store: store2}
	acts2 := []commitlayer.ActionRecord{fx2.record(t, id2)}
	payout := []commitlayer.Fact{
		ledgerFact("note_added", "account:acc_1", "note-2", fx2.now, nil),
		ledgerFact("payout_sent", "account:acc_1", "po-again", fx2.now, commitlayer.Attrs{"amount": 500}),
	}
	fx2.store(t, payout...)
	require.Equal(t, []bool{true}, screen2.Wakes(ctx, fx2.tenant, acts2, commitlayer.DigestFacts(payout)))
	require.Equal(t, 1, store2.reads)

	// A verification the screen cannot vouch for (provisional) is woken,
	// digest or not.
	fresh := fx2.action(t, "agent-2", "account:acc_1", 500, fx2.now.Add(-time.Minute))
	fx2.evaluate(t, fresh, activities.EvaluateInput{})
	require.Equal(t, []bool{true}, screen2.Wakes(ctx, fx2.tenant, []commitlayer.ActionRecord{fx2.record(t, fresh)},
		commitlayer.DigestFacts(payout[:1])))
	// So is one without a verdict yet, or with a source unavailable or
	// another contract version in its latest verdict; the settled one
	// beside them in the same notice is not (its head read with theirs).
	unstarted := fx2.action(t, "agent-3", "account:acc_1", 500, fx2.now.Add(-time.Hour))
	mixed := []commitlayer.ActionRecord{fx2.record(t, unstarted), acts2[0]}
	store2.verdicts, store2.heads = 0, 0
	note2 := commitlayer.DigestFacts(payout[:1])
	require.True(t, screen2.Wakes(ctx, fx2.tenant, mixed, commitlayer.DigestFacts(payout))[0],
		"the payout may change both: read whole, the one without a verdict woken")
	require.Equal(t, [2]int{1, 0}, [2]int{store2.verdicts, store2.heads})
	require.Equal(t, []bool{true, false}, screen2.Wakes(ctx, fx2.tenant, mixed, note2))
	require.Equal(t, [2]int{1, 1}, [2]int{store2.verdicts, store2.heads})
	for _, tc := range []struct {
		name   string
		change func(*commitlayer.VerdictHead)
	}{
		{"a source unavailable", func(h *commitlayer.VerdictHead) { h.Unavailable = 1 }},
		{"another contract version", func(h *commitlayer.VerdictHead) { h.ContractVersion++ }},
		{"provisional", func(h *commitlayer.VerdictHead) { h.Provisional = true }},
	} {
		heads := &alteredHeads{ScreenStore: fx2.db, change: tc.change}
		altered := &activities.Screen{Activities: fx2.acts, Store: heads}
		require.Equal(t, []bool{true}, altered.Wakes(ctx, fx2.tenant, acts2, note2), tc.name)
	}
	// A store that cannot answer wakes.
	failing := &activities.Screen{Activities: fx2.acts, Store: &alteredHeads{ScreenStore: fx2.db, err: errors.New("down")}}
	require.Equal(t, []bool{true}, failing.Wakes(ctx, fx2.tenant, acts2, note2))
}

// alteredHeads changes each latest verdict head it reads, or fails.
type alteredHeads struct {
	activities.ScreenStore
	change func(*commitlayer.VerdictHead)
	err    error
}

func (a *alteredHeads) LatestVerdictHeads(ctx context.Context, tenantID string, ids []string) (map[string]commitlayer.VerdictHead, error) {
	if a.err != nil {
		return nil, a.err
	}
	heads, err := a.ScreenStore.LatestVerdictHeads(ctx, tenantID, ids)
	for id, h := range heads {
		a.change(&h)
		heads[id] = h
	}
	return heads, err
}
