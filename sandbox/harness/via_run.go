package harness

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/temporal"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/llm"
	"github.com/commitlayer/commitlayer/mcpgw"
	"github.com/commitlayer/commitlayer/sandbox/agent"
	"github.com/commitlayer/commitlayer/sandbox/business"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// The via paths of a model-driven run (`commitlayer sandbox -agent llm
// -via mcp|otlp`): the harness records no action of the agent's itself.
//
//   - agent.ViaMCP: StartAgent serves the scenario's tools as an MCP server
//     (toolServer, through the agent's chaos) and puts CommitLayer's MCP
//     gateway (mcpgw, what `commitlayer mcp` runs) in front of it, over
//     Streamable HTTP on the loopback, recording through the API with the
//     scenario tenant's key. Every AgentToolCall is an MCP tools/call to
//     the gateway; the gateway records the bound ones (the sandbox
//     contracts' bindings).
//   - agent.ViaOTLP: the agent calls the tools as on the direct path, and
//     FinishAgent exports its calls as OpenTelemetry GenAI spans with the
//     SDK's OTLP/HTTP exporter to the API's POST /v1/traces.
//
// FinishAgent then finds what the API recorded for the tenant since the
// agent started (the store's list of its actions): the task's action (the
// scenario's contract on the task's subject, the earliest) and any other.
// Their verifications are the Scenario's to start, as on the direct path
// (the sandbox process's API leaves a live scenario's actions to it).
// Prior tasks (the earlier history a scenario starts from) are setup and
// are recorded by the harness as before.

// ActionLister lists a tenant's actions (*postgres.DB).
type ActionLister interface {
	ListActions(ctx context.Context, tenantID string, f commitlayer.ActionFilter) (commitlayer.ActionPage, error)
}

// viaConn is a scenario's MCP path: the tool server, the gateway and the
// agent's session with it.
type viaConn struct {
	session *mcp.ClientSession
	gateway *mcpgw.Gateway
	servers []*http.Server

	mu   sync.Mutex
	made *llm.Attempt // the tool server's attempt of the call in flight
}

// viaState is a scenario's via path while its agent runs.
type viaState struct {
	mode     string
	conn     *viaConn // agent.ViaMCP
	exported bool     // agent.ViaOTLP: the spans were accepted
	// recorded are the subjects of the actions the path recorded and ids
	// their ids (the task's first), once FinishAgent found them; main
	// says whether one was the task's.
	recorded []commitlayer.Subject
	ids      []string
	main     bool
}

// errNoAPI refuses a via run on a worker that records through no API.
var errNoAPI = temporal.NewNonRetryableApplicationError(
	"this worker has no CommitLayer API to record through (-via runs in `commitlayer sandbox`)", activities.ErrInvalidInput, nil)

// startVia opens the scenario's via path (StartAgent, l.mu held).
func (a *Activities) startVia(ctx context.Context, l *live, mode string) (*viaState, error) {
	v := &viaState{mode: mode}
	if mode != agent.ViaMCP {
		if a.API == "" || a.Actions == nil {
			return nil, errNoAPI
		}
		return v, nil
	}
	if a.API == "" || a.Actions == nil {
		return nil, errNoAPI
	}
	c, err := client.New(a.API, l.tenantKey, client.WithHTTPClient(&http.Client{Timeout: 30 * time.Second}),
		client.WithUserAgent("commitlayer-sandbox-mcp"))
	if err != nil {
		return nil, invalidInput("via mcp: the API's URL: "+err.Error(), nil)
	}
	conn := &viaConn{}
	fail := func(err error) (*viaState, error) {
		conn.close()
		return nil, err
	}
	e := l.Env.Enterprise
	tools := toolServer(&agent.Client{BaseURL: e.URL(), HTTP: &http.Client{Transport: l.AgentChaos, Timeout: clientTimeout}},
		func(at llm.Attempt) {
			conn.mu.Lock()
			conn.made = &at
			conn.mu.Unlock()
		})
	upURL, err := conn.serve(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return tools }, nil))
	if err != nil {
		return fail(fmt.Errorf("via mcp: serve the tools: %w", err))
	}
	g, err := mcpgw.New(ctx, mcpgw.Config{
		Upstream: mcpgw.Upstream{URL: upURL},
		Recorder: &mcpgw.APIRecorder{Client: c},
		Logger:   a.logger(),
		Version:  "sandbox",
		// requested_at on the enterprise's virtual clock, as the direct
		// path's: just after the last write before the call.
		Now: func() time.Time { return agent.StartTime(e.Clock()) },
	})
	if err != nil {
		return fail(fmt.Errorf("via mcp: %w", err))
	}
	conn.gateway = g
	gwURL, err := conn.serve(g.HTTPHandler())
	if err != nil {
		return fail(fmt.Errorf("via mcp: serve the gateway: %w", err))
	}
	// The agent names itself as an MCP client does: the gateway records
	// its actions under that name.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: l.Scenario.Task.AgentID, Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gwURL}, nil)
	if err != nil {
		return fail(fmt.Errorf("via mcp: connect to the gateway: %w", err))
	}
	conn.session = cs
	v.conn = conn
	return v, nil
}

// serve serves h on a loopback port and returns its URL.
func (c *viaConn) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	c.servers = append(c.servers, srv)
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

func (c *viaConn) close() {
	if c == nil {
		return
	}
	if c.session != nil {
		_ = c.session.Close()
	}
	if c.gateway != nil {
		_ = c.gateway.Close()
	}
	for _, s := range c.servers {
		_ = s.Close()
	}
}

