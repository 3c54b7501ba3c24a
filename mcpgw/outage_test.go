package mcpgw_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/mcpgw"
)

// TestUpstreamCommandExits: the upstream process dies during a call. The
// agent gets a tool error naming the upstream; calls while it is gone get
// one at once (a bound call is still recorded, claiming failure); the
// gateway starts the command again and calls go through.
func TestUpstreamCommandExits(t *testing.T) {
	t.Setenv(upstreamEnv, "1")
	rec := newFakeRecorder(t)
	g := newGateway(t, mcpgw.Config{Recorder: rec, Upstream: mcpgw.Upstream{Command: []string{os.Args[0], "-test.run=^$"}}}, &syncBuffer{})
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close)
	cs := agentSession(t, srv.URL, "agent", nil)
	ctx := context.Background()

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "crash"})
	require.NoError(t, err, "the agent's session outlives the upstream's")
	require.True(t, res.IsError)
	require.Contains(t, text(t, res)[0], "upstream MCP server")

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "o_down", "amount": 5, "currency": "USD"}})
	require.NoError(t, err)
	if res.IsError { // the upstream was still down: recorded as a failed call
		actions, _ := rec.recorded()
		require.Len(t, actions, 1, "only the arguments' binding: there is no result")
		require.Equal(t, commitlayer.ClaimFailure, actions[0].Claim.Status)
	}
	require.Eventually(t, func() bool {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_order", Arguments: map[string]any{"order_id": "o_1"}})
		return err == nil && !res.IsError && text(t, res)[0] == `{"status":"paid"}`
	}, 20*time.Second, 100*time.Millisecond, "the gateway runs the command again")
}

// TestUpstreamHTTPDownAndBack: the HTTP upstream goes away (its sessions
// with it) and comes back on the same address: calls in between are tool
// errors, then the gateway's new session serves them.
func TestUpstreamHTTPDownAndBack(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	start := func(l net.Listener) *httptest.Server {
		up := upstreamServer(nil)
		s := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
		s.Listener.Close()
		s.Listener = l
		s.Start()
		return s
	}
	upSrv := start(ln)
	rec := newFakeRecorder(t)
	logs := &syncBuffer{}
	g := newGateway(t, mcpgw.Config{Recorder: rec, Upstream: mcpgw.Upstream{URL: "http://" + addr + "/mcp?token=up-secret-123"}}, logs)
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close)
	cs := agentSession(t, srv.URL, "agent", nil)
	ctx := context.Background()
	call := func() *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_order", Arguments: map[string]any{"order_id": "o_1"}})
		require.NoError(t, err)
		return res
	}
	require.False(t, call().IsError)

	upSrv.CloseClientConnections()
	upSrv.Close()
	res := call()
	require.True(t, res.IsError)
	require.Contains(t, text(t, res)[0], "upstream MCP server")
	require.NotContains(t, text(t, res)[0], "up-secret-123", "the upstream URL's query is not told")

	ln2, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	upSrv = start(ln2)
	t.Cleanup(func() { // the gateway's stream to it is still open
		upSrv.CloseClientConnections()
		upSrv.Close()
	})
	require.Eventually(t, func() bool { return !call().IsError }, 30*time.Second, 200*time.Millisecond,
		"the gateway opens a new session once the upstream is back")
	require.Contains(t, logs.String(), "upstream session lost")
	require.NotContains(t, logs.String(), "up-secret-123")
}

// flakyRecorder fails (as a down API does) until up is set, and can hang
// (a slow API) until its context ends.
type flakyRecorder struct {
	*fakeRecorder
	mu    sync.Mutex
	up    bool
	hang  bool
	tries int
}

