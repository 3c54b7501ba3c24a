package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/apitest"
)

// TestPostAttempt: an attempt sets the action's claim, joins its trace and
// re-runs the verification; with wait its answer is the recheck's verdict
// (a pass after the attempt); the same attempt again is a replay, another
// attempt under its key a conflict; bad input a 400, an unknown action 404.
func TestPostAttempt(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("attempts")
	e.contract(key, payoutContract)
	id := e.action(key, "account:acc_1", nil)
	attempt := func(k, query string, body any) apitest.Response {
		h := map[string]string{}
		if k != "" {
			h["Idempotency-Key"] = k
		}
		return e.do(apitest.Request{Method: "POST", Path: "/v1/actions/" + id + "/attempts" + query, Key: key, Header: h, Body: body})
	}
	failed := map[string]any{"claim": map[string]string{"status": "failure", "message": "timeout"}, "trace": map[string]string{"request_id": "2"}}

	res := attempt("a-2", "", failed)
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, id, res.JSON(t)["id"])
	require.Eventually(t, func() bool { return len(e.ver.recheckCalls()) == 1 }, 30*time.Second, time.Millisecond,
		"the verification re-reads after the attempt")
	rec, err := e.db.GetAction(t.Context(), tenantOfKey(t, e, key), id)
	require.NoError(t, err)
	require.Equal(t, commitlayer.Claim{Status: "failure", Message: "timeout"}, rec.Claim)
	require.JSONEq(t, `[{"request_id":"2"}]`, string(rec.Trace))

	res = attempt("a-2", "", failed)
	require.Equal(t, http.StatusAccepted, res.Status)
	require.Equal(t, "true", res.Header.Get("Idempotent-Replayed"))
	res = attempt("a-2", "", map[string]any{"claim": map[string]string{"status": "success"}})
	require.Equal(t, http.StatusConflict, res.Status)
	require.Equal(t, codeIdempotency, res.ErrCode(t))

	e.ver.answerRechecks(commitlayer.Verdict{Status: commitlayer.StatusPass, Version: 3, Provisional: true,
		Lenses: commitlayer.Lenses{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass}})
	res = attempt("a-3", "?wait=provisional", map[string]any{"claim": map[string]string{"status": "success", "message": "done"}})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.Equal(t, "PASS", res.JSON(t)["verdict"].(map[string]any)["status"])
	rec, err = e.db.GetAction(t.Context(), tenantOfKey(t, e, key), id)
	require.NoError(t, err)
	require.Equal(t, commitlayer.Claim{Status: "success", Message: "done"}, rec.Claim, "the claim is the last attempt's")

	for name, c := range map[string]struct {
		key  string
		body any
	}{
		"no key":       {"", failed},
		"no claim":     {"a-4", map[string]any{"trace": map[string]string{}}},
		"bad status":   {"a-5", map[string]any{"claim": map[string]string{"status": "done"}}},
		"trace array":  {"a-6", map[string]any{"claim": map[string]string{"status": "success"}, "trace": []int{1}}},
		"unknown keys": {"a-7", map[string]any{"claim": map[string]string{"status": "success"}, "extra": 1}},
	} {
		res := attempt(c.key, "", c.body)
		require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", name, res.Body)
	}
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions/act_nope/attempts", Key: key,
		Header: map[string]string{"Idempotency-Key": "x"}, Body: failed})
	require.Equal(t, http.StatusNotFound, res.Status)
}

func tenantOfKey(t *testing.T, e *env, key string) string {
	tn, err := e.db.TenantByAPIKey(t.Context(), key)
	require.NoError(t, err)
	return tn.ID
}

// TestTracesRetryClaimsLastAttempt: a failed tool span, then its retry that
// succeeds, in one trace: one action claiming success, both attempts in its
// trace, its verification re-read after the retry. The exporter's resend
// records nothing new; the same call after the success is a new action.
func TestTracesRetryClaimsLastAttempt(t *testing.T) {
	e := newEnv(t)
	tenantID, key := e.tenant("traces-retry")
	e.contract(key, boundPayout)
	args := map[string]any{"account_id": "acc_r", "amount": 700, "currency": "USD"}
	first := toolSpan(3, 1, 9, "send_payout", args)
	first.errStatus = "ledger timeout"
	retry := toolSpan(3, 2, 9, "send_payout", args)
	retry.start = time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)
	body := jsonBody(t, exportRequest(t, "payout-service", retry, first)) // out of order: joined by start
	ctype := map[string]string{"Content-Type": "application/json"}
	rejected, msg := partial(t, e.postTraces(key, body, ctype))
	require.Zero(t, rejected, msg)
	e.startsReach(1)
	starts := e.ver.startCalls()
	require.Len(t, starts, 1, "one action")
	id := strings.TrimPrefix(starts[0], tenantID+"/")
	rec, err := e.db.GetAction(t.Context(), tenantID, id)
	require.NoError(t, err)
	require.Equal(t, commitlayer.ClaimSuccess, rec.Claim.Status, "the claim is the last attempt's")
	var trace []map[string]string
	require.NoError(t, json.Unmarshal(rec.Trace, &trace))
	require.Len(t, trace, 2)
	require.Equal(t, []string{"failure", "success"}, []string{trace[0]["claim"], trace[1]["claim"]})
	require.Equal(t, []string{"0101010101010101", "0202020202020202"}, []string{trace[0]["span_id"], trace[1]["span_id"]})
	require.Eventually(t, func() bool { return len(e.ver.recheckCalls()) == 1 }, 30*time.Second, time.Millisecond)
	require.Equal(t, []string{tenantID + "/" + id}, e.ver.recheckCalls(), "re-read after the retry")

	e.waitStarted(tenantID, id)
	rejected, _ = partial(t, e.postTraces(key, body, ctype))
	require.Zero(t, rejected)
	require.Len(t, e.ver.startCalls(), 1)
	require.Len(t, e.ver.recheckCalls(), 1, "the resend records no attempt")

	again := toolSpan(3, 3, 9, "send_payout", args)
	again.start = time.Date(2026, 12, 1, 10, 0, 9, 0, time.UTC)
	rejected, _ = partial(t, e.postTraces(key, jsonBody(t, exportRequest(t, "payout-service", again)), ctype))
	require.Zero(t, rejected)
	e.startsReach(2)
	require.Len(t, e.ver.startCalls(), 2, "after a success the same call is a new action")
}
