package service_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/postgres"
	"github.com/commitlayer/commitlayer/service"
)

// flowStore is memStore with the actions, verdicts, links and notices a
// verification's flow reads, kept in memory, and a log of what was written.
type flowStore struct {
	memStore
	mu        sync.Mutex
	actions   map[string]commitlayer.ActionRecord
	watched   []commitlayer.ActionRecord
	links     map[commitlayer.Subject][]commitlayer.Subject
	asked     []commitlayer.Subject // the subjects WatchedActions was asked for
	heads     map[string]postgres.VerdictHead
	latest    map[string]commitlayer.Verdict
	conns     int
	notices   []postgres.Notice
	log       []string
	replayRec *commitlayer.ActionRecord // CreateAction answers it, not created
}

func newFlowStore() *flowStore {
	return &flowStore{actions: map[string]commitlayer.ActionRecord{}, links: map[commitlayer.Subject][]commitlayer.Subject{},
		heads: map[string]postgres.VerdictHead{}, latest: map[string]commitlayer.Verdict{}}
}

func (s *flowStore) note(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, what)
}

func (s *flowStore) written() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

func (s *flowStore) CreateAction(_ context.Context, tenantID string, a commitlayer.Action, settles, watch time.Time, _ string, _ []byte) (commitlayer.ActionRecord, bool, error) {
	if s.replayRec != nil {
		return *s.replayRec, false, nil
	}
	if a.ID == "" {
		a.ID = "act_" + string(a.Subject)
	}
	rec := commitlayer.ActionRecord{Action: a, TenantID: tenantID, SettlesAt: settles, WatchUntil: watch, CreatedAt: time.Now()}
	s.mu.Lock()
	s.actions[a.ID] = rec
	s.mu.Unlock()
	return rec, true, nil
}

func (s *flowStore) LatestVerdict(_ context.Context, _, actionID string) (commitlayer.Verdict, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.latest[actionID]
	if !ok {
		return v, commitlayer.ErrNotFound
	}
	return v, nil
}

func (s *flowStore) VerificationStarted(_ context.Context, _, actionID string) error {
	s.note("marked " + actionID)
	return nil
}

func (s *flowStore) StartFailed(_ context.Context, _, actionID, reason string) (bool, error) {
	s.note("failed " + actionID + ": " + reason)
	return true, nil
}

func (s *flowStore) ListConnectors(context.Context, string) ([]commitlayer.Connector, error) {
	s.note("connectors")
	return make([]commitlayer.Connector, s.conns), nil
}

func (s *flowStore) LinkedSubjects(_ context.Context, _ string, subjects []commitlayer.Subject) ([]commitlayer.Subject, error) {
	var out []commitlayer.Subject
	for _, x := range subjects {
		out = append(out, s.links[x]...)
	}
	return out, nil
}

func (s *flowStore) WatchedActions(_ context.Context, _ string, subjects []commitlayer.Subject, _ time.Time) ([]commitlayer.ActionRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = slices.Clone(subjects)
	return slices.Clone(s.watched), nil
}

func (s *flowStore) LatestVerdictHeads(_ context.Context, _ string, ids []string) (map[string]postgres.VerdictHead, error) {
	out := map[string]postgres.VerdictHead{}
	for _, id := range ids {
		if h, ok := s.heads[id]; ok {
			out[id] = h
		}
	}
	return out, nil
}

func (s *flowStore) DeliverNotifications(ctx context.Context, limit int, deliver func(context.Context, postgres.Notice) error) (int, int, error) {
	s.mu.Lock()
	due := s.notices
	s.notices = nil
	s.mu.Unlock()
	n := 0
	for _, x := range due {
		if err := deliver(ctx, x); err != nil {
			s.mu.Lock()
			s.notices = append(s.notices, x)
			s.mu.Unlock()
			return n, 1, nil
		}
		n++
	}
	return n, 0, nil
}

func (s *flowStore) PendingStarts(context.Context, time.Duration, int) ([]commitlayer.ActionRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []commitlayer.ActionRecord
	for _, a := range s.actions {
		if !slices.ContainsFunc(s.log, func(l string) bool { return l == "marked "+a.ID || strings.HasPrefix(l, "failed "+a.ID+":") }) {
			out = append(out, a)
		}
	}
	return out, nil
}

