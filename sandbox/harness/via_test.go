package harness

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/mcpgw"
	"github.com/commitlayer/commitlayer/otlpingest"
	"github.com/commitlayer/commitlayer/sandbox"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/business"
	sandboxcontracts "github.com/commitlayer/commitlayer/sandbox/contracts"
	"github.com/commitlayer/commitlayer/service"
)

func sandboxBindings(t *testing.T) *contracts.Bindings {
	t.Helper()
	entries, err := sandboxcontracts.FS.ReadDir(".")
	require.NoError(t, err)
	var cs []*contracts.Contract
	for _, e := range entries {
		src, err := sandboxcontracts.FS.ReadFile(e.Name())
		require.NoError(t, err)
		c, err := contracts.Parse(src)
		require.NoError(t, err, e.Name())
		cs = append(cs, c)
	}
	return contracts.NewBindings(cs)
}

// viaRecorder is the gateway's Recorder keeping the actions in memory.
type viaRecorder struct {
	b       *contracts.Bindings
	mu      sync.Mutex
	actions []commitlayer.Action
}

func (r *viaRecorder) Bindings(context.Context) (*contracts.Bindings, error) { return r.b, nil }

func (r *viaRecorder) Record(_ context.Context, a commitlayer.Action, _ string, _ bool, _ time.Duration) (client.Accepted, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.actions = append(r.actions, a)
	return client.Accepted{ID: "act_via"}, nil
}

func (r *viaRecorder) RecordAttempt(context.Context, string, string, commitlayer.Claim, json.RawMessage, bool, time.Duration) (client.Accepted, error) {
	return client.Accepted{ID: "act_via"}, nil
}

func (r *viaRecorder) take() []commitlayer.Action {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.actions
	r.actions = nil
	return out
}

// direct is what the harness records itself, without the ticket_id it
// adds from the task (no sandbox contract reads it; a tool call does not
// carry it).
func direct(a commitlayer.Action) (string, commitlayer.Subject, commitlayer.Attrs) {
	p := commitlayer.Attrs{}
	for k, v := range a.Params {
		if k != "ticket_id" {
			p[k] = v
		}
	}
	return a.Contract, a.Subject, p
}

// TestViaMCPAndOTLPAgreeWithDirect: for each of the eight processes, the
// scripted agent runs the task on an enterprise and the harness's own
// action is noted. Its tool calls are then made again on a fresh
// enterprise through toolServer behind CommitLayer's MCP gateway, and sent
// as spans with the OpenTelemetry SDK's exporter to the trace ingest's
// decoding: with the sandbox contracts' bindings, both paths record the
// same action (contract, subject, params) as the harness, and nothing for
// the reads and the other writes.
func TestViaMCPAndOTLPAgreeWithDirect(t *testing.T) {
	b := sandboxBindings(t)
	rec := &viaRecorder{b: b}

	var spans struct {
		sync.Mutex
		recs []service.Recording
		errs []error
	}
	ingest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		spans.Lock()
		defer spans.Unlock()
		fail := func(err error) {
			spans.errs = append(spans.errs, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer cl_tenant_key" {
			fail(errors.New("authorization: " + got))
			return
		}
		enc, err := otlpingest.EncodingOf(r.Header.Get("Content-Type"))
		if err != nil {
			fail(err)
			return
		}
		td, err := otlpingest.Read(r.Body, enc, r.Header.Get("Content-Encoding"), 8<<20)
		if err != nil {
			fail(err)
			return
		}
		calls, _ := otlpingest.ToolCalls(td, b.Bound)
		for _, c := range calls {
			recs, _, err := otlpingest.Record(c, service.NewToolCalls(0, 0), b)
			spans.recs = append(spans.recs, recs...)
			if err != nil {
				spans.errs = append(spans.errs, err)
			}
		}
		out, err := otlpingest.Response(enc, 0, "")
		if err != nil {
			fail(err)
			return
		}
		w.Header().Set("Content-Type", enc.ContentType())
		_, _ = w.Write(out)
	}))
	t.Cleanup(ingest.Close)

	ctx := context.Background()
	for _, p := range business.All() {
		t.Run(p.Name, func(t *testing.T) {
			base := p.Base()
			task := agent.Task{Process: p.Name, Subject: base.Subject, TicketID: base.Ticket, Params: base.Params, AgentID: "agent-1"}

			e1, err := sandbox.New(ctx, t.TempDir(), sandbox.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = e1.Close() })
			res, err := agent.NewScripted(e1.URL(), nil, e1.Clock(), agent.Profile{}).Run(ctx, task)
			require.NoError(t, err)
			require.Equal(t, commitlayer.ClaimSuccess, res.Action.Claim.Status, "%+v", res.Trajectory)
			contract, subject, params := direct(res.Action)

			// MCP: the same calls through the gateway, on a fresh enterprise.
			e2, err := sandbox.New(ctx, t.TempDir(), sandbox.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = e2.Close() })
			tools := toolServer(&agent.Client{BaseURL: e2.URL()}, nil)
			up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return tools }, nil))
			t.Cleanup(up.Close)
			g, err := mcpgw.New(ctx, mcpgw.Config{Recorder: rec, Upstream: mcpgw.Upstream{URL: up.URL}})
			require.NoError(t, err)
			t.Cleanup(func() { _ = g.Close() })
			gw := httptest.NewServer(g.HTTPHandler())
			t.Cleanup(gw.Close)
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent-1", Version: "1"}, nil).
				Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gw.URL}, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = cs.Close() })
			for _, c := range res.Trajectory.Calls {
				args, err := json.Marshal(c.Args)
				require.NoError(t, err)
				r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.Tool, Arguments: json.RawMessage(args)})
				require.NoError(t, err)
				require.False(t, r.IsError, "%s: %v", c.Tool, r.Content)
			}
			got := rec.take()
			require.Len(t, got, 1, "one action: the process's write (%s)", p.Write.Tool)
			require.Equal(t, contract, got[0].Contract)
			require.Equal(t, subject, got[0].Subject)
			require.Equal(t, params, got[0].Params)
			require.Equal(t, "agent-1", got[0].Agent)
			require.Equal(t, commitlayer.ClaimSuccess, got[0].Claim.Status)

			// OTLP: the first run's calls as spans, with the SDK's exporter.
			start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			require.NoError(t, exportToolCalls(ctx, ingest.URL, "cl_tenant_key", "agent-1", res.Trajectory.Calls, start, nil))
			spans.Lock()
			recs, errs := spans.recs, spans.errs
			spans.recs, spans.errs = nil, nil
			spans.Unlock()
			require.Empty(t, errs)
			require.Len(t, recs, 1)
			a := recs[0].Action
			require.Equal(t, contract, a.Contract)
			require.Equal(t, subject, a.Subject)
			require.Equal(t, params, a.Params)
			require.Equal(t, "agent-1", a.Agent, "from the invoke_agent parent in the same export")
			require.Equal(t, commitlayer.ClaimSuccess, a.Claim.Status)
			require.False(t, a.RequestedAt.Before(start))
		})
	}
}
