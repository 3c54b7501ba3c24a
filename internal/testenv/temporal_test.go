package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// healthService is the service name the SDK's CheckHealth asks Temporal's frontend about.
const healthService = "temporal.api.workflowservice.v1.WorkflowService"

// fakeHealthServer is a plaintext gRPC server on loopback whose standard health service reports
// status for the workflow service. Of the workflow service it answers only GetSystemInfo, which
// the SDK client calls when it dials.
func fakeHealthServer(t *testing.T, status healthpb.HealthCheckResponse_ServingStatus) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus(healthService, status)
	healthpb.RegisterHealthServer(srv, hs)
	workflowservice.RegisterWorkflowServiceServer(srv, systemInfoOnly{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

type systemInfoOnly struct {
	workflowservice.UnimplementedWorkflowServiceServer
}

func (systemInfoOnly) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{}, nil
}

// plainEnv unsets the TLS and API key settings (envconfig takes a set, even empty, TLS variable
// as asking for TLS), so the probe dials in plaintext; t.Setenv restores them after the test.
func plainEnv(t *testing.T) {
	for _, name := range []string{"TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_TLS_CLIENT_CERT_PATH",
		"TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "TEMPORAL_TLS_SERVER_NAME",
		"TEMPORAL_TLS_CLIENT_CERT_DATA", "TEMPORAL_TLS_CLIENT_KEY_DATA", "TEMPORAL_TLS_SERVER_CA_CERT_DATA",
		"TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"} {
		t.Setenv(name, "")
		require.NoError(t, os.Unsetenv(name))
	}
}

func TestCheckHealth(t *testing.T) {
	plainEnv(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		status healthpb.HealthCheckResponse_ServingStatus
		err    string
	}{
		{"serving", healthpb.HealthCheckResponse_SERVING, ""},
		{"not serving", healthpb.HealthCheckResponse_NOT_SERVING, "NOT_SERVING"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkHealth(ctx, fakeHealthServer(t, tc.status))
			if tc.err == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.err)
			}
		})
	}
}

func TestCheckHealthBadAddress(t *testing.T) {
	plainEnv(t)
	for _, tc := range []struct {
		addr, err string
	}{
		{"", "address"},
		{"localhost", "address"},
		{"127.0.0.1:7233/path", "port must be a number"},
		{"127.0.0.1:0", "port must be a number"},
		{"127.0.0.1:70000", "port must be a number"},
		{":7233", "no host"},
		{"[::1]:x", "port must be a number"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			require.ErrorContains(t, checkHealth(context.Background(), tc.addr), tc.err)
		})
	}
}

func TestCheckHealthNothingListens(t *testing.T) {
	plainEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	require.ErrorContains(t, checkHealth(ctx, fmt.Sprintf("127.0.0.1:%d", closedPort(t))), "health check")
}

func TestTemporalAddressUnreachable(t *testing.T) {
	t.Setenv(EnvTemporalAddress, fmt.Sprintf("127.0.0.1:%d", closedPort(t)))
	plainEnv(t)

	t.Setenv(EnvIntegration, "")
	_, returned, fake := call(t, func(tb testing.TB) string { return TemporalAddress(tb) })
	require.False(t, returned)
	require.Contains(t, fake.skipped, "no Temporal server at 127.0.0.1:")

	t.Setenv(EnvIntegration, "1")
	_, returned, fake = call(t, func(tb testing.TB) string { return TemporalAddress(tb) })
	require.False(t, returned)
	require.Contains(t, fake.failed, "no Temporal server at 127.0.0.1:")
}

func TestTemporalAddressFake(t *testing.T) {
	plainEnv(t)
	serving := fakeHealthServer(t, healthpb.HealthCheckResponse_SERVING)
	t.Setenv(EnvTemporalAddress, " "+serving+" ")
	require.Equal(t, serving, TemporalAddress(t))

	notServing := fakeHealthServer(t, healthpb.HealthCheckResponse_NOT_SERVING)
	t.Setenv(EnvTemporalAddress, notServing)
	t.Setenv(EnvIntegration, "")
	_, returned, fake := call(t, func(tb testing.TB) string { return TemporalAddress(tb) })
	require.False(t, returned)
	require.Contains(t, fake.skipped, "NOT_SERVING")
}

// TestTemporalAddressDevServer checks the probe against the real dev server (scripts/dev-services.sh).
func TestTemporalAddressDevServer(t *testing.T) {
	addr := TemporalAddress(t)
	require.NoError(t, checkHealth(context.Background(), addr))
}