func (s *flowStore) StartDeferred(_ context.Context, _, actionID string, _ time.Duration, reason string) (int, error) {
	s.note("deferred " + actionID)
	return 1, nil
}

// refused is a start Temporal refused for good.
type refused struct{}

func (refused) Error() string        { return "refused" }
func (refused) StartRefused() string { return "too long an agent" }

// flowVerifier records what the service asks of Temporal.
type flowVerifier struct {
	mu       sync.Mutex
	starts   []string
	signals  []string
	pollers  int
	startErr error
	waitWith *commitlayer.Verdict // Wait answers it, reached
}

func (v *flowVerifier) Start(_ context.Context, _ string, a commitlayer.ActionRecord) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.starts = append(v.starts, a.ID)
	return v.startErr
}

func (v *flowVerifier) Wait(ctx context.Context, t string, a commitlayer.ActionRecord, final bool) (commitlayer.Verdict, bool, error) {
	if err := v.Start(ctx, t, a); err != nil {
		return commitlayer.Verdict{}, false, err
	}
	if v.waitWith == nil {
		return commitlayer.Verdict{}, false, nil
	}
	return *v.waitWith, !final || !v.waitWith.Provisional, nil
}

func (v *flowVerifier) Recheck(context.Context, string, string) (commitlayer.Verdict, error) {
	return commitlayer.Verdict{}, nil
}

func (v *flowVerifier) Signal(_ context.Context, _ string, acts []commitlayer.ActionRecord) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, a := range acts {
		v.signals = append(v.signals, a.ID)
	}
	return nil
}

func (v *flowVerifier) EnsurePoller(context.Context, string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pollers++
	return nil
}

func (v *flowVerifier) signalled() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := slices.Clone(v.signals)
	slices.Sort(out)
	return out
}

func payout(subject string) commitlayer.Action {
	return commitlayer.Action{Contract: "payout", Agent: "a", Subject: commitlayer.Subject(subject)}
}

// TestSubmitStartsThenMarks: a new action is recorded and started; its
// bookkeeping (the earlier verifications on its subject told, the poller of
// a tenant with connectors, the mark) follows, the mark last.
func TestSubmitStartsThenMarks(t *testing.T) {
	st, ver := newFlowStore(), &flowVerifier{}
	st.conns = 1
	earlier := commitlayer.ActionRecord{Action: commitlayer.Action{ID: "act_earlier", Subject: "account:acc_1"}}
	st.watched = []commitlayer.ActionRecord{earlier}
	acts := service.NewActions(st, service.NewContracts(st, 0), ver, nil, nil)
	sub, err := acts.Submit(context.Background(), "t", payout("account:acc_1"), "", nil, service.Wait{})
	require.NoError(t, err)
	require.True(t, sub.Created)
	require.Equal(t, commitlayer.VerificationStarted, sub.Verification)
	require.Equal(t, []string{sub.Action.ID}, ver.starts)
	require.Eventually(t, func() bool { return slices.Contains(st.written(), "marked "+sub.Action.ID) }, 10*time.Second, time.Millisecond)
	require.Equal(t, []string{"connectors", "marked " + sub.Action.ID}, st.written(), "the mark comes last")
	require.Equal(t, []string{"act_earlier"}, ver.signalled(), "the earlier action on the subject is told; the new one is not")
	require.Equal(t, 1, ver.pollers)

	// A replay whose verification is marked starts nothing; one never
	// marked is started again (Start is idempotent).
	started := sub.Action
	started.VerificationStartedAt = time.Now()
	st.replayRec = &started
	sub, err = acts.Submit(context.Background(), "t", payout("account:acc_1"), "", nil, service.Wait{})
	require.NoError(t, err)
	require.False(t, sub.Created)
	require.Len(t, ver.starts, 1)
	pending := started
	pending.VerificationStartedAt = time.Time{}
	st.replayRec = &pending
	_, err = acts.Submit(context.Background(), "t", payout("account:acc_1"), "", nil, service.Wait{})
	require.NoError(t, err)
	require.Len(t, ver.starts, 2)
}

