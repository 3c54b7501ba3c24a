package verify_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/verify"
	"github.com/commitlayer/commitlayer/workflows"
)

// gatedTemporal counts facts-arrived signals per workflow; each one waits
// for the gate to open, and announces itself on entered first.
type gatedTemporal struct {
	client.Client // nil: only SignalWorkflow is called
	gate          chan struct{}
	entered       chan string
	fail          error

	mu      sync.Mutex
	signals map[string]int
}

func newGated() *gatedTemporal {
	return &gatedTemporal{gate: make(chan struct{}), entered: make(chan string, 1000), signals: map[string]int{}}
}

func (g *gatedTemporal) SignalWorkflow(ctx context.Context, workflowID, _ string, name string, _ any) error {
	if name != workflows.SignalFactsArrived {
		return errors.New("unexpected signal " + name)
	}
	g.mu.Lock()
	g.signals[workflowID]++
	g.mu.Unlock()
	g.entered <- workflowID
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.fail
}

func (g *gatedTemporal) count(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.signals[id]
}

// waitFor polls until cond holds (the notifier's goroutines are not the
// test's to join); it fails only after a minute, which no correct run
// comes near.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestNotifyFactsCoalescesABurst: eleven notices for one verification
// while its first signal is in flight cost it two signals in all — the one
// in flight, and one after it for the ten that came while it flew (a pass
// started by the first may have read before their facts were stored) —
// and each call returns only once a signal sent after it began has been
// delivered.
func TestNotifyFactsCoalescesABurst(t *testing.T) {
	g := newGated()
	rec := commitlayer.ActionRecord{Action: commitlayer.Action{ID: "act_w"}}
	vc := &verify.Client{Temporal: g, Store: noStore{watched: []commitlayer.ActionRecord{rec}}}
	ctx := context.Background()
	tenant := "t_burst"
	wid := workflows.VerifyWorkflowID(tenant, "act_w")

	first := make(chan error, 1)
	go func() { first <- vc.FactsArrived(ctx, tenant, []commitlayer.Subject{"account:a_1"}, nil) }()
	require.Equal(t, wid, <-g.entered) // the first signal is in flight, held at the gate

	const burst = 10
	var wg sync.WaitGroup
	errs := make(chan error, burst)
	for range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- vc.FactsArrived(ctx, tenant, []commitlayer.Subject{"account:a_1"}, nil)
		}()
	}
	// The first of the ten opens the next wave; the other nine join it.
	waitFor(t, "nine notices coalesced", func() bool { return vc.NoticeStats().Coalesced == burst-1 })
	select {
	case err := <-first:
		t.Fatalf("the first call returned before its signal was delivered: %v", err)
	default:
	}
	require.Equal(t, 1, g.count(wid), "no second signal while the first is in flight")

	close(g.gate)
	require.NoError(t, <-first)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, 2, g.count(wid), "eleven notices, two signals")
	require.Equal(t, verify.NoticeStats{Sent: 2, Coalesced: burst - 1}, vc.NoticeStats())

	// Quiet again: the next notice is a signal of its own.
	require.NoError(t, vc.FactsArrived(ctx, tenant, []commitlayer.Subject{"account:a_1"}, nil))
	require.Equal(t, 3, g.count(wid))
}

// TestNotifyFactsBoundsSignalsInFlight: a notice for many verifications
// has at most SignalConcurrency signals in flight, and every verification
// gets exactly one.
func TestNotifyFactsBoundsSignalsInFlight(t *testing.T) {
	g := newGated()
	var watched []commitlayer.ActionRecord
	for i := range 20 {
		watched = append(watched, commitlayer.ActionRecord{Action: commitlayer.Action{ID: "act_" + string(rune('a'+i))}})
	}
	vc := &verify.Client{Temporal: g, Store: noStore{watched: watched}, SignalConcurrency: 3}
	done := make(chan error, 1)
	go func() {
		done <- vc.FactsArrived(context.Background(), "t_bound", []commitlayer.Subject{"account:a_1"}, nil)
	}()
	for range 3 {
		<-g.entered
	}
	// Three are held at the gate; a fourth would announce itself.
	select {
	case id := <-g.entered:
		t.Fatalf("a fourth signal (%s) in flight with a bound of 3", id)
	case <-time.After(50 * time.Millisecond):
	}
	close(g.gate)
	require.NoError(t, <-done)
	for _, a := range watched {
		require.Equal(t, 1, g.count(workflows.VerifyWorkflowID("t_bound", a.ID)), a.ID)
	}
}

// TestNotifyFactsReportsFailedSignals: a signal Temporal refuses fails the
// call (the outbox keeps the notice), one to an ended verification does
// not, and a failed wave does not stick: the next notice signals again.
func TestNotifyFactsReportsFailedSignals(t *testing.T) {
	g := newGated()
	close(g.gate)
	g.fail = serviceerror.NewUnavailable("temporal away")
	vc := &verify.Client{Temporal: g, Store: noStore{watched: []commitlayer.ActionRecord{
		{Action: commitlayer.Action{ID: "act_1"}}, {Action: commitlayer.Action{ID: "act_2"}},
	}}}
	err := vc.FactsArrived(context.Background(), "t_fail", []commitlayer.Subject{"account:a_1"}, nil)
	require.Error(t, err)
	var away *serviceerror.Unavailable
	require.True(t, errors.As(err, &away), "%v", err)

	g.fail = serviceerror.NewNotFound("workflow not found")
	require.NoError(t, vc.FactsArrived(context.Background(), "t_fail", []commitlayer.Subject{"account:a_1"}, nil))
	require.Equal(t, 2, g.count(workflows.VerifyWorkflowID("t_fail", "act_1")))
}
