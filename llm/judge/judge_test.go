package judge_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/llm/fake"
	"github.com/commitlayer/commitlayer/llm/judge"
)

func at(tool string, status int, args map[string]any) llm.Attempt {
	a := llm.Attempt{Tool: tool, Status: status, Args: args, Attempt: 1}
	if status == 0 {
		a.Error = "timeout: context deadline exceeded"
	}
	return a
}

var (
	order  = map[string]any{"order_id": "o_1"}
	refund = map[string]any{"order_id": "o_1", "amount": 2500}
	keyed  = map[string]any{"order_id": "o_1", "amount": 2500, "idempotency_key": "k1"}
	other  = map[string]any{"order_id": "o_2", "amount": 2500}
)

func success(calls ...llm.Attempt) llm.Trajectory {
	return llm.Trajectory{Instruction: "Refund 25.00 USD on order o_1.", Calls: calls,
		Report: llm.Report{Status: commitlayer.ClaimSuccess, Message: "Refunded."}}
}

func TestRuleJudge(t *testing.T) {
	failed := success(at("get_order", 200, order))
	failed.Report = llm.Report{Status: commitlayer.ClaimFailure, Message: "refund: 403"}
	cases := []struct {
		name    string
		tr      llm.Trajectory
		verdict commitlayer.Status
		reason  string
	}{
		{"all 2xx and success", success(at("get_order", 200, order), at("refund", 201, refund)), commitlayer.StatusPass, "every one of 2 tool calls"},
		{"no calls, claimed success (believed)", success(), commitlayer.StatusPass, "made no tool calls"},
		{"a 503 retried to success", success(at("refund", 503, refund), at("refund", 200, refund)), commitlayer.StatusPass, ""},
		{"a timeout retried with a key to success", success(at("refund", 0, keyed), at("refund", 200, keyed)), commitlayer.StatusPass, ""},
		{"a 500 never recovered", success(at("refund", 500, refund)), commitlayer.StatusFail, "refund: HTTP 500"},
		{"a 403 claimed as success", success(at("get_order", 200, order), at("refund", 403, refund)), commitlayer.StatusFail, "refund: HTTP 403"},
		{"a timeout never recovered", success(at("refund", 0, refund)), commitlayer.StatusFail, "timeout"},
		{"a later success of another call does not recover", success(at("refund", 500, refund), at("refund", 200, other)), commitlayer.StatusFail, "HTTP 500"},
		{"an earlier success does not recover", success(at("refund", 200, refund), at("refund", 429, refund)), commitlayer.StatusFail, "HTTP 429"},
		{"the agent reported failure", failed, commitlayer.StatusFail, "reported failure: refund: 403"},
		{"no report", llm.Trajectory{Calls: []llm.Attempt{at("get_order", 200, order)}}, commitlayer.StatusFail, "no report"},
		{"an odd report", llm.Trajectory{Report: llm.Report{Status: "partial"}}, commitlayer.StatusUnknown, `"partial"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := judge.Evaluate(tc.tr)
			require.Equal(t, tc.verdict, r.Verdict, r.Reason)
			require.Contains(t, r.Reason, tc.reason)
			require.Equal(t, "rule", r.Judge)
		})
	}
}

// A scripted agent's trajectory (no turns, as a results file holds it) is
// judged as it is.
func TestRuleJudgeReadsScriptedTrajectories(t *testing.T) {
	raw := `{"instruction":"Refund 25.00 USD on order o_1001.","calls":[
	 {"tool":"get_order","args":{"order_id":"o_1001"},"attempt":1,"method":"GET","path":"/orders/orders/o_1001","status":200,"response":"{}"},
	 {"tool":"refund","args":{"order_id":"o_1001","amount":2500,"currency":"USD"},"attempt":1,"method":"POST","path":"/payments/refunds","body":"{}","status":403,"response":"{\"error\":{\"code\":\"forbidden\",\"message\":\"no\"}}"}],
	 "report":{"status":"success","message":"Refunded 25.00 USD on order o_1001."}}`
	var tr llm.Trajectory
	require.NoError(t, json.Unmarshal([]byte(raw), &tr))
	r := judge.Evaluate(tr)
	require.Equal(t, commitlayer.StatusFail, r.Verdict)
	require.Contains(t, r.Reason, "refund: HTTP 403")
}

func TestParse(t *testing.T) {
	cases := []struct {
		text    string
		verdict commitlayer.Status
	}{
		{`{"verdict":"PASS","reason":"ok"}`, commitlayer.StatusPass},
		{` {"verdict":"fail","reason":"403"} `, commitlayer.StatusFail},
		{`{"verdict":"MAYBE","reason":"?"}`, commitlayer.StatusUnknown},
		{`{"reason":"no verdict"}`, commitlayer.StatusUnknown},
		{`PASS`, commitlayer.StatusUnknown},
		{`{"verdict":"PASS"} trailing`, commitlayer.StatusUnknown},
		{``, commitlayer.StatusUnknown},
	}
	for _, tc := range cases {
		require.Equal(t, tc.verdict, judge.Parse(tc.text).Verdict, tc.text)
	}
}

var providers = []string{llm.Anthropic, llm.OpenAI, llm.Google}

func modelJudge(t *testing.T, p string, policy fake.Policy) (*fake.Server, judge.Model) {
	srv, err := fake.Start(p, policy)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	prov, err := llm.New(srv.Config())
	require.NoError(t, err)
	return srv, judge.Model{Provider: prov}
}

func TestModelJudgeThroughFakes(t *testing.T) {
	trs := []llm.Trajectory{
		success(at("get_order", 200, order), at("refund", 201, refund)),
		success(at("refund", 403, refund)),
	}
	for _, p := range providers {
		t.Run(p, func(t *testing.T) {
			srv, j := modelJudge(t, p, fake.NewModel(fake.Careful)) // structured turns go to RuleJudge
			for _, tr := range trs {
				got, err := j.Judge(context.Background(), tr)
				require.NoError(t, err)
				want := judge.Evaluate(tr)
				require.Equal(t, want.Verdict, got.Verdict)
				require.Equal(t, want.Reason, got.Reason)
				require.Equal(t, "model:"+p+"/fake-"+p, got.Judge)
				require.Positive(t, got.Usage.InputTokens)
			}
			// Structured output and temperature 0 went over the wire.
			seen := srv.Requests()[0].Turn
			require.NotNil(t, seen.Response)
			require.JSONEq(t, string(judge.Schema), string(seen.Response.Schema))
			require.Equal(t, judge.System, seen.System)
			if p == llm.Anthropic {
				require.Nil(t, seen.Temperature) // the API refuses sampling parameters
			} else {
				require.NotNil(t, seen.Temperature)
				require.Zero(t, *seen.Temperature)
			}
		})
	}
}

func TestModelJudgeUnparseableIsUnknown(t *testing.T) {
	answers := []string{`I think it passed.`, `{"verdict":"PROBABLY","reason":"x"}`, `{"reason":"forgot"}`}
	for _, p := range providers {
		for _, a := range answers {
			t.Run(p+"/"+a, func(t *testing.T) {
				_, j := modelJudge(t, p, fake.PolicyFunc(func(fake.Turn) (fake.Reply, error) { return fake.Reply{Text: a}, nil }))
				r, err := j.Judge(context.Background(), success())
				require.NoError(t, err)
				require.Equal(t, commitlayer.StatusUnknown, r.Verdict, r.Reason)
				require.NotEmpty(t, r.Reason)
			})
		}
	}
}

func TestModelJudgeProviderErrors(t *testing.T) {
	for _, p := range providers {
		t.Run(p, func(t *testing.T) {
			srv, j := modelJudge(t, p, fake.RuleJudge{})
			srv.Inject(fake.Fault{Status: 429})
			_, err := j.Judge(context.Background(), success())
			require.True(t, retryable(err), "%v", err)
			r, err := j.Judge(context.Background(), success())
			require.NoError(t, err)
			require.Equal(t, commitlayer.StatusPass, r.Verdict)
		})
	}
	_, err := judge.Model{}.Judge(context.Background(), success())
	require.ErrorContains(t, err, "no provider")
}

func TestModelJudgeSeesNoModelTurns(t *testing.T) {
	tr := success(at("refund", 200, refund))
	tr.Turns = []llm.Turn{{Index: 1, Response: llm.Response{Text: "secret reasoning"}}}
	tr.Calls[0].Response = string(make([]byte, 5000))
	req, err := judge.Model{}.Request(tr)
	require.NoError(t, err)
	text := req.Messages[0].Text
	require.NotContains(t, text, "secret reasoning")
	got, ok := judge.ExtractTrajectory(text)
	require.True(t, ok)
	require.Len(t, got.Calls, 1)
	require.Less(t, len(got.Calls[0].Response), 2100)
}

// retryable reports whether err is an *llm.Error worth retrying.
func retryable(err error) bool {
	e, ok := llm.AsError(err)
	return ok && e.Retryable()
}
