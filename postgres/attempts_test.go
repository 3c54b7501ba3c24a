package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// TestRecordAttempt: an attempt sets the action's claim and joins its
// trace once per key; the same key with another request, or for another
// action, is a conflict; an unknown action is not found; an attempt made
// before the latest recorded one joins the trace but leaves the claim.
func TestRecordAttempt(t *testing.T) {
	db := testStore(t)
	ctx := context.Background()
	tn := newTenant(t)
	a := mkAction("act_att", "order:o1", t0)
	a.Claim = commitlayer.Claim{Status: commitlayer.ClaimFailure, Message: "timeout"}
	a.Trace = json.RawMessage(`[{"request_id":"1"}]`)
	_, _, err := db.CreateAction(ctx, tn.ID, a, t0.Add(time.Hour), t0.Add(2*time.Hour), "k1", []byte("h"))
	require.NoError(t, err)
	_, _, err = db.CreateAction(ctx, tn.ID, mkAction("act_other", "order:o1", t0), t0.Add(time.Hour), t0.Add(2*time.Hour), "", nil)
	require.NoError(t, err)

	ok := commitlayer.Claim{Status: commitlayer.ClaimSuccess, Message: "refunded"}
	rec, created, err := db.RecordAttempt(ctx, tn.ID, "act_att", "k2", ok, json.RawMessage(`{"request_id":"2"}`), t0.Add(time.Minute), []byte("a2"))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, ok, rec.Claim)
	require.JSONEq(t, `[{"request_id":"1"},{"request_id":"2"}]`, string(rec.Trace))

	rec, created, err = db.RecordAttempt(ctx, tn.ID, "act_att", "k2", ok, json.RawMessage(`{"request_id":"2"}`), t0.Add(time.Minute), []byte("a2"))
	require.NoError(t, err)
	require.False(t, created, "the same attempt again")
	require.JSONEq(t, `[{"request_id":"1"},{"request_id":"2"}]`, string(rec.Trace))

	_, _, err = db.RecordAttempt(ctx, tn.ID, "act_att", "k2", a.Claim, json.RawMessage(`{}`), t0, []byte("other"))
	require.ErrorIs(t, err, commitlayer.ErrConflict)
	_, _, err = db.RecordAttempt(ctx, tn.ID, "act_other", "k2", ok, json.RawMessage(`{}`), t0, []byte("a2"))
	require.ErrorIs(t, err, commitlayer.ErrConflict, "the key names another action")
	_, _, err = db.RecordAttempt(ctx, tn.ID, "act_missing", "k3", ok, json.RawMessage(`{}`), t0, []byte("a3"))
	require.ErrorIs(t, err, commitlayer.ErrNotFound)

	// An attempt that began before the latest one recorded (posted late):
	// in the trace, not the claim.
	rec, created, err = db.RecordAttempt(ctx, tn.ID, "act_att", "k0", a.Claim, json.RawMessage(`{"request_id":"0"}`), t0.Add(30*time.Second), []byte("a0"))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, ok, rec.Claim)
	require.Len(t, decodeTrace(t, rec.Trace), 3)

	// The trace keeps at most maxAttemptsInTrace entries; the claim follows
	// every attempt.
	for i := range maxAttemptsInTrace + 3 {
		c := commitlayer.Claim{Status: commitlayer.ClaimFailure, Message: "again"}
		rec, _, err = db.RecordAttempt(ctx, tn.ID, "act_att", "many-"+string(rune('a'+i%26))+string(rune('a'+i/26)), c,
			json.RawMessage(`{}`), t0.Add(time.Hour+time.Duration(i)*time.Second), []byte("m"))
		require.NoError(t, err)
	}
	require.Len(t, decodeTrace(t, rec.Trace), maxAttemptsInTrace)
	require.Equal(t, "again", rec.Claim.Message)
	got, err := db.GetAction(ctx, tn.ID, "act_att")
	require.NoError(t, err)
	require.Equal(t, rec, got)
}

func decodeTrace(t *testing.T, raw json.RawMessage) []any {
	var out []any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}
