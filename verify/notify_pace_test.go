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

// windows is a clock for the notifier's windows: each window ends when the
// test ends it.
type windows struct {
	mu   sync.Mutex
	open []func()
}

func (w *windows) after(_ time.Duration, f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.open = append(w.open, f)
}

func (w *windows) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.open)
}

// end ends the oldest open window.
func (w *windows) end() {
	w.mu.Lock()
	f := w.open[0]
	w.open = w.open[1:]
	w.mu.Unlock()
	f()
}

// TestNotifyFactsOneSignalPerWindow: after a signal, a verification gets
// no other until its window ends, however many notices name it meanwhile;
// they share one signal, sent when the window ends, and each call returns
// only once that one is delivered. A window nobody asked within is
// forgotten: the next notice goes at once.
func TestNotifyFactsOneSignalPerWindow(t *testing.T) {
	g := newGated()
	close(g.gate)
	rec := commitlayer.ActionRecord{Action: commitlayer.Action{ID: "act_w"}}
	vc := &verify.Client{Temporal: g, Store: noStore{watched: []commitlayer.ActionRecord{rec}}, SignalWindow: time.Hour}
	w := &windows{}
	verify.SetNotifierClock(vc, w.after)
	ctx := context.Background()
	tenant := "t_window"
	wid := workflows.VerifyWorkflowID(tenant, "act_w")
	notify := func() error { return vc.FactsArrived(ctx, tenant, []commitlayer.Subject{"account:a_1"}, nil) }

	require.NoError(t, notify())
	require.Equal(t, 1, g.count(wid))
	require.Equal(t, 1, w.count(), "the signal opened a window")

	const burst = 20
	errs := make(chan error, burst)
	for range burst {
		go func() { errs <- notify() }()
	}
	waitFor(t, "the burst joined one wave", func() bool { return vc.NoticeStats().Coalesced == burst-1 })
	require.Equal(t, 1, g.count(wid), "no signal within the window")
	select {
	case err := <-errs:
		t.Fatalf("a call returned before its signal: %v", err)
	default:
	}

	w.end() // the window ends: the burst's one signal goes
	for range burst {
		require.NoError(t, <-errs)
	}
	require.Equal(t, 2, g.count(wid), "twenty-one notices, two signals")
	require.Equal(t, verify.NoticeStats{Sent: 2, Coalesced: burst - 1, Held: 1}, vc.NoticeStats())

	waitFor(t, "the second signal opened a window", func() bool { return w.count() == 1 })
	w.end() // nobody asked within it
	require.NoError(t, notify())
	require.Equal(t, 3, g.count(wid), "a quiet verification is signalled at once")
}

// TestNotifyFactsKeepsToTheRate: with a rate, a signal goes only when the
// rate gives it a turn: three turns, three signals, whatever is queued.
func TestNotifyFactsKeepsToTheRate(t *testing.T) {
	g := newGated()
	close(g.gate)
	var watched []commitlayer.ActionRecord
	for i := range 10 {
		watched = append(watched, commitlayer.ActionRecord{Action: commitlayer.Action{ID: "act_" + string(rune('a'+i))}})
	}
	vc := &verify.Client{Temporal: g, Store: noStore{watched: watched}, SignalRate: 1}
	turns := make(chan struct{})
	verify.SetNotifierRate(vc, func(context.Context) error { <-turns; return nil })
	done := make(chan error, 1)
	go func() {
		done <- vc.FactsArrived(context.Background(), "t_rate", []commitlayer.Subject{"account:a_1"}, nil)
	}()

	for range 3 {
		turns <- struct{}{} // taken by one sender
	}
	waitFor(t, "three signals", func() bool { return len(g.entered) == 3 })
	require.Equal(t, int64(3), vc.NoticeStats().Sent, "three turns, three signals")
	select {
	case err := <-done:
		t.Fatalf("the call returned with seven signals not sent: %v", err)
	default:
	}

	close(turns) // every turn given
	require.NoError(t, <-done)
	for _, a := range watched {
		require.Equal(t, 1, g.count(workflows.VerifyWorkflowID("t_rate", a.ID)), a.ID)
	}
}
