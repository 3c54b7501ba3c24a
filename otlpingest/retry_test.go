package otlpingest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/otlpingest"
)

// TestRetryChainsJoinRetriesOfAFailedSpan: a span repeating a failed
// span's action in the same trace records as it (key, hash, body); one
// that did not fail ends the chain; another trace, agent or params is an
// action of its own.
func TestRetryChainsJoinRetriesOfAFailedSpan(t *testing.T) {
	rec := func(span, agent string, amount int64) otlpingest.Recording {
		return otlpingest.Recording{Key: "otlp/t1/" + span, Hash: []byte(span), Action: commitlayer.Action{
			Contract: "refund_customer", Agent: agent, Subject: "order:o_1", Params: commitlayer.Attrs{"amount": amount}}}
	}
	call := func(trace string, failed bool) otlpingest.ToolCall {
		c := otlpingest.ToolCall{TraceID: trace, Claim: commitlayer.Claim{Status: commitlayer.ClaimSuccess}}
		if failed {
			c.Claim.Status = commitlayer.ClaimFailure
		}
		return c
	}
	rc := otlpingest.RetryChains{}
	first := rc.Join(call("t1", true), rec("s1", "a", 100))
	require.Equal(t, "otlp/t1/s1", first.Key)
	require.Equal(t, first, rc.Join(call("t1", true), rec("s2", "a", 100)), "a second failed attempt")
	require.Equal(t, first, rc.Join(call("t1", false), rec("s3", "a", 100)), "the attempt that succeeded")
	require.Equal(t, "otlp/t1/s4", rc.Join(call("t1", false), rec("s4", "a", 100)).Key, "the chain ended")

	rc.Join(call("t1", true), rec("s5", "a", 100))
	require.Equal(t, "otlp/t1/s6", rc.Join(call("t2", false), rec("s6", "a", 100)).Key, "another trace")
	require.Equal(t, "otlp/t1/s7", rc.Join(call("t1", false), rec("s7", "b", 100)).Key, "another agent")
	require.Equal(t, "otlp/t1/s8", rc.Join(call("t1", false), rec("s8", "a", 200)).Key, "other params")
	require.Equal(t, "otlp/t1/s5", rc.Join(call("t1", false), rec("s9", "a", 100)).Key, "the chain of s5 still open")
}

// TestWorkStartsBeginAtTheFirstCallSinceTheLastRecorded: an action's work
// begins at its trace's first call after the previous recorded one.
func TestWorkStartsBeginAtTheFirstCallSinceTheLastRecorded(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	at := func(trace string, s int) otlpingest.ToolCall {
		return otlpingest.ToolCall{TraceID: trace, Start: t0.Add(time.Duration(s) * time.Second)}
	}
	w := otlpingest.WorkStarts{}
	require.Equal(t, t0, w.Began(at("t1", 0)), "a read")
	require.Equal(t, t0, w.Began(at("t1", 1)), "a note")
	w.Recorded(at("t1", 2))
	require.Equal(t, t0.Add(3*time.Second), w.Began(at("t1", 3)), "after a recorded call")
	require.Equal(t, t0.Add(4*time.Second), w.Began(at("t2", 4)), "another trace")
}
