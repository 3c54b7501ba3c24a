package service_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/service"
)

const contractSrc = `id: %s
subject: account
settlement: 10m
watch: 1h
sources: [ledger]
effects:
  - id: payout
    source: ledger
    type: payout_sent
`

// memStore keeps contract versions and records actions in memory; the
// store methods it does not define panic (nil ActionStore).
type memStore struct {
	service.ActionStore
	gets    int
	created []commitlayer.Action
}

func (m *memStore) GetContract(_ context.Context, _ string, id string, version int) (commitlayer.ContractRecord, error) {
	m.gets++
	if id == "missing" {
		return commitlayer.ContractRecord{}, fmt.Errorf("get: %w", commitlayer.ErrNotFound)
	}
	if version == 0 {
		version = 1
	}
	src := fmt.Sprintf(contractSrc, id)
	if id == "broken" {
		src = "id: broken\nsubject: account\n"
	}
	return commitlayer.ContractRecord{ID: id, Version: version, Source: []byte(src)}, nil
}

func (m *memStore) CreateAction(_ context.Context, _ string, a commitlayer.Action, settles, watch time.Time, _ string, _ []byte) (commitlayer.ActionRecord, bool, error) {
	m.created = append(m.created, a)
	return commitlayer.ActionRecord{Action: a, SettlesAt: settles, WatchUntil: watch}, true, nil
}

func (m *memStore) FactsOfKinds(context.Context, string, []commitlayer.FactType, time.Time, time.Time) ([]commitlayer.Fact, error) {
	return nil, nil
}

func (m *memStore) ActionsOfContract(context.Context, string, string, time.Time) ([]commitlayer.Action, error) {
	return nil, nil
}

// TestContractsCacheIsBounded: compiled versions are kept (a version never
// changes), at most size of them; the least recently used goes first.
func TestContractsCacheIsBounded(t *testing.T) {
	st := &memStore{}
	cs := service.NewContracts(st, 3)
	ctx := context.Background()
	for i := range 10 {
		_, c, err := cs.Load(ctx, "t", fmt.Sprintf("c%d", i), 1)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("c%d", i), c.ID())
	}
	require.Equal(t, 3, cs.Len())
	gets := st.gets
	_, _, err := cs.Load(ctx, "t", "c9", 1)
	require.NoError(t, err)
	require.Equal(t, gets, st.gets, "a kept version is not read again")
	_, _, err = cs.Load(ctx, "t", "c0", 1)
	require.NoError(t, err)
	require.Equal(t, gets+1, st.gets, "an evicted one is")
}

func TestContractsErrors(t *testing.T) {
	cs := service.NewContracts(&memStore{}, 0)
	_, _, err := cs.Load(context.Background(), "t", "missing", 0)
	var ce *commitlayer.Error
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, service.CodeUnknownContract, ce.Code)
	require.ErrorIs(t, err, commitlayer.ErrInvalid)

	_, _, err = cs.Load(context.Background(), "t", "broken", 1)
	var stale *service.StaleContractError
	require.True(t, errors.As(err, &stale), "%v", err)
	require.ErrorIs(t, err, commitlayer.ErrInvalid)
	require.Contains(t, err.Error(), "no longer compiles")
}

// TestRecordPinsAndChecks: Record defaults requested_at, pins the contract
// version, checks the subject type and computes the windows — for the API
// and the harness alike.
func TestRecordPinsAndChecks(t *testing.T) {
	st := &memStore{}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	acts := service.NewActions(st, service.NewContracts(st, 0), nil, func() time.Time { return now }, nil)
	rec, created, err := acts.Record(context.Background(), "t", commitlayer.Action{Contract: "payout", Agent: "a",
		Subject: "account:acc_1"}, "k", []byte("h"))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, 1, rec.ContractVersion)
	require.Equal(t, now, rec.RequestedAt)
	require.Equal(t, now.Add(10*time.Minute), rec.SettlesAt)
	require.Equal(t, now.Add(70*time.Minute), rec.WatchUntil)

	_, _, err = acts.Record(context.Background(), "t", commitlayer.Action{Contract: "payout", Agent: "a",
		Subject: "order:o_1"}, "", nil)
	var ce *commitlayer.Error
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, service.CodeSubjectMismatch, ce.Code)
	require.Len(t, st.created, 1, "a refused action is not stored")
}
