package main

import (
	"context"
	"strings"
	"time"

	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/sandbox/catalogue"
	"github.com/commitlayer/commitlayer/sandbox/harness"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// TestRefundThroughQueryConnectors runs the refund workflow's scenarios on
// the dev server with its sources (payments, orders, tickets) read by the
// http_json query connector instead of their event feeds
// (COMMITLAYER_SANDBOX_QUERY_CONNECTORS): every row still agrees with the
// oracle, and the tenants' connectors are http_json for those systems.
func TestRefundThroughQueryConnectors(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the refund workflow's scenarios")
	}
	t.Setenv(harness.EnvQueryConnectors, "payments,orders,tickets")
	s := newStack(t, Roles{API: true, Worker: true, Benchmark: true, BenchmarkWorker: true})
	var refund []string
	for _, sc := range catalogue.Catalogue() {
		if strings.HasPrefix(sc.ID, "refund/") {
			refund = append(refund, sc.ID)
		}
	}
	require.NotEmpty(t, refund)
	var started struct {
		ID string `json:"id"`
	}
	s.do(s.adminKey, "POST", "/v1/admin/benchmark", map[string]any{"only": []string{"refund/"}, "concurrency": 4}, 202, &started)
	var run struct {
		Status  string       `json:"status"`
		Results []matrix.Row `json:"results"`
		LogTail string       `json:"log_tail"`
	}
	deadline := time.Now().Add(8 * time.Minute)
	for {
		s.do(s.adminKey, "GET", "/v1/admin/benchmark/"+started.ID, nil, 200, &run)
		if run.Status != "running" {
			break
		}
		require.True(t, time.Now().Before(deadline), "benchmark still running: %s", run.LogTail)
		time.Sleep(time.Second)
	}
	require.Equal(t, "done", run.Status, run.LogTail)
	require.Len(t, run.Results, len(refund))
	for _, r := range run.Results {
		require.Empty(t, r.Error, r.ID)
		require.True(t, r.Agree.Both(), "%s: truth %s/%s, verdict %s/%s %+v", r.ID, r.Truth.Outcome, r.Truth.Policy,
			r.Verdict.Lenses.Outcome, r.Verdict.Lenses.Policy, r.Verdict.Findings)
	}
	var kinds []string
	rows, err := s.m.DB.Pool().Query(context.Background(), `SELECT c.source || ':' || c.kind FROM connectors c
		JOIN benchmark.run_tenants r ON r.tenant_id = c.tenant_id WHERE r.run_id = $1 ORDER BY 1`, started.ID)
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		kinds = append(kinds, k)
	}
	require.NoError(t, rows.Err())
	require.Contains(t, kinds, "payments:http_json")
	require.Contains(t, kinds, "orders:http_json")
	require.Contains(t, kinds, "tickets:http_json")
	require.Contains(t, kinds, "ledger:http_events")
	require.NotContains(t, kinds, "payments:http_events")
}
