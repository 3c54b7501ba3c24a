//go:build !race

package mcpgw_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/client"
	"github.com/commitlayer/commitlayer/mcpgw"
)

// The gateway's memory under a hostile upstream and heavy agents, measured
// on a gateway process of its own (this binary as "mcpgw-rss-gateway"):
// its peak resident set (VmHWM) must stay under the documented bound. It
// moves about 5 GB through the gateway: not under -race or -short.

const rssBound = 256 << 20

func init() { helpers["mcpgw-rss-gateway"] = rssGateway }

// rssGateway serves a gateway over HTTP in front of MCPGW_RSS_UPSTREAM,
// recording through the API at MCPGW_RSS_API, and prints its URL.
func rssGateway() {
	c, err := client.New(os.Getenv("MCPGW_RSS_API"), "cl_rss_key")
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	g, err := mcpgw.New(ctx, mcpgw.Config{Recorder: &mcpgw.APIRecorder{Client: c}, Upstream: mcpgw.Upstream{URL: os.Getenv("MCPGW_RSS_UPSTREAM")}})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println("http://" + ln.Addr().String())
	go func() { _ = http.Serve(ln, g.HTTPHandler()) }()
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test closes stdin
	_ = g.Close()
}

// fakeAPI is the part of CommitLayer's API the gateway uses; it keeps
// nothing but counts.
type fakeAPI struct{ actions, refused atomic.Int64 }

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/v1/contracts":
		_, _ = io.WriteString(w, `{"contracts":[{"id":"refund_customer","version":1}]}`)
	case r.URL.Path == "/v1/contracts/refund_customer":
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "refund_customer", "version": 1, "source": boundContract})
	case r.Method == "POST":
		n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20+1))
		if n > 1<<20 {
			f.refused.Add(1)
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			_, _ = io.WriteString(w, `{"error":{"code":"too_large","message":"request body too large"}}`)
			return
		}
		f.actions.Add(1)
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"id":"act_x","verdict_url":"/v1/actions/act_x"}`)
	default:
		http.NotFound(w, r)
	}
}

// peakRSS is a process's VmHWM in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestGatewayMemoryUnderHostileUpstream (case 6): endless tools/list pages,
// a 256 MiB SSE line, a 64 MiB result, list_changed storms, and 1 000 bound
// calls with 2 MiB arguments (their records refused by the API when the
// binding copies the argument): the gateway's peak RSS stays under
// rssBound, each bound answered to its own request.
func TestGatewayMemoryUnderHostileUpstream(t *testing.T) {
	if testing.Short() {
		t.Skip("moves about 5 GB through a gateway process; not in -short")
	}
	page := strings.Repeat(`{"name":"t","inputSchema":{"type":"object"},"description":"`+strings.Repeat("d", 900)+`"},`, 100)
	var pages atomic.Int64
	up, _ := hostileUpstream(t, map[string]http.HandlerFunc{
		"tools/list": func(w http.ResponseWriter, r *http.Request) {
			n := pages.Add(1)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[%s{"name":"last","inputSchema":{"type":"object"}}],"nextCursor":"c%d"}}`,
				r.Header.Get("X-Call-Id"), page, n)
		},
		"env": func(w http.ResponseWriter, r *http.Request) { // a 256 MiB SSE line
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, `event: message`+"\n"+`data: {"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, r.Header.Get("X-Call-Id"))
			chunk := strings.Repeat("x", 1<<20)
			for range 256 {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
			_, _ = io.WriteString(w, "\"}]}}\n\n")
		},
		"get_order": func(w http.ResponseWriter, r *http.Request) { // a 64 MiB result
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, r.Header.Get("X-Call-Id"))
			chunk := strings.Repeat("y", 1<<20)
			for range 64 {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
			_, _ = io.WriteString(w, `"}]}}`)
		},
	})
	api := &fakeAPI{}
	apiSrv := httptest.NewServer(api)
	t.Cleanup(apiSrv.Close)

	cmd := exec.Command(os.Args[0], "mcpgw-rss-gateway")
	cmd.Env = append(os.Environ(), "MCPGW_RSS_UPSTREAM="+up.URL, "MCPGW_RSS_API="+apiSrv.URL)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	url, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	url = strings.TrimSpace(url)
	ctx := context.Background()
	cs := agentSession(t, url, "rss-agent", nil)
	began := time.Now()
	report := func(what string) {
		t.Logf("gateway peak RSS after %s: %.1f MiB (%s)", what, float64(peakRSS(t, cmd.Process.Pid))/(1<<20), time.Since(began).Round(time.Second))
	}
	report("start")

	n := 0
	var listErr error
	for _, err := range cs.Tools(ctx, nil) {
		if err != nil {
			listErr = err
			break
		}
		n++
	}
	require.ErrorContains(t, listErr, "ran past 1000 pages or 67108864 bytes")
	report(fmt.Sprintf("endless tools/list (%d tools in %d pages forwarded)", n, pages.Load()))

	for _, tool := range []string{"env", "get_order"} {
		msg, isErr := callText(t, cs, tool)
		require.True(t, isErr)
		require.Contains(t, msg, "answer is larger than 8388608 bytes (-max-message); refused")
	}
	report("a 256 MiB SSE line and a 64 MiB result")

	note := strings.Repeat("n", 2<<20)
	var wg sync.WaitGroup
	var failed atomic.Int64
	calls := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range calls {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund",
					Arguments: map[string]any{"order_id": fmt.Sprintf("o_%d", i), "amount": 5, "currency": "EUR", "note": note}})
				if err != nil || res.IsError {
					failed.Add(1)
				}
			}
		})
	}
	for i := range 1000 {
		calls <- i
	}
	close(calls)
	wg.Wait()
	require.Zero(t, failed.Load())
	require.EqualValues(t, 2000, api.actions.Load(), "two bindings, one action each per call")
	report("1 000 bound calls with 2 MiB arguments")
	peak := peakRSS(t, cmd.Process.Pid)
	require.Less(t, peak, int64(rssBound), "peak RSS %d MiB", peak>>20)
}
