package main

import (
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMetricsOnItsOwnAddress: with COMMITLAYER_METRICS_ADDR the metrics are
// served there and not on the API's address.
func TestMetricsOnItsOwnAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	t.Setenv("COMMITLAYER_METRICS_ADDR", addr)
	s := newStack(t, Roles{API: true})
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "go_goroutines")
	resp, err = http.Get(s.m.URL() + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "not on the API's address")
}
