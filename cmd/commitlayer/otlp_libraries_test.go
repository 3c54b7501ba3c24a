package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/commitlayer/commitlayer"
)

const storeCreditContract = `id: store_credit
kind: action
subject: order
settlement: 1h
watch: 1h
sources: [ledger]
effects:
  - id: credit
    source: ledger
    type: store_credit_granted
    count: 1
    expect: effect.amount == params.amount
bindings:
  - tool: grant_store_credit
    subject: "'order:' + args.order_id"
    params: {amount: args.amount}
`

// exportCapture is a proxy in front of the API that keeps every export
// it passes on, and the API's answer, so a test can send one again.
type exportCapture struct {
	mu      sync.Mutex
	exports []capturedExport
}

type capturedExport struct {
	header       http.Header
	body         []byte
	status       int
	answerType   string
	answer       []byte
	authorizedBy string
}

func (c *exportCapture) proxy(t *testing.T, api string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, api+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		c.mu.Lock()
		c.exports = append(c.exports, capturedExport{header: r.Header.Clone(), body: body, status: resp.StatusCode,
			answerType: resp.Header.Get("Content-Type"), answer: answer, authorizedBy: r.Header.Get("Authorization")})
		c.mu.Unlock()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// of returns the exports sent with key.
func (c *exportCapture) of(key string) []capturedExport {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []capturedExport
	for _, e := range c.exports {
		if e.authorizedBy == "Bearer "+key {
			out = append(out, e)
		}
	}
	return out
}

// rejectedSpans reads an ExportTraceServiceResponse.
func rejectedSpans(t *testing.T, contentType string, b []byte) (int64, string) {
	resp := ptraceotlp.NewExportResponse()
	if strings.Contains(contentType, "json") {
		require.NoError(t, resp.UnmarshalJSON(b), "%s", b)
	} else {
		require.NoError(t, resp.UnmarshalProto(b))
	}
	return resp.PartialSuccess().RejectedSpans(), resp.PartialSuccess().ErrorMessage()
}

// npmLibraries installs testdata/otlp-libraries' packages into a
// temporary directory, or skips the test when npm is not there.
func npmLibraries(t *testing.T) string {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: the instrumentation libraries cannot be driven here (CI runs this test)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the instrumentation libraries cannot be driven here (CI runs this test)")
	}
	dir := t.TempDir()
	files, err := filepath.Glob("testdata/otlp-libraries/*")
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm install: %s", out)
	return dir
}