// TestSubmitWhenTemporalRefusesOrIsAway: a start refused for good marks the
// action failed and says why; one Temporal does not answer leaves it
// pending for the reconciler, and the next requests do not wait on Temporal
// again for a while.
func TestSubmitWhenTemporalRefusesOrIsAway(t *testing.T) {
	st, ver := newFlowStore(), &flowVerifier{startErr: refused{}}
	acts := service.NewActions(st, service.NewContracts(st, 0), ver, nil, nil)
	kicks := 0
	acts.Kick = func() { kicks++ }
	sub, err := acts.Submit(context.Background(), "t", payout("account:acc_1"), "", nil, service.Wait{})
	require.NoError(t, err)
	require.Equal(t, commitlayer.VerificationFailed, sub.Verification)
	require.Equal(t, "too long an agent", sub.Refused)
	require.Contains(t, st.written(), "failed "+sub.Action.ID+": too long an agent")

	ver.startErr = errors.New("unavailable")
	sub, err = acts.Submit(context.Background(), "t", payout("account:acc_2"), "", nil, service.Wait{})
	require.NoError(t, err)
	require.Equal(t, commitlayer.VerificationPending, sub.Verification)
	require.Equal(t, 1, kicks)
	n := len(ver.starts)
	sub, err = acts.Submit(context.Background(), "t", payout("account:acc_3"), "", nil, service.Wait{On: true, Timeout: time.Second})
	require.NoError(t, err)
	require.Equal(t, commitlayer.VerificationPending, sub.Verification)
	require.Len(t, ver.starts, n, "Temporal failed moments ago: left to the reconciler at once")

	// The reconciler starts what was left, once Temporal answers.
	ver.startErr = nil
	_, started := service.NewReconciler(acts).Round(context.Background())
	require.Equal(t, 2, started)
	require.Contains(t, st.written(), "marked act_account:acc_3")
}

// TestSubmitWaitAnswersTheVerdict: with a wait, the verdict the
// verification reached answers; a stored one at the stage answers a replay
// without asking Temporal.
func TestSubmitWaitAnswersTheVerdict(t *testing.T) {
	st := newFlowStore()
	v := commitlayer.Verdict{Status: commitlayer.StatusPass, Provisional: true, Version: 1}
	ver := &flowVerifier{waitWith: &v}
	acts := service.NewActions(st, service.NewContracts(st, 0), ver, nil, nil)
	sub, err := acts.Submit(context.Background(), "t", payout("account:acc_1"), "", nil, service.Wait{On: true, Timeout: time.Second})
	require.NoError(t, err)
	require.NotNil(t, sub.Verdict)
	require.Equal(t, commitlayer.StatusPass, sub.Verdict.Status)
	require.Equal(t, commitlayer.VerificationStarted, sub.Verification)

	started := sub.Action
	started.VerificationStartedAt = time.Now()
	st.replayRec = &started
	st.latest[started.ID] = v
	n := len(ver.starts)
	sub, err = acts.Submit(context.Background(), "t", payout("account:acc_1"), "", nil, service.Wait{On: true, Timeout: time.Second})
	require.NoError(t, err)
	require.NotNil(t, sub.Verdict)
	require.Len(t, ver.starts, n)
	sub, err = acts.Submit(context.Background(), "t", payout("account:acc_1"), "", nil, service.Wait{On: true, Final: true, Timeout: time.Second})
	require.NoError(t, err)
	require.Nil(t, sub.Verdict, "a provisional verdict does not answer a wait for the final one")
}

