package pgquery

import (
	"crypto/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitlayer/commitlayer/internal/secrets"
)

func TestSealDSN(t *testing.T) {
	raw := make([]byte, secrets.KeySize)
	_, _ = rand.Read(raw)
	box, err := secrets.New(raw)
	require.NoError(t, err)
	config := func(dsn string) []byte {
		return []byte(`{"dsn":` + quote(dsn) + `,"queries":[{"type":"refund_created","sql":"SELECT id, order_id, created_at FROM refunds WHERE $1::text IS NULL OR id::text > $1 ORDER BY id","cursor":"id","subject":"order_id","subject_type":"order","occurred_at":"created_at"}]}`)
	}
	for _, tc := range []struct{ dsn, stored string }{
		{"postgres://reader:s3cr3t-pw@db.internal:5432/shop?sslmode=require", "postgres://reader@db.internal:5432/shop?sslmode=require"},
		{"postgres://reader@db.internal/shop?password=s3cr3t-pw&sslmode=disable", "postgres://reader@db.internal/shop?sslmode=disable"},
		{"host=db.internal user=reader password=s3cr3t-pw dbname=shop", "host=db.internal user=reader dbname=shop"},
		{"host=db.internal user=reader password='s3cr3t-pw' dbname=shop", "host=db.internal user=reader dbname=shop"},
	} {
		out, sealed, err := SealDSN(box, "t1", "conn_1", config(tc.dsn))
		require.NoError(t, err, tc.dsn)
		require.NotEmpty(t, sealed)
		require.NotContains(t, string(out), "s3cr3t-pw", "the stored config holds no password")
		require.NotContains(t, sealed, "s3cr3t-pw")
		cfg, err := ParseConfig(out)
		require.NoError(t, err)
		require.Equal(t, tc.stored, cfg.DSN)
		opened, err := OpenDSN(box, "t1", "conn_1", sealed)
		require.NoError(t, err)
		require.Equal(t, tc.dsn, opened)
		_, err = OpenDSN(box, "t1", "conn_2", sealed)
		require.Error(t, err, "bound to its connector")
		back, err := WithDSN(out, opened)
		require.NoError(t, err)
		cfg, err = ParseConfig(back)
		require.NoError(t, err)
		require.Equal(t, tc.dsn, cfg.DSN)

		_, _, err = SealDSN(nil, "t1", "conn_1", config(tc.dsn))
		require.ErrorIs(t, err, ErrPasswordNeedsKey)
	}
	// No password: nothing sealed, the config kept as given (no key needed).
	in := config("postgres://reader@db.internal/shop")
	out, sealed, err := SealDSN(nil, "t1", "conn_1", in)
	require.NoError(t, err)
	require.Empty(t, sealed)
	require.Equal(t, string(in), string(out))
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
