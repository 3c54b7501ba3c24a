package testenv

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// healthResponse encodes a HealthCheckResponse{status} in a gRPC frame, as a server would.
func healthResponse(status uint64) []byte {
	msg := []byte{0x08}
	msg = binary.AppendUvarint(msg, status)
	return grpcFrame(msg)
}

func TestEncodeHealthRequest(t *testing.T) {
	require.Nil(t, encodeHealthRequest(""), "the empty service is protobuf's default: no bytes")
	got := encodeHealthRequest("svc")
	require.Equal(t, []byte{0x0a, 3, 's', 'v', 'c'}, got)

	long := strings.Repeat("x", 200) // a length that needs two varint bytes
	got = encodeHealthRequest(long)
	require.Equal(t, []byte{0x0a, 0xc8, 0x01}, got[:3])
	require.Equal(t, long, string(got[3:]))

	frame := grpcFrame(got)
	require.Equal(t, byte(0), frame[0])
	require.Equal(t, uint32(len(got)), binary.BigEndian.Uint32(frame[1:5]))
	require.Equal(t, got, frame[5:])
}

func TestParseHealthResponse(t *testing.T) {
	frame := func(msg ...byte) []byte { return grpcFrame(msg) }
	for _, tc := range []struct {
		name string
		in   []byte
		want servingStatus
		err  string
	}{
		{"serving", healthResponse(1), servingStatusServing, ""},
		{"not serving", healthResponse(2), servingStatusNotServing, ""},
		{"service unknown", healthResponse(3), servingStatusServiceUnknown, ""},
		{"empty message is UNKNOWN", frame(), servingStatusUnknown, ""},
		{"large enum", healthResponse(1 << 40), servingStatus(1 << 40), ""},
		{"unknown fields skipped", frame(
			0x10, 0x05, // field 2 varint
			0x19, 1, 2, 3, 4, 5, 6, 7, 8, // field 3 fixed64
			0x22, 0x02, 'h', 'i', // field 4 bytes
			0x2d, 1, 2, 3, 4, // field 5 fixed32
			0x08, 0x01), servingStatusServing, ""},
		{"last status wins", frame(0x08, 0x02, 0x08, 0x01), servingStatusServing, ""},
		{"nil", nil, 0, "shorter than a gRPC frame header"},
		{"short header", []byte{0, 0, 0}, 0, "shorter than a gRPC frame header"},
		{"compressed", []byte{1, 0, 0, 0, 0}, 0, "compressed"},
		{"length too long", []byte{0, 0, 0, 0, 9, 0x08, 0x01}, 0, "frame says 9 bytes, 2 follow"},
		{"length too short", []byte{0, 0, 0, 0, 1, 0x08, 0x01}, 0, "frame says 1 bytes, 2 follow"},
		{"truncated varint", frame(0x08, 0x80), 0, "bad varint"},
		{"truncated key", frame(0x80), 0, "bad field key"},
		{"truncated fixed64", frame(0x19, 1, 2), 0, "short fixed64"},
		{"truncated fixed32", frame(0x2d, 1), 0, "short fixed32"},
		{"length past end", frame(0x22, 0x05, 'a'), 0, "bad length"},
		{"huge length", frame(0x22, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), 0, "bad length"},
		{"group wire type", frame(0x0b), 0, "wire type 3"},
		{"wire type 7", frame(0x0f), 0, "wire type 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseHealthResponse(tc.in)
			if tc.err != "" {
				require.ErrorIs(t, err, errMalformed)
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestServingStatusString(t *testing.T) {
	require.Equal(t, "SERVING", servingStatusServing.String())
	require.Equal(t, "NOT_SERVING", servingStatusNotServing.String())
	require.Equal(t, "UNKNOWN", servingStatusUnknown.String())
	require.Equal(t, "SERVICE_UNKNOWN", servingStatusServiceUnknown.String())
	require.Equal(t, "status(9)", servingStatus(9).String())
}

func FuzzParseHealthResponse(f *testing.F) {
	f.Add(healthResponse(1))
	f.Add(healthResponse(2))
	f.Add(grpcFrame([]byte{0x10, 0x05, 0x22, 0x02, 'h', 'i', 0x08, 0x01}))
	f.Add([]byte{0, 0, 0, 0, 9, 0x08})
	f.Fuzz(func(t *testing.T, b []byte) {
		status, err := parseHealthResponse(b)
		if err != nil {
			require.ErrorIs(t, err, errMalformed)
			return
		}
		// Whatever parsed is a whole frame, and the status it found survives a round trip.
		require.GreaterOrEqual(t, len(b), 5)
		require.Equal(t, uint32(len(b)-5), binary.BigEndian.Uint32(b[1:5]))
		again, err := parseHealthResponse(healthResponse(uint64(status)))
		require.NoError(t, err)
		require.Equal(t, status, again)
	})
}

// fakeHealthServer is a plaintext HTTP/2 (h2c) server answering grpc.health.v1.Health/Check with
// handle. It records the last request it saw.
func fakeHealthServer(t *testing.T, handle http.HandlerFunc) (addr string, last func() *http.Request, body func() []byte) {
	t.Helper()
	var lastReq *http.Request
	var lastBody []byte
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		lastReq, lastBody = r, b
		handle(w, r)
	}))
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &protocols
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), func() *http.Request { return lastReq }, func() []byte { return lastBody }
}

