package service_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/service"
)

const refundBinding = `id: refund
subject: order
settlement: 10m
sources: [payments]
effects:
  - id: refund
    source: payments
    type: refund_created
bindings:
  - tool: refund
    subject: "'order:' + args.order_id"
    params: {amount: args.amount, note: args.note}
`

func refundBindings(t *testing.T) *contracts.Bindings {
	c, err := contracts.Parse([]byte(refundBinding))
	require.NoError(t, err)
	return contracts.NewBindings([]*contracts.Contract{c})
}

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// call is a call of refund (or tool) in session s with JSON-RPC id id, at
// t0 + sec.
func call(s, id string, sec int, failed bool, args map[string]any) service.ToolCall {
	return service.ToolCall{Source: "mcp", Scope: s, CallID: id, Tool: "refund", Args: args, Result: map[string]any{},
		Failed: failed, Message: map[bool]string{true: "timeout", false: "ok"}[failed], Agent: "agent-1",
		Start: t0.Add(time.Duration(sec) * time.Second), Trace: map[string]string{"request_id": id}}
}

func order(id string) map[string]any { return map[string]any{"order_id": id, "amount": 5, "note": "n"} }

// TestToolCallsChains: one recorder for both paths, in the order calls
// come. Each step is a call and what it must record.
func TestToolCallsChains(t *testing.T) {
	b := refundBindings(t)
	type want struct {
		retry    bool
		chainKey string
		key      string
		claim    string
		began    int // seconds after t0
	}
	steps := []struct {
		name string
		call service.ToolCall
		want *want // nil: unbound
	}{
		{"a read: unbound, notes when the work began", func() service.ToolCall {
			c := call("s1", "1", 0, false, nil)
			c.Tool = "get_order"
			return c
		}(), nil},
		{"the refund fails: a new chain, its work began at the read", call("s1", "2", 1, true, order("o1")),
			&want{chainKey: "mcp/s1/2/refund/0", key: "mcp/s1/2/refund/0", claim: "failure", began: 0}},
		{"the agent retries: an attempt of the chain, claiming success", call("s1", "3", 2, false, order("o1")),
			&want{retry: true, chainKey: "mcp/s1/2/refund/0", key: "mcp/s1/3/refund/0", claim: "success", began: 0}},
		{"the same call after a success: a new action", call("s1", "4", 3, false, order("o1")),
			&want{chainKey: "mcp/s1/4/refund/0", key: "mcp/s1/4/refund/0", claim: "success", began: 3}},
		{"another session's failure", call("s2", "1", 4, true, order("o2")),
			&want{chainKey: "mcp/s2/1/refund/0", key: "mcp/s2/1/refund/0", claim: "failure", began: 4}},
		{"the same match in another session is not its retry", call("s3", "1", 5, false, order("o2")),
			&want{chainKey: "mcp/s3/1/refund/0", key: "mcp/s3/1/refund/0", claim: "success", began: 5}},
		{"another agent in the session is not its retry", func() service.ToolCall {
			c := call("s2", "2", 6, false, order("o2"))
			c.Agent = "agent-2"
			return c
		}(), &want{chainKey: "mcp/s2/2/refund/0", key: "mcp/s2/2/refund/0", claim: "success", began: 6}},
		{"other params are another call", call("s2", "3", 7, false, map[string]any{"order_id": "o2", "amount": 6, "note": "n"}),
			&want{chainKey: "mcp/s2/3/refund/0", key: "mcp/s2/3/refund/0", claim: "success", began: 7}},
		{"the first session's id 3 sent again: its chain, keyed by its answer", call("s1", "3", 8, false, order("o1")),
			&want{retry: true, chainKey: "mcp/s1/2/refund/0", key: "mcp/s1/3/refund/0/again/", claim: "success", began: 0}},
		{"id 3 reused for another call: an action of its own", call("s1", "3", 9, false, order("o9")),
			&want{chainKey: "mcp/s1/3#", key: "mcp/s1/3#", claim: "success", began: 9}},
	}
	r := service.NewToolCalls(0, 0)
	ids := map[string]string{}
	for _, st := range steps {
		recs, bound, err := r.Record(st.call, b)
		require.NoError(t, err, st.name)
		if st.want == nil {
			require.False(t, bound, st.name)
			require.Empty(t, recs, st.name)
			continue
		}
		require.True(t, bound, st.name)
		require.Len(t, recs, 1, st.name)
		rec := recs[0]
		require.Equal(t, st.want.retry, rec.Retry, st.name)
		require.True(t, strings.HasPrefix(rec.ChainKey, st.want.chainKey), "%s: chain key %s", st.name, rec.ChainKey)
		require.True(t, strings.HasPrefix(rec.Key, st.want.key), "%s: key %s", st.name, rec.Key)
		require.Equal(t, st.want.claim, rec.Action.Claim.Status, st.name)
		require.Equal(t, t0.Add(time.Duration(st.want.began)*time.Second), rec.Action.RequestedAt, st.name)
		require.Equal(t, service.ActionIDOf(rec.ChainKey), rec.Action.ID, st.name)
		require.Equal(t, commitlayer.Subject("order:"+st.call.Args["order_id"].(string)), rec.Action.Subject, st.name)
		require.JSONEq(t, `{"request_id":"`+st.call.CallID+`","claim":"`+st.want.claim+`"}`, string(rec.Entry), st.name)
		require.JSONEq(t, "["+string(rec.Entry)+"]", string(rec.Action.Trace), st.name)
		if prev, ok := ids[rec.ChainKey]; ok {
			require.Equal(t, prev, rec.Action.ID, "%s: one action per chain", st.name)
		}
		ids[rec.ChainKey] = rec.Action.ID
	}

	// The same answer to the same id again: the same attempt key.
	again, _, err := r.Record(call("s1", "3", 10, false, order("o1")), b)
	require.NoError(t, err)
	first, _, err := r.Record(call("s1", "3", 11, false, order("o1")), b)
	require.NoError(t, err)
	require.Equal(t, again[0].Key, first[0].Key)
}

