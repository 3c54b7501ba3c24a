package sinks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/sinks"
	"github.com/commitlayer/commitlayer/sandbox/sinks/sinkstest"
)

const testKey = "sk-test-7f3a9c1e-DO-NOT-LEAK"

var testRun = matrix.Results{
	ID: "bench-20261130-1", Commit: "bcaee90343c4024a0f816fe72f100e881a30a9b9",
	StartedAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), PaymentsBackend: "sandbox",
	Figures: map[string]float64{"agree_both": 1},
}

// testRows are n rows: even ones a phantom success the rule judge passed,
// odd ones a true pass.
func testRows(n int) []matrix.Row {
	var rows []matrix.Row
	for i := range n {
		r := matrix.Row{
			ID: fmt.Sprintf("refund/case_%d", i), Process: "refund", Injection: fmt.Sprintf("case_%d", i),
			Family:     "transport",
			Trajectory: &llm.Trajectory{Instruction: fmt.Sprintf("refund o_%d", i), Calls: []llm.Attempt{{Tool: "refund", Status: 200}}},
			LatencyMS:  150 + float64(i), WorkflowID: fmt.Sprintf("scenario/%d", i), RunID: "r1",
			Agree: matrix.Agree{Outcome: true, Policy: true},
		}
		if i%2 == 0 {
			r.Truth = matrix.Truth{Outcome: "FAIL", Policy: "PASS", Knowable: true}
			r.Verdict = matrix.Verdict{Status: "FAIL", ProvisionalStatus: "FAIL", Lenses: commitlayer.Lenses{Outcome: "FAIL", Policy: "PASS"},
				Findings: []commitlayer.Finding{{Code: "effect_missing", Check: "refund", Lens: "outcome", Message: "no refund"}}}
			r.Judges = []matrix.JudgeVerdict{{Name: "rule", Verdict: "PASS", Reason: "refund answered 200"}}
		} else {
			r.Truth = matrix.Truth{Outcome: "PASS", Policy: "PASS", Knowable: true}
			r.Verdict = matrix.Verdict{Status: "PASS", ProvisionalStatus: "PASS", Lenses: commitlayer.Lenses{Outcome: "PASS", Policy: "PASS"}}
			r.Judges = []matrix.JudgeVerdict{{Name: "rule", Verdict: "PASS", Reason: "refund answered 200"}}
		}
		rows = append(rows, r)
	}
	return rows
}

