package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/internal/testenv"
	"github.com/commitlayer/commitlayer/service"
	"github.com/commitlayer/commitlayer/verify"
)

// poisonFixture records, through the store (the reconciler's path: no
// start tried), one poisoned action first — its agent longer than Temporal
// takes in a search attribute, written past the door's validation as an
// older version of the API accepted it — then one action in each of five
// other tenants.
type poisonFixture struct {
	s          *stack
	poisonKey  string
	poisonID   string
	keys, ids  []string
	contractID string
}

func newPoisonFixture(t *testing.T, s *stack) *poisonFixture {
	t.Helper()
	f := &poisonFixture{s: s, contractID: "payout_poison"}
	ctx := context.Background()
	record := func(key, subject string) string {
		tenantID := tenantOfKey(s, key)
		now := time.Now().UTC()
		s.do(key, "POST", "/v1/facts", map[string]any{"facts": []any{
			fact("account_opened", subject, subject+"-opened", now.Add(-time.Hour), map[string]any{"status": "active"}),
		}}, 200, nil)
		rec, created, err := s.m.Actions.Record(ctx, tenantID, commitlayer.Action{
			Contract: f.contractID, Agent: "agent-1", Subject: commitlayer.Subject(subject),
			Params: commitlayer.Attrs{"amount": int64(100)}, RequestedAt: now,
			Claim: commitlayer.Claim{Status: commitlayer.ClaimSuccess},
		}, "", nil)
		require.NoError(t, err)
		require.True(t, created)
		return rec.ID
	}
	f.poisonKey = s.tenant()
	s.do(f.poisonKey, "POST", "/v1/contracts", payoutContract(f.contractID, "1s", "10m"), 201, nil)
	f.poisonID = record(f.poisonKey, "account:acc_poison")
	_, err := s.m.DB.Pool().Exec(ctx, `UPDATE actions SET agent = repeat('a', 3000) WHERE id = $1`, f.poisonID)
	require.NoError(t, err)
	for i := range 5 {
		key := s.tenant()
		s.do(key, "POST", "/v1/contracts", payoutContract(f.contractID, "1s", "10m"), 201, nil)
		f.keys = append(f.keys, key)
		f.ids = append(f.ids, record(key, fmt.Sprintf("account:acc_%d", i)))
	}
	return f
}

type getView struct {
	Verification      string                `json:"verification"`
	VerificationError string                `json:"verification_error"`
	History           []commitlayer.Verdict `json:"history"`
}

func (f *poisonFixture) get(key, id string) getView {
	var v getView
	f.s.do(key, "GET", "/v1/actions/"+id, nil, 200, &v)
	return v
}

// verified reports whether each of the five has a verdict and the poisoned
// one is marked failed.
func (f *poisonFixture) done() bool {
	for i, id := range f.ids {
		if len(f.get(f.keys[i], id).History) == 0 {
			return false
		}
	}
	return f.get(f.poisonKey, f.poisonID).Verification == commitlayer.VerificationFailed
}

func (f *poisonFixture) requireFailedPoison(t *testing.T) {
	t.Helper()
	v := f.get(f.poisonKey, f.poisonID)
	require.Equal(t, commitlayer.VerificationFailed, v.Verification)
	require.Contains(t, v.VerificationError, "CommitLayerAgent", "the reason names what Temporal refused")
	require.Empty(t, v.History)
}

// TestPoisonedStartDoesNotStopOtherTenants: a start Temporal refuses for
// good, oldest in the queue, is marked failed (the tenant sees
// "verification":"failed" with the reason) and every other tenant's
// pending action is verified by the process's own reconciler.
func TestPoisonedStartDoesNotStopOtherTenants(t *testing.T) {
	s := newStack(t, Roles{API: true, Worker: true})
	f := newPoisonFixture(t, s)
	deadline := time.Now().Add(2 * time.Minute)
	for !f.done() {
		require.False(t, time.Now().After(deadline), "not every other tenant's action was verified")
		time.Sleep(200 * time.Millisecond)
	}
	f.requireFailedPoison(t)
}

// TestPoisonedStartAcrossAnOutage: the same queue, first reconciled while
// Temporal is away (a client on a closed port: nothing starts, nothing is
// marked failed, since an absent Temporal says nothing of a start), then
// with Temporal back: the poisoned start is marked failed and logged once,
// and the five others are verified.
func TestPoisonedStartAcrossAnOutage(t *testing.T) {
	s := newStack(t, Roles{API: true, Worker: true})
	// This test drives the reconciliation itself.
	s.m.stop[0]() // the reconciler: the first loop Start runs
	f := newPoisonFixture(t, s)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	dead, err := client.NewLazyClient(client.Options{HostPort: closed, Namespace: testenv.Namespace()})
	require.NoError(t, err)
	t.Cleanup(dead.Close)
	away := service.NewReconciler(service.NewActions(s.m.DB, s.m.Contracts, &verify.Client{Temporal: dead, TaskQueue: s.m.Config.TaskQueue},
		nil, slog.New(slog.DiscardHandler)))
	away.StartAfter = time.Millisecond
	time.Sleep(10 * time.Millisecond) // past StartAfter
	for range 3 {
		_, started := away.Round(t.Context())
		require.Zero(t, started)
	}
	require.Equal(t, commitlayer.VerificationPending, f.get(f.poisonKey, f.poisonID).Verification,
		"Temporal away says nothing of the start: still pending")
	for i, id := range f.ids {
		require.Equal(t, commitlayer.VerificationPending, f.get(f.keys[i], id).Verification)
	}

	var logs syncBuffer
	back := service.NewReconciler(service.NewActions(s.m.DB, s.m.Contracts, s.m.Verifier, nil, slog.New(slog.NewTextHandler(&logs, nil))))
	back.StartAfter = time.Millisecond
	deadline := time.Now().Add(2 * time.Minute)
	for !f.done() {
		require.False(t, time.Now().After(deadline), "not every action was verified after the outage")
		back.Round(t.Context())
		time.Sleep(200 * time.Millisecond)
	}
	f.requireFailedPoison(t)
	for range 5 { // more rounds: the poisoned start is not tried (or logged) again
		back.Round(t.Context())
	}
	require.Equal(t, 1, strings.Count(logs.String(), f.poisonID), "the poisoned start is logged once:\n%s", logs.String())
}
