package testenv

// Tests of scripts/dev-services.sh and the other shell entry points.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// devServices runs scripts/dev-services.sh with env added to a clean copy of the environment and
// returns its output and exit code.
func devServices(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	script := filepath.Join(repoRoot(t), "scripts", "dev-services.sh")
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Env = environWithout([]string{"DATABASE_URL", "COMMITLAYER_DATA_DIR", "TEMPORAL_IP", "TEMPORAL_PORT",
		"TEMPORAL_UI_PORT", "TEMPORAL_START_TIMEOUT", "POSTGRES_START_TIMEOUT"}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), exit.ExitCode()
	}
	require.NoError(t, err)
	return out.String(), 0
}

func TestShellScriptsParse(t *testing.T) {
	root := repoRoot(t)
	for _, script := range []string{"scripts/dev-services.sh", "scripts/fuzz.sh", ".ci/run"} {
		t.Run(script, func(t *testing.T) {
			out, err := exec.Command("bash", "-n", filepath.Join(root, script)).CombinedOutput()
			require.NoError(t, err, string(out))
			if _, err := exec.LookPath("shellcheck"); err == nil {
				out, err := exec.Command("shellcheck", "-x", filepath.Join(root, script)).CombinedOutput()
				require.NoError(t, err, string(out))
			}
		})
	}
}

func TestDevServicesBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		code int
		want string
	}{
		{"no command", nil, nil, 2, "usage:"},
		{"unknown command", []string{"restart"}, nil, 2, "usage:"},
		{"two commands", []string{"up", "down"}, nil, 2, "usage:"},
		{"port not a number", []string{"status"}, []string{"TEMPORAL_PORT=72x3"}, 1, "TEMPORAL_PORT must be a port number"},
		{"ui port not a number", []string{"up"}, []string{"TEMPORAL_UI_PORT=-1"}, 1, "TEMPORAL_UI_PORT must be a port number"},
		{"timeout not a number", []string{"up"}, []string{"TEMPORAL_START_TIMEOUT=soon"}, 1, "TEMPORAL_START_TIMEOUT"},
		{"pragma without a value", []string{"up"}, []string{"TEMPORAL_SQLITE_PRAGMAS=journal_mode"}, 1, "'journal_mode' is not a pragma=value pair"},
		{"pragma with a quote", []string{"up"}, []string{"TEMPORAL_SQLITE_PRAGMAS=synchronous=normal journal_mode=';x"}, 1, "is not a pragma=value pair"},
		{"not a postgres URL", []string{"up"}, []string{"DATABASE_URL=mysql://root@localhost/db"}, 1, "must be a postgres:// URL"},
		{"DSN form", []string{"up"}, []string{"DATABASE_URL=host=localhost dbname=x"}, 1, "must be a postgres:// URL"},
		{"no database", []string{"up"}, []string{"DATABASE_URL=postgres://localhost"}, 1, "names no database"},
		{"empty database", []string{"up"}, []string{"DATABASE_URL=postgres://localhost/?sslmode=disable"}, 1, "names no database"},
		{"unsafe name", []string{"up"}, []string{`DATABASE_URL=postgres://localhost/x";DROP`}, 1, "use letters, digits and underscores"},
		{"dash in name", []string{"up"}, []string{"DATABASE_URL=postgres://localhost/commit-layer"}, 1, "use letters, digits and underscores"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append([]string{"COMMITLAYER_DATA_DIR=" + dir}, tc.env...)
			out, code := devServices(t, env, tc.args...)
			require.Equal(t, tc.code, code, out)
			require.Contains(t, out, tc.want)
		})
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "bad input starts nothing")
}

func TestDevServicesStatusWhenNothingRuns(t *testing.T) {
	port, uiPort, pgPort := closedPort(t), closedPort(t), closedPort(t)
	out, code := devServices(t, []string{
		"COMMITLAYER_DATA_DIR=" + t.TempDir(),
		fmt.Sprintf("TEMPORAL_PORT=%d", port),
		fmt.Sprintf("TEMPORAL_UI_PORT=%d", uiPort),
		fmt.Sprintf("DATABASE_URL=postgres://postgres@127.0.0.1:%d/cl?sslmode=disable", pgPort),
	}, "status")
	require.Equal(t, 1, code, out)
	require.Regexp(t, fmt.Sprintf(`temporal: (nothing answers at 127\.0\.0\.1:%d|CLI not installed)`, port), out)
	require.Contains(t, out, fmt.Sprintf("postgres: nothing answers at postgres://postgres@127.0.0.1:%d/postgres", pgPort))
}