func fastOptions(url string, logger *slog.Logger) sinks.Options {
	return sinks.Options{APIKey: testKey, BaseURL: url, BatchSize: 3, RequestTimeout: 2 * time.Second,
		Deadline: 10 * time.Second, Retry: sinks.Retry{Attempts: 4, Base: time.Millisecond, Max: 5 * time.Millisecond},
		Logger: logger}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestBraintrustDelivers(t *testing.T) {
	fake := sinkstest.NewBraintrust(testKey)
	defer fake.Close()
	bt, err := sinks.NewBraintrust(fastOptions(fake.URL, discard()), "")
	require.NoError(t, err)

	rows := testRows(7)
	rep := bt.Deliver(t.Context(), testRun, rows)
	require.Empty(t, fake.Problems())
	require.True(t, rep.OK(), rep.String())
	require.Equal(t, 7, rep.Delivered)
	// find project, create project, create experiment, 3 batches.
	require.Equal(t, 6, fake.Requests())

	exps := fake.Experiments()
	require.Len(t, exps, 1)
	require.Equal(t, "commitlayer bench-20261130-1", exps[0].Name)
	require.Equal(t, rep.Experiment, exps[0].ID)
	require.Equal(t, "sandbox", exps[0].Metadata["payments"])
	require.Len(t, exps[0].Events, 7)

	ev := exps[0].Events["refund/case_0"]
	require.NotNil(t, ev)
	in := ev["input"].(map[string]any)
	require.Equal(t, "refund/case_0", in["scenario"])
	require.Equal(t, "refund o_0", in["trajectory"].(map[string]any)["instruction"])
	require.Equal(t, map[string]any{"status": "FAIL", "outcome": "FAIL", "policy": "PASS", "knowable": true}, ev["expected"])
	out := ev["output"].(map[string]any)
	require.Equal(t, "FAIL", out["status"])
	require.Len(t, out["findings"], 1)
	require.Equal(t, map[string]any{"commitlayer_agrees": 1.0, "judge_agrees:rule": 0.0}, ev["scores"])
	meta := ev["metadata"].(map[string]any)
	require.Equal(t, "transport", meta["family"])
	require.Equal(t, "scenario/0", meta["temporal_workflow_id"])
	require.Equal(t, "PASS", meta["judges"].([]any)[0].(map[string]any)["verdict"])
	require.Equal(t, map[string]any{"commitlayer_agrees": 1.0, "judge_agrees:rule": 1.0}, exps[0].Events["refund/case_1"]["scores"])

	// Delivering again lands in the same project and experiment, replacing
	// the rows by id.
	rep = bt.Deliver(t.Context(), testRun, rows)
	require.True(t, rep.OK(), rep.String())
	exps = fake.Experiments()
	require.Len(t, exps, 1)
	require.Len(t, exps[0].Events, 7)
}

func TestLangSmithDelivers(t *testing.T) {
	fake := sinkstest.NewLangSmith(testKey)
	defer fake.Close()
	ls, err := sinks.NewLangSmith(fastOptions(fake.URL+"/api/v1/", discard()), "")
	require.NoError(t, err)

	rows := testRows(7)
	rep := ls.Deliver(t.Context(), testRun, rows)
	require.Empty(t, fake.Problems())
	require.True(t, rep.OK(), rep.String())
	require.Equal(t, 7, rep.Delivered)
	require.Equal(t, 14, rep.Scores)
	require.Equal(t, 14, rep.ScoresDelivered)

	sessions := fake.Sessions()
	require.Len(t, sessions, 1)
	require.Equal(t, "commitlayer bench-20261130-1", sessions[0].Name)
	runs := fake.Runs()
	require.Len(t, runs, 7)
	var first map[string]any
	for _, r := range runs {
		require.Equal(t, sessions[0].ID, r["session_id"])
		require.Equal(t, "chain", r["run_type"])
		if r["name"] == "refund/case_0" {
			first = r
		}
	}
	require.NotNil(t, first)
	require.Equal(t, "refund o_0", first["inputs"].(map[string]any)["trajectory"].(map[string]any)["instruction"])
	require.Equal(t, "FAIL", first["outputs"].(map[string]any)["verdict"].(map[string]any)["status"])
	require.Equal(t, "FAIL", first["extra"].(map[string]any)["metadata"].(map[string]any)["expected"].(map[string]any)["status"])

	fb := fake.Feedback()
	require.Len(t, fb, 14)
	scores := map[string]float64{}
	for _, f := range fb {
		if f["run_id"] == first["id"] {
			scores[f["key"].(string)] = f["score"].(float64)
			require.Equal(t, first["trace_id"], f["trace_id"])
		}
	}
	require.Equal(t, map[string]float64{"commitlayer_agrees": 1, "judge_agrees:rule": 0}, scores)

	// Again: same session, same run and feedback ids.
	rep = ls.Deliver(t.Context(), testRun, rows)
	require.True(t, rep.OK(), rep.String())
	require.Len(t, fake.Sessions(), 1)
	require.Len(t, fake.Runs(), 7)
	require.Len(t, fake.Feedback(), 14)
}

// fake is what the fault tests need of either fake.
type fake interface {
	FailNext(n, status int, body string)
	FailAt(nth, status int, body string)
	Stall(d time.Duration)
	Requests() int
	Problems() []string
	Close()
}

type target struct {
	name  string
	start func(key string) (fake, string)
	sink  func(o sinks.Options) (sinks.Sink, error)
}

var targets = []target{
	{"braintrust",
		func(key string) (fake, string) { f := sinkstest.NewBraintrust(key); return f, f.URL },
		func(o sinks.Options) (sinks.Sink, error) { return sinks.NewBraintrust(o, "") }},
	{"langsmith",
		func(key string) (fake, string) { f := sinkstest.NewLangSmith(key); return f, f.URL },
		func(o sinks.Options) (sinks.Sink, error) { return sinks.NewLangSmith(o, "") }},
}

func TestFaults(t *testing.T) {
	for _, tg := range targets {
		for _, tc := range []struct {
			name   string
			setup  func(f fake, o *sinks.Options)
			ok     bool
			reason string
			// maxRequests bounds the requests when the sink must give up
			// early (0: no bound).
			maxRequests int
		}{
			{name: "recovers after 503s", setup: func(f fake, o *sinks.Options) { f.FailNext(2, http.StatusServiceUnavailable, "busy") }, ok: true},
			{name: "recovers after 429", setup: func(f fake, o *sinks.Options) { f.FailNext(3, http.StatusTooManyRequests, "slow down") }, ok: true},
			{name: "down", setup: func(f fake, o *sinks.Options) { f.FailNext(1000, http.StatusBadGateway, "upstream gone") },
				reason: "HTTP 502: upstream gone", maxRequests: 4},
			{name: "rejects the key: no retry", setup: func(f fake, o *sinks.Options) { f.FailNext(1000, http.StatusUnauthorized, "bad key") },
				reason: "HTTP 401: bad key", maxRequests: 1},
			{name: "stalls past the request timeout", setup: func(f fake, o *sinks.Options) {
				f.Stall(time.Second)
				o.RequestTimeout = 20 * time.Millisecond
				o.Retry.Attempts = 2
			}, reason: "Client.Timeout", maxRequests: 2},
			{name: "stalls past the deadline", setup: func(f fake, o *sinks.Options) {
				f.Stall(5 * time.Second)
				o.Deadline = 100 * time.Millisecond
			}, reason: "context deadline exceeded", maxRequests: 1},
		} {
			t.Run(tg.name+"/"+tc.name, func(t *testing.T) {
				f, url := tg.start(testKey)
				defer f.Close()
				o := fastOptions(url, discard())
				tc.setup(f, &o)
				s, err := tg.sink(o)
				require.NoError(t, err)
				rows := testRows(4)
				began := time.Now()
				rep := s.Deliver(t.Context(), testRun, rows)
				require.Less(t, time.Since(began), 3*time.Second, "Deliver must not block")
				require.Empty(t, f.Problems())
				require.Equal(t, 4, rep.Rows)
				if tc.ok {
					require.True(t, rep.OK(), rep.String())
					return
				}
				require.False(t, rep.OK())
				require.Equal(t, 0, rep.Delivered)
				require.Equal(t, rep.Rows+rep.Scores, rep.Missing())
				require.NotEmpty(t, rep.Reasons)
				require.Contains(t, strings.Join(rep.Reasons, "\n"), tc.reason)
				if tc.maxRequests > 0 {
					require.LessOrEqual(t, f.Requests(), tc.maxRequests)
				}
			})
		}
	}
}

// A batch that fails for good leaves the other batches delivered.
func TestPartialDelivery(t *testing.T) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			f, url := tg.start(testKey)
			defer f.Close()
			o := fastOptions(url, discard())
			o.Retry.Attempts = 1
			s, err := tg.sink(o)
			require.NoError(t, err)
			// The first batch follows the setup requests: 3 for Braintrust
			// (find and create project, create experiment), 1 for LangSmith.
			firstBatch := map[string]int{"braintrust": 4, "langsmith": 2}[tg.name]
			f.FailAt(firstBatch, http.StatusInternalServerError, "disk full")
			rep := s.Deliver(t.Context(), testRun, testRows(7))
			require.Empty(t, f.Problems())
			require.Equal(t, 7, rep.Rows)
			require.Equal(t, 4, rep.Delivered, rep.String())
			if tg.name == "langsmith" {
				// Feedback goes only to runs that arrived.
				require.Equal(t, 14, rep.Scores)
				require.Equal(t, 8, rep.ScoresDelivered)
			}
			require.Len(t, rep.Reasons, 1)
			require.Contains(t, rep.Reasons[0], "HTTP 500: disk full")
		})
	}
}

