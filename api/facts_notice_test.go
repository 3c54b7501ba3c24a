package api

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/apitest"
)

// slowVerifier holds each FactsArrived until released, as a Temporal that
// takes its time with many signals does.
type slowVerifier struct {
	fakeVerifier
	release chan struct{}
	calls   atomic.Int32
}

func (v *slowVerifier) FactsArrived(ctx context.Context, tenantID string, subjects []commitlayer.Subject, digest *commitlayer.FactsDigest) error {
	v.calls.Add(1)
	select {
	case <-v.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return v.fakeVerifier.FactsArrived(ctx, tenantID, subjects, digest)
}

type countingKicker struct{ kicks atomic.Int32 }

func (k *countingKicker) Kick() { k.kicks.Add(1) }

func pendingNotices(t *testing.T, e *env, tenantID string) int {
	t.Helper()
	var n int
	require.NoError(t, e.db.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM fact_notifications WHERE tenant_id = $1`, tenantID).Scan(&n))
	return n
}

// With a reconciler to finish it after a crash, POST /v1/facts answers once
// the batch and its notice are stored, and delivers the notice after.
func TestPostFactsAnswersBeforeTheNotice(t *testing.T) {
	ver := &slowVerifier{release: make(chan struct{})}
	kick := &countingKicker{}
	e := newEnv(t, func(c *Config) { c.Verifier = ver; c.Reconciler = kick })
	_, key := e.tenant("notice-after")
	tid := tenantID(t, e, key)

	res := e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: map[string]any{"facts": []any{fact(1, "account:acc_1")}}})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.JSONEq(t, `{"inserted":1,"duplicates":0}`, string(res.Body))
	// Answered while the notice is still being delivered: it is in the
	// outbox, where the reconciler would find it after a crash.
	require.Eventually(t, func() bool { return ver.calls.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, 1, pendingNotices(t, e, tid))

	close(ver.release)
	require.Eventually(t, func() bool { return pendingNotices(t, e, tid) == 0 }, 10*time.Second, 10*time.Millisecond)
	ver.mu.Lock()
	require.Equal(t, [][]commitlayer.Subject{{"account:acc_1"}}, ver.arrived)
	ver.mu.Unlock()
	require.Zero(t, kick.kicks.Load())
}

// Past maxBackgroundNotices in flight, a POST answers without delivering
// its notice: it stays in the outbox, due after its grace, for the
// reconciler; ingest never waits on Temporal's pace. The deferral is
// counted on /metrics.
func TestPostFactsLeavesItsNoticeToTheOutboxWhenTheBackgroundIsFull(t *testing.T) {
	ver := &slowVerifier{release: make(chan struct{})}
	defer close(ver.release)
	e := newEnv(t, func(c *Config) { c.Verifier = ver; c.Reconciler = &countingKicker{} })
	_, key := e.tenant("notice-full")
	for range maxBackgroundNotices {
		e.srv.notices <- struct{}{} // every slot taken
	}
	before := testutil.ToFloat64(e.srv.metrics.noticesDeferred)
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: map[string]any{"facts": []any{fact(2, "account:acc_2")}}})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Zero(t, ver.calls.Load(), "no delivery tried: every slot is taken")
	require.Equal(t, 1, pendingNotices(t, e, tenantID(t, e, key)), "the notice waits in the outbox")
	require.Equal(t, before+1, testutil.ToFloat64(e.srv.metrics.noticesDeferred))
}
