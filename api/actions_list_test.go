package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/apitest"
)

type listAnswer struct {
	Actions []struct {
		ID          string               `json:"id"`
		Agent       string               `json:"agent"`
		Subject     string               `json:"subject"`
		RequestedAt time.Time            `json:"requested_at"`
		Status      string               `json:"status"`
		Verdict     *commitlayer.Verdict `json:"verdict"`
	} `json:"actions"`
	NextCursor *string `json:"next_cursor"`
}

func (e *env) list(key string, q url.Values) listAnswer {
	e.t.Helper()
	res := e.do(apitest.Request{Method: "GET", Path: "/v1/actions?" + q.Encode(), Key: key})
	require.Equal(e.t, http.StatusOK, res.Status, "%s", res.Body)
	var out listAnswer
	require.NoError(e.t, json.Unmarshal(res.Body, &out))
	return out
}

// recordAt posts a payout action requested at t by agent.
func (e *env) recordAt(key, agent, subject string, at time.Time) string {
	e.t.Helper()
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key, Body: map[string]any{
		"contract": "send_payout", "agent": agent, "subject": subject, "requested_at": at.Format(time.RFC3339Nano),
		"params": map[string]any{"amount": 2500, "currency": "USD"}, "claim": map[string]string{"status": "success"},
	}})
	require.Equal(e.t, http.StatusAccepted, res.Status, "%s", res.Body)
	return res.JSON(e.t)["id"].(string)
}