func TestDevServicesUpRefusesForeignPort(t *testing.T) {
	if temporalCLI(t) == "" {
		t.Skip("the Temporal CLI is not installed")
	}
	admin := adminURL(t)
	// Something that is not Temporal holds the port: up must say so and start nothing.
	busy := fakeHealthServer(t, healthpb.HealthCheckResponse_NOT_SERVING)
	_, port, err := splitHostPort(busy)
	require.NoError(t, err)
	dir := t.TempDir()
	dbURL, err := withDatabase(admin, "commitlayer")
	require.NoError(t, err)
	out, code := devServices(t, []string{
		"COMMITLAYER_DATA_DIR=" + dir,
		"TEMPORAL_PORT=" + port,
		fmt.Sprintf("TEMPORAL_UI_PORT=%d", closedPort(t)),
		"DATABASE_URL=" + dbURL,
	}, "up")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "port "+port+" is taken by something that does not answer as a Temporal server")
	require.NoFileExists(t, filepath.Join(dir, "temporal.pid"))
}

// TestDevServicesLifecycle starts a second dev server on free ports with its own data directory and
// database: up, up again (idempotent), status, down, down again, status.
func TestDevServicesLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal dev server")
	}
	if temporalCLI(t) == "" {
		t.Skip("the Temporal CLI is not installed")
	}
	admin := adminURL(t)
	name := fmt.Sprintf("%s%d_%d", dbPrefix, os.Getpid(), perTestSeq.Add(1))
	dbURL, err := withDatabase(admin, name)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dropDatabase(admin, name)) })

	dir := t.TempDir()
	port := closedPort(t)
	env := []string{
		"COMMITLAYER_DATA_DIR=" + dir,
		fmt.Sprintf("TEMPORAL_PORT=%d", port),
		fmt.Sprintf("TEMPORAL_UI_PORT=%d", closedPort(t)),
		"DATABASE_URL=" + dbURL,
	}
	t.Cleanup(func() { devServices(t, env, "down") })

	out, code := devServices(t, env, "up")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "created database "+name)
	require.Contains(t, out, fmt.Sprintf("serving at 127.0.0.1:%d", port))
	require.True(t, databaseExists(t, admin, name))
	require.FileExists(t, filepath.Join(dir, "temporal.pid"))
	require.FileExists(t, filepath.Join(dir, "temporal.db"))
	// The file is in write-ahead-log mode (the script's default pragmas): SQLite's header says so in
	// its read and write format bytes, 2 for WAL and 1 for the rollback journal.
	header := make([]byte, 20)
	f, err := os.Open(filepath.Join(dir, "temporal.db"))
	require.NoError(t, err)
	_, err = io.ReadFull(f, header)
	require.NoError(t, f.Close())
	require.NoError(t, err)
	require.Equal(t, "SQLite format 3\x00", string(header[:16]))
	require.Equal(t, []byte{2, 2}, header[18:20], "the dev server's SQLite file is not in WAL mode")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	require.NoError(t, temporalReachableNow(addr))

	out, code = devServices(t, env, "up")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "database "+name+" exists")
	require.Contains(t, out, "already running")

	out, code = devServices(t, env, "status")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "started by this script")

	out, code = devServices(t, env, "down")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "stopping the dev server")
	require.NoFileExists(t, filepath.Join(dir, "temporal.pid"))
	require.Error(t, temporalReachableNow(addr))

	out, code = devServices(t, env, "down")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "nothing started by this script is running")

	out, code = devServices(t, env, "status")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "nothing answers at "+addr)
}

// temporalCLI returns the path of the Temporal CLI where dev-services.sh looks for it, or "".
func temporalCLI(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("temporal"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	dirs := []string{}
	if len(lines) > 0 && strings.TrimSpace(lines[0]) != "" {
		dirs = append(dirs, strings.TrimSpace(lines[0]))
	}
	if len(lines) > 1 {
		dirs = append(dirs, filepath.Join(strings.TrimSpace(lines[1]), "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "temporal")
		if info, err := os.Stat(p); err == nil && !info.IsDir() {
			return p
		}
	}
	return ""
}

func splitHostPort(addr string) (string, string, error) { return net.SplitHostPort(addr) }

// temporalReachableNow probes addr without the per-process cache.
func temporalReachableNow(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	return checkHealth(ctx, addr)
}