// The key never appears in a report, an error or a log line, even when a
// server echoes it back.
func TestKeyNeverLeaks(t *testing.T) {
	for _, tg := range targets {
		for _, status := range []int{http.StatusInternalServerError, http.StatusBadRequest, http.StatusUnauthorized} {
			t.Run(fmt.Sprintf("%s/%d", tg.name, status), func(t *testing.T) {
				f, url := tg.start(testKey)
				defer f.Close()
				var logs bytes.Buffer
				o := fastOptions(url, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
				f.FailNext(1000, status, "invalid key "+testKey+" (Bearer "+testKey+")")
				s, err := tg.sink(o)
				require.NoError(t, err)
				rep := s.Deliver(t.Context(), testRun, testRows(2))
				require.False(t, rep.OK())
				js, err := json.Marshal(rep)
				require.NoError(t, err)
				require.Contains(t, string(js), "[redacted]")
				for what, text := range map[string]string{"report": rep.String(), "report JSON": string(js), "logs": logs.String()} {
					require.NotContains(t, text, testKey, what)
					require.NotContains(t, text, "DO-NOT-LEAK", what)
				}
				require.NotEmpty(t, logs.String())
			})
		}
	}
	// Nor in configuration errors.
	_, err := sinks.NewBraintrust(sinks.Options{APIKey: testKey, BaseURL: "ftp://example.invalid"}, "")
	require.Error(t, err)
	require.NotContains(t, err.Error(), testKey)
	_, err = sinks.FromEnv([]string{"langsmith"}, func(k string) string {
		return map[string]string{sinks.EnvLangSmithKey: testKey, sinks.EnvLangSmithURL: "::bad"}[k]
	}, discard())
	require.Error(t, err)
	require.NotContains(t, err.Error(), testKey)
}

func TestFromEnv(t *testing.T) {
	env := map[string]string{
		sinks.EnvBraintrustKey: "bt-key", sinks.EnvBraintrustURL: "http://127.0.0.1:1",
		sinks.EnvLangSmithKey: "ls-key", sinks.EnvLangSmithURL: "http://127.0.0.1:2/api/v1",
	}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		list  string
		names []string
		err   string
	}{
		{list: "", names: nil},
		{list: "braintrust", names: []string{"braintrust"}},
		{list: " langsmith , braintrust,langsmith", names: []string{"langsmith", "braintrust"}},
		{list: "braintrust,weave", err: `unknown sink "weave"`},
	} {
		t.Run(tc.list, func(t *testing.T) {
			names, err := sinks.ParseNames(tc.list)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.names, names)
			ss, err := sinks.FromEnv(names, getenv, discard())
			require.NoError(t, err)
			require.Len(t, ss, len(names))
			for i, s := range ss {
				require.Equal(t, names[i], s.Name())
			}
		})
	}
	_, err := sinks.FromEnv([]string{"braintrust"}, func(string) string { return "" }, discard())
	require.ErrorContains(t, err, "BRAINTRUST_API_KEY")
	_, err = sinks.FromEnv([]string{"langsmith"}, func(string) string { return "" }, discard())
	require.ErrorContains(t, err, "LANGSMITH_API_KEY")
}

