package testenv

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// healthService is the service name Temporal's frontend reports on in the gRPC health service (the
// SDK's CheckHealth asks for the same).
const healthService = "temporal.api.workflowservice.v1.WorkflowService"

// probeTimeout bounds one probe of the Temporal frontend.
const probeTimeout = 5 * time.Second

// TemporalAddress returns the host:port of a Temporal frontend that answers: TEMPORAL_ADDRESS, else
// 127.0.0.1:7233. A plaintext server must pass the gRPC health check; when TLS or an API key is
// configured (TEMPORAL_TLS*, TEMPORAL_API_KEY) a TCP connection is taken as the answer. When nothing
// answers, t is skipped with the reason (failed with COMMITLAYER_INTEGRATION=1).
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
	var err error
	if temporalSecured() {
		err = tcpProbe(ctx, addr)
	} else {
		err = grpcHealth(ctx, addr, healthService)
	}
	temporalCache[addr] = err
	return err
}

// temporalSecured reports whether the environment configures TLS or an API key for Temporal, which
// the plaintext health probe cannot speak.
func temporalSecured() bool {
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if value == "" {
			continue
		}
		if name == "TEMPORAL_API_KEY" || strings.HasPrefix(name, "TEMPORAL_TLS") {
			if name == "TEMPORAL_TLS" && strings.EqualFold(value, "false") {
				continue
			}
			return true
		}
	}
	return false
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

func tcpProbe(ctx context.Context, addr string) error {
	if err := checkAddress(addr); err != nil {
		return err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	return conn.Close()
}

// grpcHealth calls grpc.health.v1.Health/Check for service on a plaintext (h2c) gRPC server at addr
// with the standard library's HTTP/2 client, and returns nil when the answer is SERVING.
func grpcHealth(ctx context.Context, addr, service string) error {
	if err := checkAddress(addr); err != nil {
		return err
	}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	transport := &http.Transport{Protocols: &protocols}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/grpc.health.v1.Health/Check",
		bytes.NewReader(grpcFrame(encodeHealthRequest(service))))
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return fmt.Errorf("health check: read: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health check: HTTP %d", resp.StatusCode)
	}
	// A gRPC error may come as trailers, or alone in the headers ("trailers-only").
	code := resp.Trailer.Get("Grpc-Status")
	msg := resp.Trailer.Get("Grpc-Message")
	if code == "" {
		code, msg = resp.Header.Get("Grpc-Status"), resp.Header.Get("Grpc-Message")
	}
	if code != "0" {
		return fmt.Errorf("health check: grpc status %q %s", code, msg)
	}
	status, err := parseHealthResponse(body)
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	if status != servingStatusServing {
		return fmt.Errorf("health check: %s is %s", service, status)
	}
	return nil
}

// servingStatus is grpc.health.v1.HealthCheckResponse.ServingStatus.
type servingStatus uint64

const (
	servingStatusUnknown        servingStatus = 0
	servingStatusServing        servingStatus = 1
	servingStatusNotServing     servingStatus = 2
	servingStatusServiceUnknown servingStatus = 3
)

func (s servingStatus) String() string {
	switch s {
	case servingStatusUnknown:
		return "UNKNOWN"
	case servingStatusServing:
		return "SERVING"
	case servingStatusNotServing:
		return "NOT_SERVING"
	case servingStatusServiceUnknown:
		return "SERVICE_UNKNOWN"
	}
	return fmt.Sprintf("status(%d)", uint64(s))
}

// encodeHealthRequest encodes HealthCheckRequest{service} in protobuf: field 1, length-delimited.
func encodeHealthRequest(service string) []byte {
	if service == "" {
		return nil
	}
	b := []byte{0x0a}
	b = binary.AppendUvarint(b, uint64(len(service)))
	return append(b, service...)
}

// grpcFrame prefixes msg with gRPC's message header: not compressed, then the big-endian length.
func grpcFrame(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

var errMalformed = errors.New("malformed health response")

// parseHealthResponse reads one gRPC frame holding a HealthCheckResponse and returns its status.
// Unknown fields are skipped; a missing status is UNKNOWN, as protobuf's default.
func parseHealthResponse(body []byte) (servingStatus, error) {
	if len(body) < 5 {
		return 0, fmt.Errorf("%w: %d bytes, shorter than a gRPC frame header", errMalformed, len(body))
	}
	if body[0] != 0 {
		return 0, fmt.Errorf("%w: compressed message", errMalformed)
	}
	n := binary.BigEndian.Uint32(body[1:5])
	msg := body[5:]
	if uint64(n) != uint64(len(msg)) {
		return 0, fmt.Errorf("%w: frame says %d bytes, %d follow", errMalformed, n, len(msg))
	}
	status := servingStatusUnknown
	for len(msg) > 0 {
		key, k := binary.Uvarint(msg)
		if k <= 0 {
			return 0, fmt.Errorf("%w: bad field key", errMalformed)
		}
		msg = msg[k:]
		field, wire := key>>3, key&7
		switch wire {
		case 0: // varint
			v, k := binary.Uvarint(msg)
			if k <= 0 {
				return 0, fmt.Errorf("%w: bad varint in field %d", errMalformed, field)
			}
			msg = msg[k:]
			if field == 1 {
				status = servingStatus(v)
			}
		case 1: // 64-bit
			if len(msg) < 8 {
				return 0, fmt.Errorf("%w: short fixed64 in field %d", errMalformed, field)
			}
			msg = msg[8:]
		case 2: // length-delimited
			l, k := binary.Uvarint(msg)
			if k <= 0 || l > uint64(len(msg)-k) {
				return 0, fmt.Errorf("%w: bad length in field %d", errMalformed, field)
			}
			msg = msg[k+int(l):]
		case 5: // 32-bit
			if len(msg) < 4 {
				return 0, fmt.Errorf("%w: short fixed32 in field %d", errMalformed, field)
			}
			msg = msg[4:]
		default:
			return 0, fmt.Errorf("%w: wire type %d in field %d", errMalformed, wire, field)
		}
	}
	return status, nil
}