func (f *flakyRecorder) Record(ctx context.Context, a commitlayer.Action, key string, wait bool, d time.Duration) (client.Accepted, error) {
	f.mu.Lock()
	up, hang := f.up, f.hang
	f.tries++
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return client.Accepted{}, fmt.Errorf("record action: %w", ctx.Err())
	}
	if !up {
		return client.Accepted{}, fmt.Errorf("record action: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	}
	return f.fakeRecorder.Record(ctx, a, key, wait, d)
}

func (f *flakyRecorder) set(up, hang bool) {
	f.mu.Lock()
	f.up, f.hang = up, hang
	f.mu.Unlock()
}

// TestCommitLayerDown: CommitLayer's API down or slow never changes what
// the agent is told of its call (a refund that happened is not reported
// as failed) nor keeps it waiting past RecordTimeout; with -wait the result
// says the call could not be verified. The actions are posted again, under
// their keys, once the API is back: none lost, none twice.
func TestCommitLayerDown(t *testing.T) {
	rec := &flakyRecorder{fakeRecorder: newFakeRecorder(t)}
	g, _, url, logs := rawGateway(t, mcpgw.Config{Recorder: rec, RecordTimeout: 300 * time.Millisecond})
	sid := rawInitialize(t, url)

	a := rawReq(t, "POST", url, sid, "2025-06-18", callBody("1", "refund", `{"order_id":"o_api","amount":5,"currency":"USD"}`))
	require.Contains(t, string(a.response(t, "1").Result), "re_o_api")
	require.NotContains(t, string(a.response(t, "1").Result), `"isError":true`)
	require.Equal(t, 2, g.Pending(), "both bindings' actions wait for the API")

	rec.set(false, true) // slow: hangs
	began := time.Now()
	a = rawReq(t, "POST", url, sid, "2025-06-18", callBody("2", "refund", `{"order_id":"o_slow","amount":5,"currency":"USD"}`))
	require.Contains(t, string(a.response(t, "2").Result), "re_o_slow")
	require.Less(t, time.Since(began), 5*time.Second, "the agent waits RecordTimeout per action at most")
	require.Equal(t, 4, g.Pending())

	rec.set(true, false)
	require.Eventually(t, func() bool { return g.Pending() == 0 }, 30*time.Second, 100*time.Millisecond)
	actions, keys := rec.recorded()
	require.Len(t, actions, 4)
	for _, k := range keys {
		require.True(t, strings.HasPrefix(k, "mcp/"+sid+"/"), k)
	}
	// A retry of the first call now records nothing new.
	rawReq(t, "POST", url, sid, "2025-06-18", callBody("1", "refund", `{"order_id":"o_api","amount":5,"currency":"USD"}`))
	actions, _ = rec.recorded()
	require.Len(t, actions, 4)
	require.Contains(t, logs.String(), "posting it again in the background")
	require.Contains(t, logs.String(), "recorded after retries")
}

// TestCommitLayerDownWithWait: with -wait, a call whose verdict could not
// be had says so in the result, after the upstream's own content.
func TestCommitLayerDownWithWait(t *testing.T) {
	rec := &flakyRecorder{fakeRecorder: newFakeRecorder(t)}
	g, _, url, _ := rawGateway(t, mcpgw.Config{Recorder: rec, Wait: true, WaitTimeout: 200 * time.Millisecond, RecordTimeout: 200 * time.Millisecond})
	sid := rawInitialize(t, url)
	a := rawReq(t, "POST", url, sid, "2025-06-18", callBody("1", "refund", `{"order_id":"o_w","amount":5,"currency":"USD"}`))
	res := string(a.response(t, "1").Result)
	require.Contains(t, res, "re_o_w")
	require.Contains(t, res, "could not be verified yet")
	require.NotContains(t, res, `"isError":true`)

	// Close makes a last attempt: the API is back, nothing is left owed.
	rec.set(true, false)
	require.NoError(t, g.Close())
	require.Equal(t, 0, g.Pending())
	actions, _ := rec.recorded()
	require.Len(t, actions, 2)
}

// TestCommandUpstreamProgress: over a command upstream too, the upstream
// sees a token of the gateway's and the agent gets every notification with
// its own token, before the answer; two agents using the same token each
// get their own.
func TestCommandUpstreamProgress(t *testing.T) {
	t.Setenv(upstreamEnv, "1")
	g := newGateway(t, mcpgw.Config{Recorder: newFakeRecorder(t), Upstream: mcpgw.Upstream{Command: []string{os.Args[0], "-test.run=^$"}}}, &syncBuffer{})
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mu sync.Mutex
			var got []float64
			c := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprint("agent-", i), Version: "1"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					defer mu.Unlock()
					if r.Params.ProgressToken == "same" {
						got = append(got, r.Params.Progress)
					}
				},
			})
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
			require.NoError(t, err)
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "progress", Meta: mcp.Meta{"progressToken": "same"}})
			require.NoError(t, err)
			require.NotEqual(t, "token=same", text(t, res)[0], "the upstream sees the gateway's token")
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(got) == 3
			}, 10*time.Second, 10*time.Millisecond)
			mu.Lock()
			require.Equal(t, []float64{1, 2, 3}, got)
			mu.Unlock()
		}()
	}
	wg.Wait()
}

// TestUpstreamBackKeepsSubscriptions: an agent's resource subscription
// outlives the upstream's restart: the gateway subscribes its new session
// again and the agent keeps getting updates.
func TestUpstreamBackKeepsSubscriptions(t *testing.T) {
	up, first := newRichUpstream(t)
	first.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	serve := func(l net.Listener) *http.Server {
		s := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.server }, nil)}
		go func() { _ = s.Serve(l) }()
		return s
	}
	upSrv := serve(ln)
	g := newGateway(t, mcpgw.Config{Recorder: newFakeRecorder(t), Upstream: mcpgw.Upstream{URL: "http://" + addr}}, &syncBuffer{})
	srv := httptest.NewServer(g.HTTPHandler())
	t.Cleanup(srv.Close)
	updates := make(chan string, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "sub-agent", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updates <- r.Params.URI },
	})
	ctx := context.Background()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	require.NoError(t, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "file:///doc2.txt"}))

	require.NoError(t, upSrv.Close()) // the upstream and its sessions go away
	ln2, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	upSrv = serve(ln2)
	t.Cleanup(func() { _ = upSrv.Close() })
	require.Eventually(t, func() bool {
		_ = up.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "file:///doc2.txt"})
		select {
		case uri := <-updates:
			return uri == "file:///doc2.txt"
		case <-time.After(200 * time.Millisecond):
			return false
		}
	}, 30*time.Second, 10*time.Millisecond, "the subscription holds across the upstream's restart")
}

// panicRecorder panics when it records.
type panicRecorder struct{ *fakeRecorder }

func (panicRecorder) Record(context.Context, commitlayer.Action, string, bool, time.Duration) (client.Accepted, error) {
	panic("recorder on fire")
}

// TestRecordPanicKeepsUpstreamAnswer: a panic while recording is the
// gateway's failure, not the call's: the agent gets the upstream's answer
// and the gateway goes on.
func TestRecordPanicKeepsUpstreamAnswer(t *testing.T) {
	_, _, url, logs := rawGateway(t, mcpgw.Config{Recorder: panicRecorder{newFakeRecorder(t)}})
	sid := rawInitialize(t, url)
	for id := range 2 {
		a := rawReq(t, "POST", url, sid, "2025-06-18", callBody(fmt.Sprint(id+1), "refund", `{"order_id":"o_p","amount":5,"currency":"USD"}`))
		res := string(a.response(t, fmt.Sprint(id+1)).Result)
		require.Contains(t, res, "re_o_p")
		require.NotContains(t, res, `"isError":true`)
	}
	require.Contains(t, logs.String(), "recorder on fire")
}