func TestScores(t *testing.T) {
	fail := matrix.Truth{Outcome: "FAIL", Policy: "PASS", Knowable: true}
	pass := matrix.Truth{Outcome: "PASS", Policy: "PASS", Knowable: true}
	both := matrix.Agree{Outcome: true, Policy: true}
	for _, tc := range []struct {
		name string
		row  matrix.Row
		want map[string]float64
	}{
		{"both agree, judge misses a failure",
			matrix.Row{Truth: fail, Agree: both, Judges: []matrix.JudgeVerdict{{Name: "rule", Verdict: "PASS"}, {Name: "model", Verdict: "FAIL"}}},
			map[string]float64{"commitlayer_agrees": 1, "judge_agrees:rule": 0, "judge_agrees:model": 1}},
		{"a lens disagrees", matrix.Row{Truth: pass, Agree: matrix.Agree{Outcome: true}, Judges: []matrix.JudgeVerdict{{Name: "rule", Verdict: "PASS"}}},
			map[string]float64{"commitlayer_agrees": 0, "judge_agrees:rule": 1}},
		{"an error row never agrees", matrix.Row{Truth: pass, Agree: both, Error: "boom"},
			map[string]float64{"commitlayer_agrees": 0}},
		{"an UNKNOWN judge does not agree", matrix.Row{Truth: pass, Agree: both, Judges: []matrix.JudgeVerdict{{Name: "model", Verdict: "UNKNOWN"}}},
			map[string]float64{"commitlayer_agrees": 1, "judge_agrees:model": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, sinks.Scores(tc.row)) })
	}
}

func TestDeliverAll(t *testing.T) {
	bt := sinkstest.NewBraintrust(testKey)
	defer bt.Close()
	ls := sinkstest.NewLangSmith(testKey)
	defer ls.Close()
	ls.FailNext(1000, http.StatusServiceUnavailable, "maintenance")
	b, err := sinks.NewBraintrust(fastOptions(bt.URL, discard()), "")
	require.NoError(t, err)
	l, err := sinks.NewLangSmith(fastOptions(ls.URL, discard()), "")
	require.NoError(t, err)
	reps := sinks.DeliverAll(context.Background(), []sinks.Sink{b, l}, testRun, testRows(3))
	require.Len(t, reps, 2)
	require.True(t, reps[0].OK(), reps[0].String())
	require.False(t, reps[1].OK())
	require.Equal(t, "langsmith: 0/3 rows, 0/6 scores (langsmith create session: HTTP 503: maintenance (4 attempts))", reps[1].String())
}

func TestLangSmithWorkspace(t *testing.T) {
	fake := sinkstest.NewLangSmith(testKey)
	defer fake.Close()
	fake.RequireWorkspace("ws-42")
	for _, tc := range []struct {
		workspace string
		ok        bool
	}{{"ws-42", true}, {"", false}, {"ws-1", false}} {
		t.Run(tc.workspace, func(t *testing.T) {
			ls, err := sinks.NewLangSmith(fastOptions(fake.URL, discard()), tc.workspace)
			require.NoError(t, err)
			rep := ls.Deliver(t.Context(), testRun, testRows(2))
			require.Equal(t, tc.ok, rep.OK(), rep.String())
			if !tc.ok {
				require.Contains(t, strings.Join(rep.Reasons, ""), "HTTP 403")
			}
		})
	}
}
