package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// replica is one `commitlayer api` or `commitlayer worker` process.
type replica struct {
	cmd  *exec.Cmd
	logs *syncBuffer
	url  string // an API's base URL
}

var listening = regexp.MustCompile(`msg="api listening" addr=(http://\S+)`)

func startReplica(t *testing.T, bin, role string) *replica {
	t.Helper()
	cmd, logs := startProcess(t, bin, nil, role)
	r := &replica{cmd: cmd, logs: logs}
	want := "worker started"
	if role == "api" {
		want = "api listening"
	}
	waitLog(t, logs, want, time.Minute)
	if m := listening.FindStringSubmatch(logs.String()); m != nil {
		r.url = m[1]
	}
	return r
}

// kill ends the process at once (SIGKILL): no draining, no goodbye. The
// test's cleanup reaps it.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, r.cmd.Process.Kill())
}

// TestReplicasShareSessionsAndSurviveKills runs the deployment the docs
// describe, two `commitlayer api` and two `commitlayer worker` processes on
// one database and one namespace: a console login made through one API
// works through the other and through the first after a restart, and a
// logout through either ends it; a burst of actions through both APIs while
// one API and one worker are killed (SIGKILL) ends with every action
// recorded once and verified once (one provisional and one final verdict,
// one workflow each), the client retrying an answer it never got on the
// other API with the same Idempotency-Key as a load balancer's client does.
func TestReplicasShareSessionsAndSurviveKills(t *testing.T) {
	bin := commitlayerBinary(t)
	s := newStack(t, Roles{}) // the environment, a database and a Temporal client for the checks
	s.m.stopReconciler()      // only the replicas finish what they started
	api1, api2 := startReplica(t, bin, "api"), startReplica(t, bin, "api")
	w1, _ := startReplica(t, bin, "worker"), startReplica(t, bin, "worker")
	hc := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	var tenant struct {
		ID     string `json:"id"`
		APIKey string `json:"api_key"`
	}
	send := func(base, key, method, path string, body any, header ...string) (*http.Response, []byte, error) {
		var rd io.Reader
		ctype := "application/json"
		switch b := body.(type) {
		case nil:
		case string:
			rd, ctype = strings.NewReader(b), "application/yaml"
		case url.Values:
			rd, ctype = strings.NewReader(b.Encode()), "application/x-www-form-urlencoded"
		default:
			raw, err := json.Marshal(b)
			require.NoError(t, err)
			rd = bytes.NewReader(raw)
		}
		req, err := http.NewRequest(method, base+path, rd)
		require.NoError(t, err)
		req.Header.Set("Content-Type", ctype)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := hc.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer res.Body.Close()
		raw, err := io.ReadAll(res.Body)
		return res, raw, err
	}
	must := func(base, key, method, path string, body any, want int, header ...string) (*http.Response, []byte) {
		t.Helper()
		res, raw, err := send(base, key, method, path, body, header...)
		require.NoError(t, err, "%s %s%s", method, base, path)
		require.Equal(t, want, res.StatusCode, "%s %s%s: %s", method, base, path, raw)
		return res, raw
	}
	_, raw := must(api1.url, s.adminKey, "POST", "/v1/admin/tenants", map[string]string{"name": t.Name()}, 201)
	require.NoError(t, json.Unmarshal(raw, &tenant))

	// The console: a login through api1 is a session of every API.
	res, _ := must(api1.url, "", "POST", "/console/login", url.Values{"api_key": {tenant.APIKey}}, http.StatusSeeOther)
	var cookie string
	for _, c := range res.Cookies() {
		if c.Name == "commitlayer_console" {
			cookie = c.Name + "=" + c.Value
		}
	}
	require.NotEmpty(t, cookie)
	page := func(base string) int { return statusOf(t, hc, base, cookie) }
	require.Equal(t, http.StatusOK, page(api2.url), "a login through api1 serves through api2")
	api1.kill(t)
	api1 = startReplica(t, bin, "api")
	require.Equal(t, http.StatusOK, page(api1.url), "and through api1 after its restart")
	_, body := must(api2.url, "", "GET", "/console/", nil, 200, "Cookie", cookie)
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(body)
	require.NotNil(t, csrf)
	must(api2.url, "", "POST", "/console/logout", url.Values{"csrf": {string(csrf[1])}}, http.StatusSeeOther, "Cookie", cookie)
	require.Equal(t, http.StatusSeeOther, page(api1.url), "a logout through api2 ends the session on api1")

	// The burst: each action goes to one API; an answer lost to a kill is
	// retried on the other with the same Idempotency-Key.
	const n = 48
	must(api2.url, tenant.APIKey, "POST", "/v1/contracts", payoutContract("payout_replicas", "4s", "0s"), 201)
	now := time.Now().UTC()
	var facts []any
	for i := range n {
		acc := fmt.Sprintf("account:acc_%d", i)
		facts = append(facts,
			fact("account_opened", acc, fmt.Sprintf("open-%d", i), now.Add(-time.Hour), map[string]any{"status": "active"}),
			fact("payout_sent", acc, fmt.Sprintf("po-%d", i), now.Add(time.Second), map[string]any{"payout_id": fmt.Sprint(i), "amount": 100 + i}))
	}
	must(api1.url, tenant.APIKey, "POST", "/v1/facts", map[string]any{"facts": facts}, 200)
	apis := []*replica{api1, api2}
	var answered atomic.Int32
	killed := make(chan struct{})
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := map[string]any{"id": fmt.Sprintf("act_rep_%d", i), "contract": "payout_replicas", "agent": "agent-1",
				"subject": fmt.Sprintf("account:acc_%d", i), "params": map[string]any{"amount": 100 + i},
				"requested_at": now.Format(time.RFC3339Nano), "claim": map[string]string{"status": "success"}}
			deadline := time.Now().Add(time.Minute)
			for try := i; ; try++ {
				res, raw, err := send(apis[try%2].url, tenant.APIKey, "POST", "/v1/actions", body, "Idempotency-Key", fmt.Sprintf("rep-%d", i))
				if err == nil && (res.StatusCode == http.StatusAccepted || res.StatusCode == http.StatusOK) {
					var a struct {
						ID string `json:"id"`
					}
					if json.Unmarshal(raw, &a) == nil {
						ids[i] = a.ID
					}
					answered.Add(1)
					return
				}
				if time.Now().After(deadline) {
					t.Errorf("action %d: no answer within a minute: %v %s", i, err, raw)
					return
				}
				if try >= i+1 {
					<-killed // the other API was killed: try the survivor
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	for began := time.Now(); answered.Load() < n/3 && time.Since(began) < 30*time.Second; {
		time.Sleep(10 * time.Millisecond)
	}
	before := answered.Load()
	api2.kill(t)
	w1.kill(t)
	close(killed)
	wg.Wait()
	t.Logf("%d of %d actions answered before api2 and worker 1 were killed", before, n)
	if t.Failed() {
		return
	}

	// Every action once, with one provisional and one final verdict.
	var list struct {
		Actions []struct {
			ID string `json:"id"`
		} `json:"actions"`
	}
	_, raw = must(api1.url, tenant.APIKey, "GET", "/v1/actions?limit=500", nil, 200)
	require.NoError(t, json.Unmarshal(raw, &list))
	require.Len(t, list.Actions, n, "no action recorded twice, none lost")
	for i, id := range ids {
		require.Equal(t, fmt.Sprintf("act_rep_%d", i), id)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, id := range ids {
		for {
			_, raw := must(api1.url, tenant.APIKey, "GET", "/v1/actions/"+id, nil, 200)
			var v actionView
			require.NoError(t, json.Unmarshal(raw, &v))
			if len(v.History) >= 2 && !v.History[len(v.History)-1].Provisional {
				require.Len(t, v.History, 2, "action %s: one provisional and one final verdict", id)
				require.True(t, v.History[0].Provisional)
				require.Equal(t, commitlayer.StatusPass, v.History[1].Status, "action %s", id)
				break
			}
			require.True(t, time.Now().Before(deadline), "action %s: no final verdict within 2 minutes: %+v", id, v.History)
			time.Sleep(200 * time.Millisecond)
		}
	}
	// One workflow each, closed: a verification started twice would show
	// as a second run of its id.
	require.Eventually(t, func() bool {
		resp, err := s.m.Temporal.ListWorkflow(context.Background(), listRequest(fmt.Sprintf("CommitLayerTenant = '%s'", tenant.ID)))
		if err != nil || len(resp.GetExecutions()) != n {
			return false
		}
		seen := map[string]bool{}
		for _, e := range resp.GetExecutions() {
			if e.GetCloseTime() == nil || seen[e.GetExecution().GetWorkflowId()] {
				return false
			}
			seen[e.GetExecution().GetWorkflowId()] = true
		}
		return true
	}, time.Minute, 500*time.Millisecond, "%d closed verifications, one run each", n)
}

// statusOf is the status of GET /console/ with cookie on base.
func statusOf(t *testing.T, hc *http.Client, base, cookie string) int {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/console/", nil)
	require.NoError(t, err)
	req.Header.Set("Cookie", cookie)
	res, err := hc.Do(req)
	require.NoError(t, err)
	_ = res.Body.Close()
	return res.StatusCode
}

// TestConfigTrustedProxies: COMMITLAYER_TRUSTED_PROXIES takes addresses
// and CIDR ranges and refuses anything else by name.
func TestConfigTrustedProxies(t *testing.T) {
	cfg, err := configFromEnv(Roles{Worker: true})
	require.NoError(t, err)
	require.Nil(t, cfg.TrustedProxies, "unset: no proxy trusted")
	t.Setenv("COMMITLAYER_TRUSTED_PROXIES", "10.0.0.0/8, 127.0.0.1 ::1")
	cfg, err = configFromEnv(Roles{Worker: true})
	require.NoError(t, err)
	require.NotNil(t, cfg.TrustedProxies)
	t.Setenv("COMMITLAYER_TRUSTED_PROXIES", "my-proxy")
	_, err = configFromEnv(Roles{Worker: true})
	require.ErrorContains(t, err, "COMMITLAYER_TRUSTED_PROXIES")
}
