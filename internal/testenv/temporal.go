package testenv

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/log"
)

// probeTimeout bounds one probe of the Temporal frontend.
const probeTimeout = 5 * time.Second

// TemporalAddress returns the host:port of a Temporal frontend that answers: TEMPORAL_ADDRESS, else
// 127.0.0.1:7233. The server must pass the SDK client's health check (client.CheckHealth), dialled
// with the TLS and API key settings of the environment (TEMPORAL_TLS*, TEMPORAL_API_KEY, as
// contrib/envconfig loads them). When nothing answers, t is skipped with the reason (failed with
// COMMITLAYER_INTEGRATION=1).
func TemporalAddress(t testing.TB) string {
	t.Helper()
	addr := temporalAddress()
	if err := temporalReachable(addr); err != nil {
		unavailable(t, "testenv: no Temporal server at %s: %v", addr, err)
	}
	return addr
}

func temporalAddress() string {
	if a := strings.TrimSpace(os.Getenv(EnvTemporalAddress)); a != "" {
		return a
	}
	return DefaultTemporalAddress
}

var (
	temporalMu    sync.Mutex
	temporalCache = map[string]error{}
)

// temporalReachable probes addr once per process and remembers the answer.
func temporalReachable(addr string) error {
	temporalMu.Lock()
	defer temporalMu.Unlock()
	if err, ok := temporalCache[addr]; ok {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	err := checkHealth(ctx, addr)
	temporalCache[addr] = err
	return err
}

// checkAddress accepts host:port with a host and a numeric port.
func checkAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if host == "" {
		return fmt.Errorf("address %q: no host", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("address %q: port must be a number from 1 to 65535", addr)
	}
	return nil
}

// checkHealth dials the frontend at addr with the Temporal SDK client (client options from the
// environment, as contrib/envconfig loads them, the address replaced by addr) and asks its gRPC
// health service whether the workflow service is SERVING.
func checkHealth(ctx context.Context, addr string) error {
	if err := checkAddress(addr); err != nil {
		return err
	}
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return fmt.Errorf("temporal client options: %w", err)
	}
	opts.HostPort = addr
	opts.Logger = log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	return nil
}
