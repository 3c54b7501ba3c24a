package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/apitest"
	"github.com/commitlayer/commitlayer/service"
)

// fakeWaiter answers waits as it is told and records them.
type fakeWaiter struct {
	*fakeVerifier
	mu      sync.Mutex
	waits   []string // action/final
	verdict commitlayer.Verdict
	reached bool
	err     error
	block   bool // wait until ctx ends
}

var _ service.Verifier = (*fakeWaiter)(nil)

func (f *fakeWaiter) Wait(ctx context.Context, _ string, a commitlayer.ActionRecord, final bool) (commitlayer.Verdict, bool, error) {
	f.mu.Lock()
	f.waits = append(f.waits, a.ID+map[bool]string{true: "/final", false: "/provisional"}[final])
	block, v, reached, err := f.block, f.verdict, f.reached, f.err
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return commitlayer.Verdict{}, false, ctx.Err()
	}
	v.ActionID = a.ID
	return v, reached, err
}

func TestPostActionWait(t *testing.T) {
	fw := &fakeWaiter{fakeVerifier: &fakeVerifier{}}
	e := newEnv(t, func(c *Config) {
		c.Actions = service.NewActions(c.Store, service.NewContracts(c.Store, 0), fw, nil, nil)
	})
	_, key := e.tenant("wait")
	e.contract(key, payoutContract)
	body := func(id string) map[string]any {
		return map[string]any{"id": id, "contract": "send_payout", "agent": "agent-1", "subject": "account:a_1",
			"params": map[string]any{"amount": 2500}, "claim": map[string]string{"status": "success"}}
	}
	prov := commitlayer.Verdict{Status: commitlayer.StatusPass, Provisional: true, Version: 1,
		Lenses:   commitlayer.Lenses{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass},
		Findings: []commitlayer.Finding{{Code: commitlayer.CodeMissingEffect, Check: "payout", Lens: commitlayer.LensOutcome, Message: "payout: none yet"}}}

	// Reached: 200 with the verdict (findings carry their hint).
	fw.verdict, fw.reached = prov, true
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions?wait=provisional&timeout=5", Key: key, Body: body("w1")})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	m := res.JSON(t)
	require.Equal(t, "w1", m["id"])
	require.Equal(t, "/v1/actions/w1", res.Header.Get("Location"))
	v := m["verdict"].(map[string]any)
	require.Equal(t, true, v["provisional"])
	require.Equal(t, "human_review", v["findings"].([]any)[0].(map[string]any)["hint"])
	require.Equal(t, []string{"w1/provisional"}, fw.waits)
	require.Empty(t, fw.startCalls(), "the wait started it; no second start")

	// Not reached (the run continued as new): 202 as without wait.
	fw.reached = false
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions?wait=final&timeout=2s", Key: key, Body: body("w2")})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Nil(t, res.JSON(t)["verdict"])
	require.Equal(t, "started", res.JSON(t)["verification"])

	// The timeout passes first: 202, and the start is made sure of.
	fw.block = true
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions?wait=final&timeout=0.05", Key: key, Body: body("w3")})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, "started", res.JSON(t)["verification"])
	require.Contains(t, fw.startCalls(), mustTenantID(t, e, key)+"/w3")

	// Temporal fails: 202 pending, left to the reconciler.
	fw.block, fw.err = false, errors.New("unavailable")
	fw.fakeVerifier.startErr = errors.New("unavailable")
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions?wait=provisional", Key: key, Body: body("w4")})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, "pending", res.JSON(t)["verification"])
	fw.err, fw.fakeVerifier.startErr = nil, nil

	// A stored verdict at the stage answers at once, without asking
	// Temporal; GET ?wait= too.
	stored := prov
	stored.ActionID, stored.EvaluatedAt, stored.SettlesAt = "w1", e.now, e.now.Add(time.Hour)
	tid := mustTenantID(t, e, key)
	_, _, err := e.db.AppendVerdict(context.Background(), tid, stored)
	require.NoError(t, err)
	n := len(fw.waits)
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions?wait=provisional", Key: key, Body: body("w1")})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "true", res.Header.Get("Idempotent-Replayed"))
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/actions/w1?wait=provisional&timeout=1", Key: key})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Len(t, fw.waits, n, "stored verdicts answer without a wait")

	// Bad parameters: 400 naming the parameter, nothing recorded.
	for q, want := range map[string]string{
		"?wait=soon":              "wait: must be provisional or final",
		"?wait=final&timeout=61":  "timeout: must be more than 0 and at most 1m0s",
		"?wait=final&timeout=0":   "timeout: must be more than 0",
		"?wait=final&timeout=abc": "timeout: must be seconds (15) or a duration (15s)",
		"?timeout=5":              "timeout: only with wait",
	} {
		res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions" + q, Key: key, Body: body("bad")})
		require.Equal(t, http.StatusBadRequest, res.Status, q)
		require.Contains(t, string(res.Body), want, q)
	}
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/actions/bad", Key: key})
	require.Equal(t, http.StatusNotFound, res.Status)
}

func mustTenantID(t *testing.T, e *env, key string) string {
	t.Helper()
	tn, err := e.db.TenantByAPIKey(context.Background(), key)
	require.NoError(t, err)
	return tn.ID
}
