package activities_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/activities"
	"github.com/commitlayer/commitlayer/connectors/pgquery"
	"github.com/commitlayer/commitlayer/internal/secrets"
	"github.com/commitlayer/commitlayer/internal/testenv"
)

// TestExtractPullsAPostgresConnectorWithASealedDSN: a postgres
// connector's DSN password is sealed at rest (the stored config has the DSN
// without it) and opened for the pull; without the secrets key the source
// is unreachable and the password appears nowhere.
func TestExtractPullsAPostgresConnectorWithASealedDSN(t *testing.T) {
	fx := newFixture(t)
	ctx := context.Background()
	raw := make([]byte, secrets.KeySize)
	_, _ = rand.Read(raw)
	box, err := secrets.New(raw)
	require.NoError(t, err)

	base := testenv.Postgres(t)
	conn, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	schema := fmt.Sprintf("pgsealed_%d", time.Now().UnixNano())
	_, err = conn.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %[1]s;
CREATE TABLE %[1]s.refunds (id bigserial PRIMARY KEY, order_id text NOT NULL, amount bigint, created_at timestamptz NOT NULL);
INSERT INTO %[1]s.refunds (order_id, amount, created_at) VALUES ('o_1', 100, now()), ('o_2', 200, now());`, schema))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		_ = conn.Close(context.Background())
	})

	// The local server trusts the loopback: the password is not checked,
	// but it is in the DSN as a tenant would give it.
	const password = "pw-sealed-4711"
	u, err := url.Parse(base)
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), password)
	config := fmt.Sprintf(`{"dsn":%q,"queries":[{"type":"refund_created","cursor":"id","subject":"order_id","subject_type":"order","occurred_at":"created_at",
"sql":"SELECT id, order_id, amount, created_at FROM %s.refunds WHERE $1::bigint IS NULL OR id > $1::bigint ORDER BY id LIMIT $2"}]}`, u.String(), schema)

	const connID = "conn_pg_sealed"
	stored, sealed, err := pgquery.SealDSN(box, fx.tenant, connID, []byte(config))
	require.NoError(t, err)
	require.NotContains(t, string(stored), password)
	_, err = fx.db.CreateConnector(ctx, fx.tenant, commitlayer.Connector{ID: connID, Source: "payments", Kind: pgquery.Kind,
		Config: stored, Secret: sealed})
	require.NoError(t, err)
	c, err := fx.db.GetConnector(ctx, fx.tenant, connID)
	require.NoError(t, err)
	require.NotContains(t, string(c.Config), password, "the database holds no password in clear")
	require.NotContains(t, c.Secret, password)

	fx.acts.Secrets = box
	val, err := fx.env.ExecuteActivity(fx.acts.Extract, activities.ExtractInput{TenantID: fx.tenant})
	require.NoError(t, err)
	var res activities.ExtractResult
	require.NoError(t, val.Get(&res))
	require.NotContains(t, res.Unreachable, "payments")
	require.Equal(t, 2, res.Inserted)

	fx.acts.Secrets = nil
	val, err = fx.env.ExecuteActivity(fx.acts.Extract, activities.ExtractInput{TenantID: fx.tenant})
	require.NoError(t, err)
	require.NoError(t, val.Get(&res))
	require.Contains(t, res.Unreachable, "payments")
	require.NotContains(t, res.Unreachable["payments"], password)
	require.NotContains(t, fx.logs.String(), password)
}
