package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/apitest"
)

func TestActions(t *testing.T) {
	e := newEnv(t)
	tid, key := e.tenant("actions")
	_, other := e.tenant("actions-other")
	e.contract(key, payoutContract)

	res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: map[string]any{
		"contract": "send_payout", "agent": "agent-1", "subject": "account:acc_1",
		"params": map[string]any{"amount": 2500, "currency": "USD"},
		"claim":  map[string]string{"status": "success", "message": "paid"},
		"trace":  []any{map[string]any{"tool": "payout", "ok": true}},
	}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	m := res.JSON(t)
	id := m["id"].(string)
	require.NotEmpty(t, id)
	require.Equal(t, "/v1/actions/"+id, m["verdict_url"])
	require.Equal(t, "/v1/actions/"+id, res.Header.Get("Location"))
	require.Equal(t, []string{tid + "/" + id}, e.ver.startCalls())

	res = e.do(apitest.Request{Method: "GET", Path: "/v1/actions/" + id, Key: key})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var got struct {
		Action struct {
			commitlayer.Action
			SettlesAt  time.Time `json:"settles_at"`
			WatchUntil time.Time `json:"watch_until"`
		} `json:"action"`
		Verdict *commitlayer.Verdict  `json:"verdict"`
		History []commitlayer.Verdict `json:"history"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &got))
	require.Equal(t, id, got.Action.ID)
	require.Equal(t, 1, got.Action.ContractVersion)
	require.Equal(t, "agent-1", got.Action.Agent)
	require.Equal(t, commitlayer.Attrs{"amount": int64(2500), "currency": "USD"}, got.Action.Params)
	require.True(t, e.now.Equal(got.Action.RequestedAt), "requested_at defaults to now")
	require.True(t, e.now.Add(10*time.Minute).Equal(got.Action.SettlesAt))
	require.True(t, e.now.Add(10*time.Minute+time.Hour).Equal(got.Action.WatchUntil))
	require.JSONEq(t, `[{"ok":true,"tool":"payout"}]`, string(got.Action.Trace))
	require.Nil(t, got.Verdict)
	require.Empty(t, got.History)
	require.Contains(t, string(res.Body), `"verdict":null`)
	require.Contains(t, string(res.Body), `"history":[]`)

	// Verdicts appear once stored: the current one and the history.
	ctx := context.Background()
	v1 := commitlayer.Verdict{ActionID: id, Status: commitlayer.StatusPass, Provisional: true,
		Lenses:      commitlayer.Lenses{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass},
		EvaluatedAt: e.now, SettlesAt: e.now.Add(10 * time.Minute)}
	_, _, err := e.db.AppendVerdict(ctx, tid, v1)
	require.NoError(t, err)
	v2 := v1
	v2.Provisional, v2.Status, v2.Lenses.Outcome = false, commitlayer.StatusFail, commitlayer.StatusFail
	v2.Findings = []commitlayer.Finding{{Code: commitlayer.CodeMissingEffect, Check: "payout", Lens: commitlayer.LensOutcome, Message: "no payout_sent"}}
	_, _, err = e.db.AppendVerdict(ctx, tid, v2)
	require.NoError(t, err)
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/actions/" + id, Key: key})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NoError(t, json.Unmarshal(res.Body, &got))
	require.NotNil(t, got.Verdict)
	require.Equal(t, commitlayer.StatusFail, got.Verdict.Status)
	require.Equal(t, 2, got.Verdict.Version)
	require.Len(t, got.History, 2)
	require.True(t, got.History[0].Provisional)
	require.Equal(t, 1, got.History[0].Version)

	// An explicit requested_at drives the windows.
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: map[string]any{
		"contract": "send_payout", "agent": "agent-1", "subject": "account:acc_2", "requested_at": at.Format(time.RFC3339),
	}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	rec, err := e.db.GetAction(ctx, tid, res.JSON(t)["id"].(string))
	require.NoError(t, err)
	require.True(t, at.Equal(rec.RequestedAt))
	require.True(t, at.Add(10*time.Minute).Equal(rec.SettlesAt))
	require.True(t, at.Add(70*time.Minute).Equal(rec.WatchUntil))

	// A pinned contract version, and a contract without a subject type.
	e.contract(key, strings.Replace(payoutContract, "settlement: 10m", "settlement: 20m", 1))
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: map[string]any{
		"contract": "send_payout", "contract_version": 1, "agent": "a", "subject": "account:acc_3", "requested_at": at.Format(time.RFC3339),
	}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	rec, err = e.db.GetAction(ctx, tid, res.JSON(t)["id"].(string))
	require.NoError(t, err)
	require.Equal(t, 1, rec.ContractVersion)
	require.True(t, at.Add(10*time.Minute).Equal(rec.SettlesAt))
	e.contract(key, anyContract)
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: map[string]any{
		"contract": "note_anything", "agent": "a", "subject": "whatever:w_1"}})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)

	// Another tenant gets 404 and none of the action's data.
	for _, p := range []string{"GET /v1/actions/" + id, "POST /v1/actions/" + id + "/recheck"} {
		method, path, _ := strings.Cut(p, " ")
		res = e.do(apitest.Request{Method: method, Path: path, Key: other})
		require.Equal(t, http.StatusNotFound, res.Status, p)
		require.Equal(t, codeNotFound, res.ErrCode(t))
		require.NotContains(t, string(res.Body), "agent-1")
	}
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/actions/act_nope", Key: key})
	require.Equal(t, http.StatusNotFound, res.Status)
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/actions/%00", Key: key})
	require.Equal(t, http.StatusNotFound, res.Status)
}

func TestActionsIdempotency(t *testing.T) {
	e := newEnv(t)
	tid, key := e.tenant("idem")
	e.contract(key, payoutContract)
	idem := map[string]string{"Idempotency-Key": "k-1"}

	body := `{"contract":"send_payout","agent":"a1","subject":"account:acc_1","params":{"amount":2500,"currency":"USD"}}`
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Header: idem, Body: body})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	id := res.JSON(t)["id"].(string)
	require.Empty(t, res.Header.Get("Idempotent-Replayed"))
	e.waitStarted(tid, id)

	// The same request, written differently (key order, spacing, 2500.0),
	// a minute later: the same action, and no second start.
	e.now = e.now.Add(time.Minute)
	same := `{ "subject": "account:acc_1", "params": {"currency": "USD", "amount": 2500.0},
		"agent": "a1", "contract": "send_payout" }`
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Header: idem, Body: same})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, id, res.JSON(t)["id"])
	require.Equal(t, "true", res.Header.Get("Idempotent-Replayed"))
	require.Equal(t, []string{tid + "/" + id}, e.ver.startCalls())

	// The same key with another body: 409, nothing started.
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Header: idem,
		Body: strings.Replace(body, "2500", "2600", 1)})
	require.Equal(t, http.StatusConflict, res.Status)
	require.Equal(t, codeIdempotency, res.ErrCode(t))
	require.Len(t, e.ver.startCalls(), 1)

	// The key is per tenant.
	_, other := e.tenant("idem-other")
	e.contract(other, payoutContract)
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: other, Header: idem, Body: body})
	require.Equal(t, http.StatusAccepted, res.Status)
	require.NotEqual(t, id, res.JSON(t)["id"])

	// A client-given id is idempotent the same way.
	withID := `{"id":"my-action-1","contract":"send_payout","agent":"a1","subject":"account:acc_9"}`
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: withID})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Equal(t, "my-action-1", res.JSON(t)["id"])
	e.waitStarted(tid, "my-action-1")
	n := len(e.ver.startCalls())
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: withID})
	require.Equal(t, http.StatusAccepted, res.Status)
	require.Equal(t, "my-action-1", res.JSON(t)["id"])
	require.Len(t, e.ver.startCalls(), n)
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: strings.Replace(withID, "a1", "a2", 1)})
	require.Equal(t, http.StatusConflict, res.Status)
	require.Equal(t, codeIdempotency, res.ErrCode(t))

	// A start that fails answers 202 "pending" (the action is kept, and the
	// reconciler starts it); a retry with the same key starts it too.
	e.ver.startErr = fmt.Errorf("temporal unavailable")
	idem2 := map[string]string{"Idempotency-Key": "k-2"}
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Header: idem2, Body: body})
	require.Equal(t, http.StatusAccepted, res.Status)
	require.Equal(t, "pending", res.JSON(t)["verification"])
	require.Contains(t, e.logs.String(), "temporal unavailable")
	e.ver.startErr = nil
	// For a few seconds after a start failed, starts are left to the
	// reconciler at once; then a retry starts it.
	e.now = e.now.Add(6 * time.Second)
	n = len(e.ver.startCalls())
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Header: idem2, Body: body})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	require.Len(t, e.ver.startCalls(), n+1)
	retried := res.JSON(t)["id"].(string)
	require.Equal(t, tid+"/"+retried, e.ver.startCalls()[n])
	e.waitStarted(tid, retried)
	// …and once started, a further replay starts nothing.
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Header: idem2, Body: body})
	require.Equal(t, http.StatusAccepted, res.Status)
	require.Len(t, e.ver.startCalls(), n+1)

	// A replay in another process (an empty start memory) of an action that
	// has a verdict starts nothing either.
	_, _, err := e.db.AppendVerdict(context.Background(), tid, commitlayer.Verdict{ActionID: id, Status: commitlayer.StatusPass,
		Lenses: commitlayer.Lenses{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass}, EvaluatedAt: e.now, SettlesAt: e.now})
	require.NoError(t, err)
	e2 := newEnv(t)
	res = e2.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Header: idem, Body: body})
	require.Equal(t, http.StatusAccepted, res.Status)
	require.Equal(t, id, res.JSON(t)["id"])
	require.Empty(t, e2.ver.startCalls())
}

func TestActionsBadInput(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("actions-bad")
	e.contract(key, payoutContract)
	_, other := e.tenant("actions-bad-other")
	e.contract(other, anyContract)
	base := func() map[string]any {
		return map[string]any{"contract": "send_payout", "agent": "a", "subject": "account:acc_1"}
	}
	with := func(k string, v any) map[string]any {
		m := base()
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		body     any
		header   map[string]string
		want     int
		code     string
		contains string
	}{
		{"empty body", "", nil, http.StatusBadRequest, codeInvalidJSON, ""},
		{"malformed", `{"contract":`, nil, http.StatusBadRequest, codeInvalidJSON, ""},
		{"array", `[]`, nil, http.StatusBadRequest, codeInvalidRequest, ""},
		{"trailing", `{"contract":"send_payout","agent":"a","subject":"account:acc_1"} x`, nil, http.StatusBadRequest, codeInvalidJSON, ""},
		{"unknown field", with("colour", "blue"), nil, http.StatusBadRequest, codeInvalidRequest, "colour"},
		{"unknown claim field", with("claim", map[string]any{"status": "success", "mood": "ok"}), nil, http.StatusBadRequest, codeInvalidRequest, "mood"},
		{"agent wrong type", with("agent", 5), nil, http.StatusBadRequest, codeInvalidRequest, "agent"},
		{"params wrong type", with("params", "amount=5"), nil, http.StatusBadRequest, codeInvalidRequest, "params"},
		{"params array", with("params", []int{1}), nil, http.StatusBadRequest, codeInvalidRequest, "params"},
		{"trace not array", with("trace", map[string]any{"a": 1}), nil, http.StatusBadRequest, codeInvalidRequest, "trace"},
		{"contract_version wrong type", with("contract_version", "1"), nil, http.StatusBadRequest, codeInvalidRequest, "contract_version"},
		{"contract_version negative", with("contract_version", -1), nil, http.StatusBadRequest, codeInvalidRequest, "contract_version"},
		{"contract missing", with("contract", nil), nil, http.StatusBadRequest, codeInvalidRequest, "contract"},
		{"agent missing", with("agent", nil), nil, http.StatusBadRequest, codeInvalidRequest, "agent"},
		{"subject missing", with("subject", nil), nil, http.StatusBadRequest, codeInvalidRequest, "subject"},
		{"subject not type:id", with("subject", "acc_1"), nil, http.StatusBadRequest, codeInvalidRequest, "subject"},
		{"subject empty id", with("subject", "account:"), nil, http.StatusBadRequest, codeInvalidRequest, "subject"},
		{"id bad", with("id", "a b"), nil, http.StatusBadRequest, codeInvalidRequest, "id"},
		{"id too long", with("id", strings.Repeat("a", 129)), nil, http.StatusBadRequest, codeInvalidRequest, "id"},
		{"requested_at bad", with("requested_at", "yesterday"), nil, http.StatusBadRequest, codeInvalidRequest, "requested_at"},
		{"NUL in agent", with("agent", "a\u0000"), nil, http.StatusBadRequest, codeInvalidRequest, "agent"},
		{"NUL in params", with("params", map[string]any{"x": []any{"\u0000"}}), nil, http.StatusBadRequest, codeInvalidRequest, "params"},
		{"NUL in claim", with("claim", map[string]any{"status": "\u0000"}), nil, http.StatusBadRequest, codeInvalidRequest, "claim.status"},
		{"idempotency key too long", base(), map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}, http.StatusBadRequest, codeInvalidRequest, "Idempotency-Key"},
		{"unknown contract", with("contract", "nope"), nil, http.StatusUnprocessableEntity, codeUnknownContract, "nope"},
		{"other tenant's contract", with("contract", "note_anything"), nil, http.StatusUnprocessableEntity, codeUnknownContract, ""},
		{"unknown version", with("contract_version", 9), nil, http.StatusUnprocessableEntity, codeUnknownContract, "version 9"},
		{"subject type mismatch", with("subject", "order:o_1"), nil, http.StatusUnprocessableEntity, codeSubjectMismatch, "account"},
		{"over limit", with("params", map[string]any{"pad": strings.Repeat("x", MaxBody)}), nil, http.StatusRequestEntityTooLarge, codeTooLarge, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Header: tc.header, Body: tc.body})
			require.Equal(t, tc.want, res.Status, "%s", res.Body)
			require.Equal(t, tc.code, res.ErrCode(t), "%s", res.Body)
			require.Contains(t, string(res.Body), tc.contains)
		})
	}
	require.Empty(t, e.ver.startCalls(), "no bad request started a verification")
}

func TestRecheck(t *testing.T) {
	e := newEnv(t)
	tid, key := e.tenant("recheck")
	e.contract(key, payoutContract)
	id := e.action(key, "account:acc_1", nil)

	e.ver.answerRechecks(commitlayer.Verdict{Status: commitlayer.StatusPass,
		Lenses: commitlayer.Lenses{Outcome: commitlayer.StatusPass, Policy: commitlayer.StatusPass}, Version: 3,
		EvaluatedAt: e.now, SettlesAt: e.now.Add(10 * time.Minute)})
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions/" + id + "/recheck", Key: key})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var got struct{ Verdict commitlayer.Verdict }
	require.NoError(t, json.Unmarshal(res.Body, &got))
	require.Equal(t, id, got.Verdict.ActionID)
	require.Equal(t, 3, got.Verdict.Version)
	require.Equal(t, []string{tid + "/" + id}, e.ver.recheckCalls())
	require.Contains(t, string(res.Body), `"findings":[]`)

	// A failure within the watch: 503; after it: 409.
	e.ver.recheckErr = fmt.Errorf("workflow not found")
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions/" + id + "/recheck", Key: key})
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
	require.Equal(t, codeUnavailable, res.ErrCode(t))
	require.NotContains(t, string(res.Body), "workflow not found")
	e.now = e.now.Add(2 * time.Hour)
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions/" + id + "/recheck", Key: key})
	require.Equal(t, http.StatusConflict, res.Status)
	require.Equal(t, codeVerificationEnded, res.ErrCode(t))

	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions/nope/recheck", Key: key})
	require.Equal(t, http.StatusNotFound, res.Status)
}

func TestOrphans(t *testing.T) {
	e := newEnv(t)
	_, key := e.tenant("orphans")
	_, other := e.tenant("orphans-other")
	e.contract(key, payoutContract)
	e.contract(other, payoutContract)
	at := e.now.Add(-time.Hour)
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: map[string]any{
		"contract": "send_payout", "agent": "a", "subject": "account:acc_1", "requested_at": at.Format(time.RFC3339)}})
	require.Equal(t, http.StatusAccepted, res.Status)

	mk := func(id, subject string, occurred time.Time, typ string) map[string]any {
		return map[string]any{"source": "ledger", "type": typ, "subject": subject, "external_id": id,
			"occurred_at": occurred.Format(time.RFC3339), "attrs": map[string]any{"amount": 2500}}
	}
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/facts", Key: key, Body: map[string]any{"facts": []any{
		mk("p-1", "account:acc_1", at.Add(time.Minute), "payout_sent"),      // the action's effect
		mk("p-2", "account:acc_2", at.Add(2*time.Minute), "payout_sent"),    // no action: orphan
		mk("f-1", "account:acc_3", at.Add(3*time.Minute), "account_frozen"), // forbidden kind, no action: orphan
		mk("o-1", "account:acc_4", at.Add(4*time.Minute), "account_opened"), // not a kind of the contract
		mk("p-old", "account:acc_5", e.now.Add(-30*24*time.Hour), "payout_sent"),
	}}})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	res = e.do(apitest.Request{Method: "GET", Path: "/v1/actions/orphans?contract_id=send_payout", Key: key})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var got struct {
		Orphans []struct {
			ContractID string           `json:"contract_id"`
			Check      string           `json:"check"`
			Fact       commitlayer.Fact `json:"fact"`
		}
		Since time.Time
	}
	require.NoError(t, json.Unmarshal(res.Body, &got))
	require.Len(t, got.Orphans, 2, "%s", res.Body)
	require.Equal(t, "send_payout", got.Orphans[0].ContractID)
	require.Equal(t, "payout", got.Orphans[0].Check)
	require.Equal(t, "p-2", got.Orphans[0].Fact.ExternalID)
	require.Equal(t, "no_freeze", got.Orphans[1].Check)
	require.Equal(t, "f-1", got.Orphans[1].Fact.ExternalID)
	require.True(t, e.now.Add(-orphanWindow).Equal(got.Since))

	// since reaches back to the old payout.
	since := e.now.Add(-40 * 24 * time.Hour).Format(time.RFC3339)
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/actions/orphans?contract_id=send_payout&since=" + since, Key: key})
	require.Equal(t, http.StatusOK, res.Status)
	require.NoError(t, json.Unmarshal(res.Body, &got))
	require.Len(t, got.Orphans, 3)
	require.Equal(t, "p-old", got.Orphans[0].Fact.ExternalID)

	// Another tenant with the same contract sees none of these facts.
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/actions/orphans?contract_id=send_payout", Key: other})
	require.Equal(t, http.StatusOK, res.Status)
	require.Contains(t, string(res.Body), `"orphans":[]`)

	for _, tc := range []struct {
		query string
		want  int
		code  string
	}{
		{"", http.StatusBadRequest, codeInvalidRequest},
		{"?contract_id=", http.StatusBadRequest, codeInvalidRequest},
		{"?contract_id=%00", http.StatusBadRequest, codeInvalidRequest},
		{"?contract_id=send_payout&since=last-week", http.StatusBadRequest, codeInvalidRequest},
		{"?contract_id=nope", http.StatusUnprocessableEntity, codeUnknownContract},
	} {
		res := e.do(apitest.Request{Method: "GET", Path: "/v1/actions/orphans" + tc.query, Key: key})
		require.Equal(t, tc.want, res.Status, "%s: %s", tc.query, res.Body)
		require.Equal(t, tc.code, res.ErrCode(t), tc.query)
	}
}
