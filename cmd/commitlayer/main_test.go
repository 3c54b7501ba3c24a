package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/commitlayer/commitlayer/api"
	"github.com/commitlayer/commitlayer/workflows"
	"github.com/stretchr/testify/require"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCLIUsage(t *testing.T) {
	code, _, stderr := runCLI(t)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "usage: commitlayer")
	code, stdout, _ := runCLI(t, "help")
	require.Zero(t, code)
	require.Contains(t, stdout, "contracts lint")
	code, _, stderr = runCLI(t, "teleport")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `unknown command "teleport"`)
	code, _, stderr = runCLI(t, "contracts", "check", "x.yaml")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "contracts lint FILE")
	code, _, _ = runCLI(t, "sandbox", "-concurrency", "0")
	require.Equal(t, 2, code)
	code, _, _ = runCLI(t, "sandbox", "extra")
	require.Equal(t, 2, code)
	code, _, _ = runCLI(t, "bench", "fly")
	require.Equal(t, 2, code)
}

func TestCLIContractsLint(t *testing.T) {
	good, err := filepath.Glob(filepath.Join("..", "..", "sandbox", "contracts", "*.yaml"))
	require.NoError(t, err)
	require.Len(t, good, 8)
	code, stdout, _ := runCLI(t, append([]string{"contracts", "lint"}, good...)...)
	require.Zero(t, code, stdout)

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("id: bad\nsettlement: 0s\nsources: [x]\nbogus: 1\n"), 0o644))
	code, stdout, _ = runCLI(t, "contracts", "lint", good[0], bad)
	require.Equal(t, 1, code)
	require.Contains(t, stdout, bad+":2: settlement:")
	require.Contains(t, stdout, bad+":4: bogus: unknown field")
	require.False(t, strings.Contains(stdout, good[0]), "a valid file prints nothing")
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("COMMITLAYER_ADMIN_KEY", "")
	_, err := configFromEnv(Roles{API: true})
	require.ErrorContains(t, err, "COMMITLAYER_ADMIN_KEY")
	cfg, err := configFromEnv(Roles{Worker: true})
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8080", cfg.Addr)
	require.Equal(t, "commitlayer", cfg.TaskQueue)

	t.Setenv("COMMITLAYER_ADMIN_KEY", "0123456789abcdef")
	t.Setenv("COMMITLAYER_POLL_INTERVAL", "soon")
	_, err = configFromEnv(Roles{API: true})
	require.ErrorContains(t, err, "COMMITLAYER_POLL_INTERVAL")
	t.Setenv("COMMITLAYER_POLL_INTERVAL", "30s")
	t.Setenv("COMMITLAYER_ADDR", "0.0.0.0:9999")
	t.Setenv("TEMPORAL_ADDRESS", "temporal.example:7233")
	t.Setenv("TEMPORAL_NAMESPACE", "prod")
	cfg, err = configFromEnv(Roles{API: true})
	require.NoError(t, err)
	require.Equal(t, "0.0.0.0:9999", cfg.Addr)
	require.Equal(t, "temporal.example:7233", cfg.Temporal.HostPort)
	require.Equal(t, "prod", cfg.Temporal.Namespace)
	require.Equal(t, "30s", cfg.PollInterval.String())
}

func TestConfigMetrics(t *testing.T) {
	t.Setenv("COMMITLAYER_METRICS_ADDR", "")
	t.Setenv("COMMITLAYER_METRICS_ADMIN", "")
	cfg, err := configFromEnv(Roles{Worker: true})
	require.NoError(t, err)
	require.Equal(t, api.MetricsOpen, cfg.metricsMode())
	t.Setenv("COMMITLAYER_METRICS_ADMIN", "1")
	cfg, err = configFromEnv(Roles{Worker: true})
	require.NoError(t, err)
	require.Equal(t, api.MetricsAdmin, cfg.metricsMode())
	t.Setenv("COMMITLAYER_METRICS_ADDR", "127.0.0.1:9464")
	cfg, err = configFromEnv(Roles{Worker: true})
	require.NoError(t, err)
	require.Equal(t, api.MetricsOff, cfg.metricsMode(), "served on its own address, not the API's")
	t.Setenv("COMMITLAYER_METRICS_ADMIN", "yes")
	_, err = configFromEnv(Roles{Worker: true})
	require.ErrorContains(t, err, "COMMITLAYER_METRICS_ADMIN")
}

// TestConfigDormancy: COMMITLAYER_DORMANT_AFTER and COMMITLAYER_DORMANT_MIN_AGE
// reach the config (default workflows.DefaultDormancy; off turns it off);
// bad values are refused by name.
func TestConfigDormancy(t *testing.T) {
	cfg, err := configFromEnv(Roles{Worker: true})
	require.NoError(t, err)
	require.Equal(t, workflows.DefaultDormancy, cfg.Dormancy)
	require.True(t, cfg.Dormancy.Enabled())

	t.Setenv("COMMITLAYER_DORMANT_AFTER", "30m")
	t.Setenv("COMMITLAYER_DORMANT_MIN_AGE", "5m")
	cfg, err = configFromEnv(Roles{Worker: true})
	require.NoError(t, err)
	require.Equal(t, workflows.Dormancy{MinWait: 30 * time.Minute, MinAge: 5 * time.Minute}, cfg.Dormancy)
	require.Equal(t, 150*time.Second, cfg.Dormancy.WakeByStart())

	for _, off := range []string{"off", "0", "0s", "OFF"} {
		t.Setenv("COMMITLAYER_DORMANT_AFTER", off)
		cfg, err = configFromEnv(Roles{Worker: true})
		require.NoError(t, err, off)
		require.False(t, cfg.Dormancy.Enabled(), off)
	}
	t.Setenv("COMMITLAYER_DORMANT_AFTER", "")
	for name, bad := range map[string]string{"COMMITLAYER_DORMANT_AFTER": "-1m", "COMMITLAYER_DORMANT_MIN_AGE": "1s"} {
		t.Setenv(name, bad)
		_, err = configFromEnv(Roles{Worker: true})
		require.ErrorContains(t, err, name)
		t.Setenv(name, "")
	}
	t.Setenv("COMMITLAYER_DORMANT_MIN_AGE", "soon")
	_, err = configFromEnv(Roles{Worker: true})
	require.ErrorContains(t, err, "COMMITLAYER_DORMANT_MIN_AGE")
}
