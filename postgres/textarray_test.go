package postgres

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"
)

// textArrayCases are []string values of every shape the store sends.
func textArrayCases() map[string][]string {
	long := make([]string, 1000)
	for i := range long {
		long[i] = strings.Repeat("x", i%40) + "é€😀"
	}
	return map[string][]string{
		"nil":       nil,
		"empty":     {},
		"one empty": {""},
		"one":       {"account:a_1"},
		"syntax":    {`{"a":1}`, `with "quotes"`, `back\slash`, "tab\there", "{braces}", "NULL", "comma,inside", " spaced "},
		"thousand":  long,
	}
}

// TestTextArrayEncoderMatchesPgx: the fast encoder writes what pgx's own
// text[] encoder writes, after whatever the buffer held.
func TestTextArrayEncoderMatchesPgx(t *testing.T) {
	m := pgtype.NewMap()
	for name, v := range textArrayCases() {
		t.Run(name, func(t *testing.T) {
			for _, prefix := range [][]byte{nil, []byte("head"), make([]byte, 3, 4096)} {
				want, err := m.Encode(pgtype.TextArrayOID, pgtype.BinaryFormatCode, v, append([]byte(nil), prefix...))
				require.NoError(t, err)
				got, err := encodeStringsBinary{}.Encode(v, append([]byte(nil), prefix...))
				require.NoError(t, err)
				if v == nil {
					require.Nil(t, got, "a nil slice is NULL")
					continue
				}
				require.Equal(t, want, got)
			}
		})
	}
	// Random strings, as pgx writes them.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		v := make([]string, rng.IntN(20))
		for i := range v {
			b := make([]byte, rng.IntN(30))
			for j := range b {
				b[j] = byte(1 + rng.IntN(255))
			}
			v[i] = string(b)
		}
		want, err := m.Encode(pgtype.TextArrayOID, pgtype.BinaryFormatCode, v, nil)
		require.NoError(t, err)
		got, err := encodeStringsBinary{}.Encode(v, nil)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}

// TestTextArrayThroughTheServer: the store's connections use the encoder,
// and PostgreSQL reads back every element, NULL and the empty array as
// sent; other Go types still go through pgx's codec.
func TestTextArrayThroughTheServer(t *testing.T) {
	db := testStore(t)
	ctx := context.Background()
	conn, err := db.pool.Acquire(ctx)
	require.NoError(t, err)
	typ, ok := conn.Conn().TypeMap().TypeForOID(pgtype.TextArrayOID)
	conn.Release()
	require.True(t, ok)
	require.IsType(t, textArrayCodec{}, typ.Codec)

	for name, v := range textArrayCases() {
		t.Run(name, func(t *testing.T) {
			var (
				back   []string
				isNull bool
				n      int
			)
			err := db.pool.QueryRow(ctx, `SELECT $1::text[], $1::text[] IS NULL, coalesce(cardinality($1::text[]), -1)`, v).
				Scan(&back, &isNull, &n)
			require.NoError(t, err)
			if v == nil {
				require.True(t, isNull)
				return
			}
			require.False(t, isNull)
			require.Equal(t, len(v), n)
			if len(v) == 0 {
				require.Empty(t, back)
				return
			}
			require.Equal(t, v, back)
		})
	}
	// Not a []string: pgx's own plans.
	var back []string
	require.NoError(t, db.pool.QueryRow(ctx, `SELECT $1::text[]`, []any{"a", "b"}).Scan(&back))
	require.Equal(t, []string{"a", "b"}, back)
	require.NoError(t, db.pool.QueryRow(ctx, `SELECT $1::text[]`, pgtype.FlatArray[string]{"c"}).Scan(&back))
	require.Equal(t, []string{"c"}, back)
	// A NUL byte is refused by the server, as before.
	err = db.pool.QueryRow(ctx, `SELECT $1::text[]`, []string{"a\x00b"}).Scan(&back)
	require.Error(t, err)
}

// BenchmarkTextArrayEncode: a fact batch's column, 1 000 strings, by pgx's
// encoder and by encodeStringsBinary.
func BenchmarkTextArrayEncode(b *testing.B) {
	v := make([]string, 1000)
	for i := range v {
		v[i] = "account:bench_" + strings.Repeat("7", i%12)
	}
	buf := make([]byte, 0, 64<<10)
	b.Run("pgx", func(b *testing.B) {
		m := pgtype.NewMap()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Encode(pgtype.TextArrayOID, pgtype.BinaryFormatCode, v, buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		m := pgtype.NewMap()
		t, _ := m.TypeForOID(pgtype.TextArrayOID)
		m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: textArrayCodec{t.Codec}})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Encode(pgtype.TextArrayOID, pgtype.BinaryFormatCode, v, buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
