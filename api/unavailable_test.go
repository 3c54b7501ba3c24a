package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/apitest"
)

// unavailableStore answers as a database that cannot be reached: the
// store's errors wrap commitlayer.ErrUnavailable.
type unavailableStore struct {
	Store
	downWrites, downAuth bool
}

func (u *unavailableStore) CreateAction(ctx context.Context, tenantID string, a commitlayer.Action, s, w time.Time,
	key string, hash []byte) (commitlayer.ActionRecord, bool, error) {
	if u.downWrites {
		return commitlayer.ActionRecord{}, false, fmt.Errorf("create action: %w: dial tcp 10.0.0.9:5432: connection refused (secret detail)", commitlayer.ErrUnavailable)
	}
	return u.Store.CreateAction(ctx, tenantID, a, s, w, key, hash)
}

func (u *unavailableStore) TenantByAPIKey(ctx context.Context, key string) (commitlayer.Tenant, error) {
	if u.downAuth {
		return commitlayer.Tenant{}, fmt.Errorf("tenant by api key: %w: terminating connection due to administrator command", commitlayer.ErrUnavailable)
	}
	return u.Store.TenantByAPIKey(ctx, key)
}

// TestDatabaseAwayAnswers503: with the database away the API answers 503
// with Retry-After (never a 500), and keeps the detail out of the answer.
func TestDatabaseAwayAnswers503(t *testing.T) {
	base := newEnv(t)
	u := &unavailableStore{Store: base.db}
	e := newEnv(t, withStore(u))
	_, key := e.tenant("db-away")
	e.contract(key, payoutContract)

	u.downWrites = true
	res := e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key,
		Body: map[string]any{"contract": "send_payout", "agent": "a", "subject": "account:acc_1"}})
	require.Equal(t, http.StatusServiceUnavailable, res.Status, "%s", res.Body)
	require.Equal(t, "1", res.Header.Get("Retry-After"))
	require.Equal(t, codeUnavailable, res.ErrCode(t))
	require.NotContains(t, string(res.Body), "secret detail")
	require.Contains(t, e.logs.String(), "secret detail")

	// The key lookup itself (every tenant route) fails the same way.
	u.downAuth = true
	res = e.do(apitest.Request{Method: "GET", Path: "/v1/contracts", Key: key})
	require.Equal(t, http.StatusServiceUnavailable, res.Status)
	require.Equal(t, "1", res.Header.Get("Retry-After"))

	u.downWrites, u.downAuth = false, false
	res = e.do(apitest.Request{Method: "POST", Path: "/v1/actions", Key: key,
		Body: map[string]any{"contract": "send_payout", "agent": "a", "subject": "account:acc_1"}})
	require.Equal(t, http.StatusAccepted, res.Status, "back: %s", res.Body)
}
