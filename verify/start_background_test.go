package verify_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/verify"
	"github.com/commitlayer/commitlayer/workflows"
)

// orderStore records the start's bookkeeping in order; ListConnectors
// waits until released.
type orderStore struct {
	noStore
	release chan struct{}
	mu      sync.Mutex
	calls   []string
}

func (s *orderStore) record(c string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

func (s *orderStore) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

func (s *orderStore) WatchedActions(ctx context.Context, t string, subjects []commitlayer.Subject, now time.Time) ([]commitlayer.ActionRecord, error) {
	s.record("watched")
	return s.noStore.WatchedActions(ctx, t, subjects, now)
}

func (s *orderStore) ListConnectors(ctx context.Context, _ string) ([]commitlayer.Connector, error) {
	s.record("connectors")
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return nil, nil
}

func (s *orderStore) VerificationStarted(context.Context, string, string) error {
	s.record("marked")
	return nil
}

// With BackgroundStarts, Start returns once the workflow is started; the
// nudge and the poller check follow, and the action is marked started last
// (so the reconciler redoes them after a crash in between).
func TestStartLeavesItsBookkeepingToTheBackground(t *testing.T) {
	c := dial(t)
	store := &orderStore{release: make(chan struct{})}
	vc := &verify.Client{Temporal: c, Store: store, TaskQueue: "verify-test-nobody-polls", BackgroundStarts: 4}
	tenant := "t_verifybg" + time.Now().Format("150405.000000")
	rec := commitlayer.ActionRecord{Action: commitlayer.Action{ID: "act_bg", Contract: "c", Agent: "a", Subject: "order:o_1",
		RequestedAt: time.Now()}, SettlesAt: time.Now().Add(time.Minute), WatchUntil: time.Now().Add(time.Hour)}
	t.Cleanup(func() {
		_ = c.TerminateWorkflow(context.Background(), workflows.VerifyWorkflowID(tenant, "act_bg"), "", "test done")
	})
	require.NoError(t, vc.Start(context.Background(), tenant, rec))
	// Returned while the poller check still waits: not marked yet.
	require.Eventually(t, func() bool { return len(store.seen()) == 2 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"watched", "connectors"}, store.seen())
	close(store.release)
	require.Eventually(t, func() bool { return len(store.seen()) == 3 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"watched", "connectors", "marked"}, store.seen())
	d, err := c.DescribeWorkflow(context.Background(), workflows.VerifyWorkflowID(tenant, "act_bg"), "")
	require.NoError(t, err)
	require.Equal(t, "VerifyAction", d.WorkflowType.Name)
}

// Without BackgroundStarts (or a free slot) Start does the bookkeeping
// itself, marking first.
func TestStartDoesItsBookkeepingWithoutBackgroundStarts(t *testing.T) {
	c := dial(t)
	store := &orderStore{release: make(chan struct{})}
	close(store.release)
	vc := &verify.Client{Temporal: c, Store: store, TaskQueue: "verify-test-nobody-polls"}
	tenant := "t_verifysync" + time.Now().Format("150405.000000")
	rec := commitlayer.ActionRecord{Action: commitlayer.Action{ID: "act_sync", Contract: "c", Agent: "a", Subject: "order:o_1",
		RequestedAt: time.Now()}, SettlesAt: time.Now().Add(time.Minute), WatchUntil: time.Now().Add(time.Hour)}
	t.Cleanup(func() {
		_ = c.TerminateWorkflow(context.Background(), workflows.VerifyWorkflowID(tenant, "act_sync"), "", "test done")
	})
	require.NoError(t, vc.Start(context.Background(), tenant, rec))
	require.Equal(t, []string{"marked", "watched", "connectors"}, store.seen(), "done before Start returned")
}
