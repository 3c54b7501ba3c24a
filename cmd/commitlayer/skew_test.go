package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/api"
)

func TestConfigMaxFutureSkew(t *testing.T) {
	t.Setenv("COMMITLAYER_ADMIN_KEY", "0123456789abcdef")
	t.Setenv("COMMITLAYER_MAX_FUTURE_SKEW", "")
	cfg, err := configFromEnv(Roles{API: true})
	require.NoError(t, err)
	require.Equal(t, api.DefaultMaxFutureSkew, cfg.MaxFutureSkew)
	for _, bad := range []string{"tomorrow", "24", "0s", "-1h"} {
		t.Setenv("COMMITLAYER_MAX_FUTURE_SKEW", bad)
		_, err = configFromEnv(Roles{API: true})
		require.ErrorContains(t, err, "COMMITLAYER_MAX_FUTURE_SKEW", bad)
	}
	t.Setenv("COMMITLAYER_MAX_FUTURE_SKEW", "90m")
	cfg, err = configFromEnv(Roles{API: true})
	require.NoError(t, err)
	require.Equal(t, 90*time.Minute, cfg.MaxFutureSkew)
}

// TestMaxFutureSkewReachesTheAPI starts the API with a one-minute skew: a
// fact two minutes ahead is refused, one ten seconds ahead is taken.
func TestMaxFutureSkewReachesTheAPI(t *testing.T) {
	t.Setenv("COMMITLAYER_MAX_FUTURE_SKEW", "1m")
	s := newStack(t, Roles{API: true})
	key := s.tenant()
	post := func(id string, ahead time.Duration, want int) {
		s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{map[string]any{
			"source": "ledger", "type": "payout_sent", "subject": "account:acc_1", "external_id": id,
			"occurred_at": time.Now().Add(ahead).UTC().Format(time.RFC3339Nano)}}}, want, nil)
	}
	post("ahead-2m", 2*time.Minute, 400)
	post("ahead-10s", 10*time.Second, 200)
}