// TestNoticesWakeWhomTheFactsConcern: a notice reaches the verifications
// watching its subjects or a subject up to two links away, except the one
// whose pass stored the facts and one whose start was refused; with a
// digest, a verification its facts cannot change stays asleep when its
// latest verdict is settled, and is woken otherwise.
func TestNoticesWakeWhomTheFactsConcern(t *testing.T) {
	st, ver := newFlowStore(), &flowVerifier{}
	st.links = map[commitlayer.Subject][]commitlayer.Subject{
		"order:o_1":    {"customer:c_1"},
		"customer:c_1": {"subscription:s_1"},
		// three hops: not reached
		"subscription:s_1": {"plan:p_9"},
	}
	past := time.Now().Add(-time.Hour)
	rec := func(id string) commitlayer.ActionRecord {
		return commitlayer.ActionRecord{Action: commitlayer.Action{ID: id, Contract: "payout", ContractVersion: 1,
			Subject: "account:acc_1", RequestedAt: past}, SettlesAt: past.Add(10 * time.Minute)}
	}
	refusedRec := rec("act_refused")
	refusedRec.VerificationFailedAt = past
	st.watched = []commitlayer.ActionRecord{rec("act_a"), rec("act_self"), refusedRec, rec("act_settled"), rec("act_provisional")}
	st.heads["act_settled"] = postgres.VerdictHead{Version: 2, ContractVersion: 1}
	st.heads["act_provisional"] = postgres.VerdictHead{Version: 1, Provisional: true, ContractVersion: 1}
	st.heads["act_a"] = postgres.VerdictHead{Version: 1, ContractVersion: 1, Unavailable: 1}
	acts := service.NewActions(st, service.NewContracts(st, 0), ver, nil, nil)
	r := service.NewReconciler(acts)

	// Facts of a kind the payout contract reads: every watcher but the
	// excepted and the refused.
	reads := contracts.DigestFacts([]commitlayer.Fact{{Source: "ledger", Type: "payout_sent", OccurredAt: time.Now()}})
	st.notices = []postgres.Notice{{TenantID: "t", Subjects: []commitlayer.Subject{"order:o_1"}, ExceptActionID: "act_self", Digest: reads}}
	delivered, _ := r.Round(context.Background())
	require.Equal(t, 1, delivered)
	require.ElementsMatch(t, []commitlayer.Subject{"order:o_1", "customer:c_1", "subscription:s_1"}, st.asked)
	require.Equal(t, []string{"act_a", "act_provisional", "act_settled"}, ver.signalled())

	// A note of a source the contract does not read, after the actions:
	// the settled one sleeps on; the others (provisional, a source
	// unavailable) are woken.
	ver.signals = nil
	note := contracts.DigestFacts([]commitlayer.Fact{{Source: "crm", Type: "note_added", OccurredAt: time.Now()}})
	st.notices = []postgres.Notice{{TenantID: "t", Subjects: []commitlayer.Subject{"account:acc_1"}, Digest: note}}
	r.Round(context.Background())
	require.Equal(t, []string{"act_a", "act_provisional", "act_self"}, ver.signalled())

	// No digest said: every watcher.
	ver.signals = nil
	st.notices = []postgres.Notice{{TenantID: "t", Subjects: []commitlayer.Subject{"account:acc_1"}}}
	r.Round(context.Background())
	require.Equal(t, []string{"act_a", "act_provisional", "act_self", "act_settled"}, ver.signalled())
}

// TestSubmitAnswersTheFirstVerdictBesideTheStart: a new action's first
// verdict is answered beside its start, and the answer waits for both; a
// start refused for good is marked failed only once it is stored (the
// marking deletes it).
func TestSubmitAnswersTheFirstVerdictBesideTheStart(t *testing.T) {
	st, ver := newFlowStore(), &flowVerifier{}
	acts := service.NewActions(st, service.NewContracts(st, 0), ver, nil, nil)
	var calls []string
	var mu sync.Mutex
	acts.FirstVerdict = func(_ context.Context, _, actionID string) error {
		time.Sleep(20 * time.Millisecond) // slower than the start: the marking must wait for it
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, actionID)
		st.note("first " + actionID)
		return nil
	}
	sub, err := acts.Submit(context.Background(), "t", payout("account:acc_1"), "", nil, service.Wait{})
	require.NoError(t, err)
	require.Equal(t, commitlayer.VerificationStarted, sub.Verification)
	mu.Lock()
	require.Equal(t, []string{sub.Action.ID}, calls, "answered once the first verdict is stored")
	mu.Unlock()

	ver.startErr = refused{}
	sub, err = acts.Submit(context.Background(), "t", payout("account:acc_2"), "", nil, service.Wait{})
	require.NoError(t, err)
	require.Equal(t, commitlayer.VerificationFailed, sub.Verification)
	log := st.written()
	first := slices.Index(log, "first "+sub.Action.ID)
	failed := slices.IndexFunc(log, func(l string) bool { return strings.HasPrefix(l, "failed "+sub.Action.ID) })
	require.True(t, first >= 0 && failed > first, "marked failed after the first verdict: %v", log)

	// A replay, or a wait, answers no first verdict of its own.
	mu.Lock()
	n := len(calls)
	mu.Unlock()
	_, err = acts.Submit(context.Background(), "t", payout("account:acc_3"), "", nil, service.Wait{On: true, Timeout: time.Second})
	require.NoError(t, err)
	mu.Lock()
	require.Len(t, calls, n)
	mu.Unlock()
}