// TestTracesFromInstrumentationLibraries drives the instrumentation agents
// actually use, from npm, against an API and a worker on the dev server,
// exporting with the libraries' own exporters set up as docs/recording.md
// says: the Vercel AI SDK (its mock model; LegacyOpenTelemetry's
// ai.toolCall spans and OpenTelemetry's GenAI spans), OpenInference for
// LangChain.js (createAgent) and for the OpenAI Agents SDK, OpenLLMetry.
// Each agent looks an order up (unbound), grants a credit the ledger then
// shows, one it never shows, and one its tool fails. Each library gives one
// action per bound call with the right subject, params and agent; the
// real call PASS, the phantom FAIL; the failure claimed where the library
// exports it (OpenLLMetry never ends a failing tool's span); nothing
// rejected; every export sent again records nothing.
func TestTracesFromInstrumentationLibraries(t *testing.T) {
	dir := npmLibraries(t)
	s := newStack(t, Roles{API: true, Worker: true})
	capture := &exportCapture{}
	proxy := capture.proxy(t, s.m.URL())
	for _, lib := range []struct {
		name          string
		args, env     []string
		exportsFailed bool
	}{
		{"ai-sdk legacy", []string{"aisdk.mjs", "legacy"}, nil, true},
		{"ai-sdk genai", []string{"aisdk.mjs", "genai"}, []string{"PROTOCOL=json"}, true},
		{"openinference langchain", []string{"langchain.mjs"}, nil, true},
		{"openinference openai-agents", []string{"agents.mjs"}, []string{"PROTOCOL=json"}, true},
		{"openllmetry", []string{"traceloop.mjs"}, nil, false},
	} {
		key := s.tenant()
		s.do(key, "POST", "/v1/contracts", storeCreditContract, 201, nil)
		p := randHex(6)
		now := time.Now().UTC()
		order := func(kind string) commitlayer.Subject { return commitlayer.Subject("order:" + p + "_" + kind) }
		var opened []any
		for _, kind := range []string{"real", "phantom", "fail"} {
			opened = append(opened, fact("order_created", string(order(kind)), p+kind+"-created", now.Add(-time.Hour), map[string]any{"total": 5000}))
		}
		s.do(key, "POST", "/v1/facts", map[string]any{"facts": opened}, 200, nil)

		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, "node", lib.args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "ORDER_PREFIX="+p,
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="+proxy.URL+"/v1/traces",
			"OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20"+key,
			"TRACELOOP_BASE_URL="+proxy.URL, "TRACELOOP_API_KEY="+key)
		cmd.Env = append(cmd.Env, lib.env...)
		out, err := cmd.CombinedOutput()
		cancel()
		require.NoError(t, err, "%s: %s", lib.name, out)

		exports := capture.of(key)
		require.NotEmpty(t, exports, lib.name)
		for _, e := range exports {
			require.Equal(t, http.StatusOK, e.status, "%s: %s", lib.name, e.answer)
			rejected, msg := rejectedSpans(t, e.answerType, e.answer)
			require.Zero(t, rejected, "%s: %s", lib.name, msg)
		}

		want := map[commitlayer.Subject]struct {
			amount int64
			claim  string
		}{order("real"): {500, commitlayer.ClaimSuccess}, order("phantom"): {700, commitlayer.ClaimSuccess}}
		if lib.exportsFailed {
			want[order("fail")] = struct {
				amount int64
				claim  string
			}{900, commitlayer.ClaimFailure}
		}
		ids := s.boundActions(key, "store_credit")
		require.Len(t, ids, len(want), lib.name)
		idOf := map[commitlayer.Subject]string{}
		for _, id := range ids {
			var v actionView
			s.do(key, "GET", "/v1/actions/"+id, nil, 200, &v)
			w, ok := want[v.Action.Subject]
			require.True(t, ok, "%s: an action on %s", lib.name, v.Action.Subject)
			require.Empty(t, idOf[v.Action.Subject], "%s: one action per call", lib.name)
			idOf[v.Action.Subject] = id
			require.Equal(t, commitlayer.Attrs{"amount": w.amount}, v.Action.Params, lib.name)
			require.Equal(t, "support-agent", v.Action.Agent, lib.name)
			require.Equal(t, w.claim, v.Action.Claim.Status, "%s: %s", lib.name, v.Action.Subject)
		}

		// The ledger shows the real credit, never the phantom.
		s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{
			fact("store_credit_granted", string(order("real")), p+"-credit", time.Now().UTC(), map[string]any{"amount": 500}),
		}}, 200, nil)
		s.waitVerdict(key, idOf[order("real")], time.Minute, func(h []commitlayer.Verdict) bool {
			return len(h) > 0 && h[len(h)-1].Status == commitlayer.StatusPass
		})
		h := s.waitVerdict(key, idOf[order("phantom")], time.Minute, func(h []commitlayer.Verdict) bool { return len(h) > 0 })
		require.Equal(t, commitlayer.StatusFail, h[0].Status, "%s: %+v", lib.name, h[0])

		// An exporter's retry of every export: answered, nothing new.
		for _, e := range exports {
			req, err := http.NewRequest("POST", s.m.URL()+"/v1/traces", bytes.NewReader(e.body))
			require.NoError(t, err)
			req.Header = e.header.Clone()
			resp, err := s.http.Do(req)
			require.NoError(t, err)
			answer, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", lib.name, answer)
			rejected, msg := rejectedSpans(t, resp.Header.Get("Content-Type"), answer)
			require.Zero(t, rejected, "%s: %s", lib.name, msg)
		}
		require.Len(t, s.boundActions(key, "store_credit"), len(want), "%s: a resent export records nothing", lib.name)
		t.Logf("%s: %d exports, %d actions, real PASS, phantom FAIL, resent: nothing new", lib.name, len(exports), len(want))
	}
}