// TestToolCallsRefusals: what a call cannot record is an error naming the
// call and why; the recorder keeps going.
func TestToolCallsRefusals(t *testing.T) {
	b := refundBindings(t)
	r := service.NewToolCalls(0, 0)
	for name, c := range map[string]struct {
		call service.ToolCall
		msg  string
	}{
		"no agent":       {func() service.ToolCall { c := call("s", "1", 0, false, order("o")); c.Agent = ""; return c }(), "call 1 of tool refund: no agent"},
		"no id":          {call("s", "", 0, false, order("o")), "no scope or call id"},
		"no start":       {func() service.ToolCall { c := call("s", "1", 0, false, order("o")); c.Start = time.Time{}; return c }(), "no start time"},
		"no arguments":   {call("s", "2", 0, false, nil), "it carried no arguments"},
		"missing key":    {call("s", "3", 0, false, map[string]any{"amount": 1}), "no such key: order_id"},
		"NUL":            {call("s", "4", 0, false, map[string]any{"order_id": "o", "amount": 1, "note": "a\x00b"}), "NUL character"},
		"not UTF-8":      {call("s", "5", 0, false, map[string]any{"order_id": "o", "amount": 1, "note": "a\xffb"}), "not UTF-8"},
		"too large":      {call("s", "6", 0, false, map[string]any{"order_id": "o", "amount": 1, "note": strings.Repeat("x", 2<<20)}), "more than the 1048576 bytes of a POST /v1/actions body"},
		"named for OTLP": {func() service.ToolCall { c := call("s", "7", 0, false, nil); c.Name = "span 07"; return c }(), "span 07 of tool refund:"},
	} {
		recs, bound, err := r.Record(c.call, b)
		require.True(t, bound, name)
		require.Empty(t, recs, name)
		require.ErrorContains(t, err, c.msg, name)
	}
}

// TestToolCallsBounded: what the recorder keeps stays within its entries
// and bytes, whatever the calls; long ids give keys the API takes.
func TestToolCallsBounded(t *testing.T) {
	b := refundBindings(t)
	const entries, bytes = 1000, 64 << 10
	r := service.NewToolCalls(entries, bytes)
	long := strings.Repeat("s", 300)
	for i := range 20000 {
		recs, _, err := r.Record(call(long+string(rune('a'+i%26)), strings.Repeat("x", i%400)+"\n", i, i%2 == 0, order("o")), b)
		require.NoError(t, err)
		require.LessOrEqual(t, len(recs[0].Key), 255)
		require.NotContains(t, recs[0].Key, "\n")
		require.LessOrEqual(t, r.Bytes(), bytes)
	}
	require.Greater(t, r.Bytes(), bytes/2, "it keeps what it may")
}
