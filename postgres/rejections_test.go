package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
)

// TestSpanRejectionsKeepTheNewestPerTenant: a tenant keeps its newest
// MaxSpanRejections, newest first; another tenant's are its own.
func TestSpanRejectionsKeepTheNewestPerTenant(t *testing.T) {
	db := testStore(t)
	ctx := context.Background()
	a, b := newTenant(t), newTenant(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	require.NoError(t, db.RecordSpanRejections(ctx, b.ID, []commitlayer.SpanRejection{{At: at, SpanID: "b1", Tool: "t", Dialect: "genai", Message: "of b"}}))
	for batch := range 3 {
		var rs []commitlayer.SpanRejection
		for i := range 30 {
			n := batch*30 + i
			rs = append(rs, commitlayer.SpanRejection{At: at.Add(time.Duration(n) * time.Second), TraceID: "tr", SpanID: fmt.Sprint(n),
				Tool: "refund", Dialect: "openinference", Message: fmt.Sprintf("span %d: no input.value", n)})
		}
		require.NoError(t, db.RecordSpanRejections(ctx, a.ID, rs))
	}
	got, err := db.SpanRejections(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, got, MaxSpanRejections)
	require.Equal(t, commitlayer.SpanRejection{At: at.Add(89 * time.Second), TraceID: "tr", SpanID: "89", Tool: "refund",
		Dialect: "openinference", Message: "span 89: no input.value"}, got[0])
	require.Equal(t, "40", got[len(got)-1].SpanID)
	other, err := db.SpanRejections(ctx, b.ID)
	require.NoError(t, err)
	require.Len(t, other, 1)
	require.Equal(t, "of b", other[0].Message)
}
