package extract_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/sandbox/extract"
	"github.com/commitlayer/commitlayer/sandbox/systems"
)

// The http_json query connector reads every system into the same facts,
// links and cursors as the http_events feed connector, and continues from
// its cursor.
func TestQueryConnectorReadsWhatTheFeedReads(t *testing.T) {
	ctx := context.Background()
	e := newEnterprise(t)
	feed := extract.New(e.URL(), nil)
	query := extract.New(e.URL(), nil)
	query.Query = systems.Names

	a, err := feed.Pull(ctx)
	require.NoError(t, err)
	b, err := query.Pull(ctx)
	require.NoError(t, err)
	require.Empty(t, b.Unreachable)
	require.NotEmpty(t, b.Facts)
	require.Equal(t, a.Facts, b.Facts)
	require.Equal(t, a.Cursors, b.Cursors)
	require.Equal(t, feed.Connected(), query.Connected())

	again, err := query.Pull(ctx)
	require.NoError(t, err)
	require.Empty(t, again.Facts, "nothing read twice")
	require.Equal(t, b.Cursors, again.Cursors)
}