// call makes one tool call through the gateway and answers the attempt as
// the model sees it: the tool server's (method, path, status, body), or
// the gateway's error when the call went no further.
func (c *viaConn) call(ctx context.Context, name string, raw json.RawMessage) llm.Attempt {
	c.mu.Lock()
	c.made = nil
	c.mu.Unlock()
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	res, err := c.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: raw})
	c.mu.Lock()
	made := c.made
	c.mu.Unlock()
	if err == nil && made != nil {
		return *made
	}
	args, _, _ := agent.ModelArgs(raw)
	msg := "no answer"
	switch {
	case err != nil:
		msg = err.Error()
	case res != nil:
		var texts []string
		for _, ct := range res.Content {
			if t, ok := ct.(*mcp.TextContent); ok {
				texts = append(texts, t.Text)
			}
		}
		msg = strings.Join(texts, "\n")
	}
	return llm.Attempt{Tool: name, Args: args, Error: "mcp gateway: " + msg}
}

func (v *viaState) close() {
	if v != nil {
		v.conn.close()
	}
}

// viaConn is the scenario's MCP path, nil when it has none.
func (l *Live) viaConn() *viaConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.llm == nil || l.llm.via == nil {
		return nil
	}
	return l.llm.via.conn
}

// closeVia ends the scenario's via path, if it has one.
func (l *Live) closeVia() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.llm != nil && l.llm.via != nil {
		l.llm.via.conn.close()
		l.llm.via.conn = nil
	}
}

// finishVia records the agent's actions on its path (ViaOTLP: the spans;
// ViaMCP: the gateway did as the calls went) and finds them in the store.
func (a *Activities) finishVia(ctx context.Context, in FinishAgentInput, l *live, res agent.Result) (AgentResult, error) {
	l.mu.Lock()
	v, start := l.llm.via, l.llm.start
	l.mu.Unlock()
	out := AgentResult{Claim: res.Action.Claim.Status, Calls: len(res.Trajectory.Calls)}
	if v.mode == agent.ViaOTLP && !v.exported {
		seed := sha256.Sum256([]byte(in.RunID + "\x00" + in.ScenarioID + "\x00" + in.TenantID))
		if err := exportToolCalls(ctx, a.API, l.tenantKey, l.Scenario.Task.AgentID, res.Trajectory.Calls,
			start.RequestedAt, newSeqIDs(seed)); err != nil {
			return AgentResult{}, fmt.Errorf("via otlp: %w", err)
		}
		l.mu.Lock()
		v.exported = true
		l.mu.Unlock()
	}
	page, err := a.Actions.ListActions(ctx, in.TenantID, commitlayer.ActionFilter{Since: start.RequestedAt, Limit: 200})
	if err != nil {
		return AgentResult{}, fmt.Errorf("via %s: list the recorded actions: %w", v.mode, err)
	}
	p, _ := business.Lookup(l.Scenario.Process)
	items := page.Actions
	slices.SortStableFunc(items, func(x, y commitlayer.ActionListItem) int {
		if c := x.Action.RequestedAt.Compare(y.Action.RequestedAt); c != 0 {
			return c
		}
		return strings.Compare(x.Action.ID, y.Action.ID)
	})
	mainFound := false
	var subjects []commitlayer.Subject
	var ids []string
	for _, it := range items {
		rec := it.Action
		// The Scenario starts its verification: keep the reconciler from
		// starting it first.
		if err := a.Store.VerificationStarted(ctx, in.TenantID, rec.ID); err != nil {
			return AgentResult{}, fmt.Errorf("via %s: %w", v.mode, err)
		}
		r := Recorded{Action: rec.Action, SettlesAt: rec.SettlesAt, WatchUntil: rec.WatchUntil}
		subjects = append(subjects, rec.Subject)
		if !mainFound && rec.Contract == p.Contract && rec.Subject == res.Action.Subject {
			out.Recorded, mainFound = r, true
			ids = append([]string{rec.ID}, ids...)
			continue
		}
		ids = append(ids, rec.ID)
		out.Also = append(out.Also, r)
	}
	l.mu.Lock()
	v.recorded, v.ids, v.main = subjects, ids, mainFound
	l.mu.Unlock()
	return out, nil
}

// viaRow fills in the via path of a row: who recorded, the actions, and,
// when the agent's calls recorded no action for its task, the row's
// reading of that (noActionRow).
func viaRow(l *live, row *matrix.Row) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.llm == nil || l.llm.via == nil || row.LLM == nil {
		return
	}
	v := l.llm.via
	row.LLM.Via, row.LLM.ViaActions, row.LLM.NoAction = v.mode, slices.Clone(v.ids), !v.main
}

// viaOn reports whether the scenario's agent runs on a via path.
func (l *Live) viaOn() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.llm != nil && l.llm.via != nil
}

// viaRecorded are the subjects the via path recorded actions on, and
// whether the scenario runs on one (l.mu held).
func (l *Live) viaRecorded() ([]commitlayer.Subject, bool) {
	if l.llm == nil || l.llm.via == nil {
		return nil, false
	}
	return slices.Clone(l.llm.via.recorded), true
}

// noActionVerdict is what a row reads when the via path recorded no action
// for the task: no call of a bound tool was made (the agent stopped before
// its write), so CommitLayer holds no action that claims the task's
// effects. The row reads that as outcome FAIL (the task's write was never
// made through a path CommitLayer sees) and policy PASS (nothing recorded
// broke a rule); the row says so (RowLLM.NoAction) and the results count
// such rows apart.
var noActionVerdict = commitlayer.Verdict{Status: commitlayer.StatusFail,
	Lenses: commitlayer.Lenses{Outcome: commitlayer.StatusFail, Policy: commitlayer.StatusPass}}

// errNoActionID is Judge's input without an action on a direct path.
var errNoActionID = errors.New("judge: no action id, and the run records through no via path")