// answer writes a gRPC response: the message, then the status in trailers.
func answer(msg []byte, code, message string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(msg)
		w.Header().Set("Grpc-Status", code)
		w.Header().Set("Grpc-Message", message)
	}
}

func TestGRPCHealth(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		handle http.HandlerFunc
		err    string
	}{
		{"serving", answer(healthResponse(1), "0", ""), ""},
		{"not serving", answer(healthResponse(2), "0", ""), "NOT_SERVING"},
		{"unknown service", answer(healthResponse(3), "0", ""), "SERVICE_UNKNOWN"},
		{"grpc error in trailers", answer(nil, "5", "no such service"), `grpc status "5" no such service`},
		{"trailers only", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "12")
			w.Header().Set("Grpc-Message", "unimplemented")
			w.WriteHeader(http.StatusOK)
		}, `grpc status "12" unimplemented`},
		{"no grpc status", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write(healthResponse(1))
		}, `grpc status ""`},
		{"http error", func(w http.ResponseWriter, r *http.Request) {
			http.NotFound(w, r)
		}, "HTTP 404"},
		{"garbage body", answer([]byte("hello"), "0", ""), "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, last, body := fakeHealthServer(t, tc.handle)
			err := grpcHealth(ctx, addr, healthService)
			if tc.err == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.err)
			}
			req := last()
			require.NotNil(t, req)
			require.Equal(t, 2, req.ProtoMajor, "gRPC needs HTTP/2")
			require.Equal(t, http.MethodPost, req.Method)
			require.Equal(t, "/grpc.health.v1.Health/Check", req.URL.Path)
			require.Equal(t, "application/grpc", req.Header.Get("Content-Type"))
			require.Equal(t, grpcFrame(encodeHealthRequest(healthService)), body())
		})
	}
}

func TestGRPCHealthBadAddress(t *testing.T) {
	ctx := context.Background()
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
		{fmt.Sprintf("127.0.0.1:%d", closedPort(t)), "health check"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			require.ErrorContains(t, grpcHealth(ctx, tc.addr, healthService), tc.err)
			require.Error(t, tcpProbe(ctx, tc.addr))
		})
	}
}

func TestTCPProbe(t *testing.T) {
	addr, _, _ := fakeHealthServer(t, answer(healthResponse(1), "0", ""))
	require.NoError(t, tcpProbe(context.Background(), addr))
}

func TestTemporalSecured(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        bool
	}{
		{"TEMPORAL_API_KEY", "k", true},
		{"TEMPORAL_TLS", "true", true},
		{"TEMPORAL_TLS", "false", false},
		{"TEMPORAL_TLS", "FALSE", false},
		{"TEMPORAL_TLS_CLIENT_CERT_PATH", "/c.pem", true},
		{"TEMPORAL_TLS_SERVER_CA_CERT_PATH", "/ca.pem", true},
		{"TEMPORAL_API_KEY", "", false},
		{"TEMPORAL_NAMESPACE", "x", false},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			for _, name := range []string{"TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_TLS_CLIENT_CERT_PATH",
				"TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "TEMPORAL_TLS_SERVER_NAME",
				"TEMPORAL_TLS_CLIENT_CERT_DATA", "TEMPORAL_TLS_CLIENT_KEY_DATA", "TEMPORAL_TLS_SERVER_CA_CERT_DATA",
				"TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"} {
				t.Setenv(name, "")
			}
			t.Setenv(tc.name, tc.value)
			require.Equal(t, tc.want, temporalSecured())
		})
	}
}

func TestTemporalAddressUnreachable(t *testing.T) {
	t.Setenv(EnvTemporalAddress, fmt.Sprintf("127.0.0.1:%d", closedPort(t)))
	t.Setenv("TEMPORAL_API_KEY", "")
	t.Setenv("TEMPORAL_TLS", "")

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
	t.Setenv("TEMPORAL_API_KEY", "")
	t.Setenv("TEMPORAL_TLS", "")
	serving, _, _ := fakeHealthServer(t, answer(healthResponse(1), "0", ""))
	t.Setenv(EnvTemporalAddress, " "+serving+" ")
	require.Equal(t, serving, TemporalAddress(t))

	notServing, _, _ := fakeHealthServer(t, answer(healthResponse(2), "0", ""))
	t.Setenv(EnvTemporalAddress, notServing)
	t.Setenv(EnvIntegration, "")
	_, returned, fake := call(t, func(tb testing.TB) string { return TemporalAddress(tb) })
	require.False(t, returned)
	require.Contains(t, fake.skipped, "NOT_SERVING")
}

// TestTemporalAddressDevServer checks the probe against the real dev server (scripts/dev-services.sh).
func TestTemporalAddressDevServer(t *testing.T) {
	addr := TemporalAddress(t)
	require.NoError(t, tcpProbe(context.Background(), addr))
	if temporalSecured() {
		t.Skip("TLS or an API key is configured: the plaintext health probe does not apply")
	}
	require.NoError(t, grpcHealth(context.Background(), addr, healthService))
}