func TestListActions(t *testing.T) {
	e := newEnv(t)
	tid, key := e.tenant("list")
	_, other := e.tenant("list-other")
	e.contract(key, payoutContract)
	e.contract(other, payoutContract)
	ctx := t.Context()

	// Nine actions a minute apart: statuses by index, one left pending.
	base := e.now.Add(-time.Hour)
	statuses := []commitlayer.Status{"PASS", "FAIL", "UNKNOWN", "PASS", "FAIL", "PASS", "FAIL", "PASS", ""}
	ids := make([]string, len(statuses))
	for i, st := range statuses {
		agent := "agent-1"
		if i%2 == 1 {
			agent = "agent-2"
		}
		ids[i] = e.recordAt(key, agent, fmt.Sprintf("account:acc_%d", i), base.Add(time.Duration(i)*time.Minute))
		if st == "" {
			continue
		}
		_, _, err := e.db.AppendVerdict(ctx, tid, commitlayer.Verdict{ActionID: ids[i], Status: st, Provisional: i < 3,
			Lenses: commitlayer.Lenses{Outcome: st, Policy: commitlayer.StatusPass}, EvaluatedAt: e.now, SettlesAt: e.now})
		require.NoError(t, err)
	}
	// A later verdict replaces the current one: action 0 reversed to FAIL.
	_, _, err := e.db.AppendVerdict(ctx, tid, commitlayer.Verdict{ActionID: ids[0], Status: "FAIL",
		Lenses: commitlayer.Lenses{Outcome: "FAIL", Policy: "PASS"}, EvaluatedAt: e.now, SettlesAt: e.now,
		Findings: []commitlayer.Finding{{Code: commitlayer.CodeEffectReversed, Check: "payout", Lens: "outcome", Message: "reversed"}}})
	require.NoError(t, err)
	e.recordAt(other, "agent-1", "account:acc_x", base) // another tenant's

	all := e.list(key, nil)
	require.Len(t, all.Actions, 9, "only the tenant's own")
	require.Nil(t, all.NextCursor)
	for i, a := range all.Actions {
		require.Equal(t, ids[8-i], a.ID, "newest first")
	}
	require.Equal(t, "pending", all.Actions[0].Status)
	require.Nil(t, all.Actions[0].Verdict)
	require.Equal(t, "FAIL", all.Actions[8].Status, "the current verdict, not the first")
	require.Equal(t, 2, all.Actions[8].Verdict.Version)

	idsOf := func(l listAnswer) []string {
		var out []string
		for _, a := range l.Actions {
			out = append(out, a.ID)
		}
		return out
	}
	fails := e.list(key, url.Values{"status": {"FAIL"}})
	require.Equal(t, []string{ids[6], ids[4], ids[1], ids[0]}, idsOf(fails))
	for _, a := range fails.Actions {
		require.Equal(t, commitlayer.StatusFail, a.Verdict.Status)
	}
	require.Equal(t, []string{ids[8]}, idsOf(e.list(key, url.Values{"status": {"pending"}})))
	require.Equal(t, []string{ids[2], ids[1]}, idsOf(e.list(key, url.Values{"provisional": {"true"}})))
	require.Equal(t, []string{ids[6], ids[4], ids[0]}, idsOf(e.list(key, url.Values{"status": {"fail"}, "provisional": {"false"}})))
	require.Equal(t, []string{ids[7], ids[5], ids[3], ids[1]}, idsOf(e.list(key, url.Values{"agent": {"agent-2"}})))
	require.Equal(t, []string{ids[3]}, idsOf(e.list(key, url.Values{"subject": {"account:acc_3"}})))
	require.Empty(t, e.list(key, url.Values{"contract": {"other"}}).Actions)
	require.Equal(t, []string{ids[4], ids[3]}, idsOf(e.list(key, url.Values{
		"since": {base.Add(3 * time.Minute).Format(time.RFC3339)}, "until": {base.Add(5 * time.Minute).Format(time.RFC3339)}})))

	// Pages of two: every action once, in order, even when an action is
	// recorded between pages (newer: not in this walk; older: in it).
	var walked []string
	q := url.Values{"limit": {"2"}}
	pages := 0
	for {
		p := e.list(key, q)
		walked = append(walked, idsOf(p)...)
		pages++
		if pages == 2 {
			e.recordAt(key, "agent-1", "account:acc_new", e.now)
			ids = append(ids, e.recordAt(key, "agent-1", "account:acc_old", base.Add(-time.Minute)))
		}
		if p.NextCursor == nil {
			break
		}
		q.Set("cursor", *p.NextCursor)
	}
	require.Equal(t, []string{ids[8], ids[7], ids[6], ids[5], ids[4], ids[3], ids[2], ids[1], ids[0], ids[9]}, walked)
	require.Equal(t, 5, pages)

	// Bad filters: 400 naming the parameter.
	for raw, param := range map[string]string{
		"status=MAYBE":          "status:",
		"provisional=yes":       "provisional:",
		"limit=0":               "limit:",
		"limit=501":             "limit:",
		"limit=ten":             "limit:",
		"since=yesterday":       "since:",
		"until=2026-13-01":      "until:",
		"subject=acc1":          "subject:",
		"cursor=bm9wZQ":         "cursor:",
		"cursor=***":            "cursor:",
		"statuss=FAIL":          "statuss:",
		"status=FAIL&status=OK": "status:",
		"since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z": "until:",
	} {
		res := e.do(apitest.Request{Method: "GET", Path: "/v1/actions?" + raw, Key: key})
		require.Equal(t, http.StatusBadRequest, res.Status, raw)
		require.Equal(t, codeInvalidRequest, res.ErrCode(t), raw)
		require.Contains(t, res.JSON(t)["error"].(map[string]any)["message"], param, raw)
	}
	require.Equal(t, http.StatusUnauthorized, e.do(apitest.Request{Method: "GET", Path: "/v1/actions"}).Status)
	// The other routes under /v1/actions still answer.
	require.Equal(t, http.StatusOK, e.do(apitest.Request{Method: "GET", Path: "/v1/actions/" + ids[1], Key: key}).Status)
	require.Equal(t, http.StatusOK, e.do(apitest.Request{Method: "GET", Path: "/v1/actions/orphans?contract_id=send_payout", Key: key}).Status)

	// Stats: per bucket, contract and agent.
	res := e.do(apitest.Request{Method: "GET", Path: "/v1/actions/stats?bucket=1h&since=" + url.QueryEscape(base.Add(-2*time.Hour).Format(time.RFC3339)) +
		"&until=" + url.QueryEscape(e.now.Add(time.Second).Format(time.RFC3339)), Key: key})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var stats struct {
		Bucket  string `json:"bucket"`
		Buckets []struct {
			Start  time.Time                `json:"start"`
			Agent  string                   `json:"agent"`
			Counts commitlayer.StatusCounts `json:"counts"`
		} `json:"buckets"`
		Totals commitlayer.StatusCounts `json:"totals"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &stats))
	require.Equal(t, "1h0m0s", stats.Bucket)
	// 11 actions: PASS ×3 (1 was reversed), FAIL ×4, UNKNOWN ×1, pending ×3.
	require.Equal(t, commitlayer.StatusCounts{Pass: 3, Fail: 4, Unknown: 1, Pending: 3}, stats.Totals)
	var agent2 commitlayer.StatusCounts
	for _, b := range stats.Buckets {
		require.Equal(t, b.Start, b.Start.Truncate(time.Hour), "buckets start on the hour")
		if b.Agent == "agent-2" {
			agent2.Add(b.Counts)
		}
	}
	require.Equal(t, commitlayer.StatusCounts{Pass: 3, Fail: 1}, agent2, "agent-2 has actions 1, 3, 5 and 7")
	for raw, param := range map[string]string{
		"bucket=1s":    "bucket:",
		"bucket=often": "bucket:",
		"bucket=1m&since=2020-01-01T00:00:00Z&until=2026-01-01T00:00:00Z": "bucket:",
		"status=FAIL":                "status:",
		"since=2999-01-01T00:00:00Z": "since:",
	} {
		res := e.do(apitest.Request{Method: "GET", Path: "/v1/actions/stats?" + raw, Key: key})
		require.Equal(t, http.StatusBadRequest, res.Status, raw)
		require.Contains(t, res.JSON(t)["error"].(map[string]any)["message"], param, raw)
	}
}

func TestCursorRoundTrip(t *testing.T) {
	c := commitlayer.ActionCursor{RequestedAt: time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC), ID: "act_1.x"}
	got, err := DecodeCursor(EncodeCursor(c))
	require.NoError(t, err)
	require.Equal(t, c, got)
	for _, bad := range []string{"", "!", "MQ", EncodeCursor(c)[:4]} {
		_, err := DecodeCursor(bad)
		require.Error(t, err, bad)
	}
}
