package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// textArrayCodec is pgx's codec for text[] with a faster encoder for the
// one Go type the store sends as text[], []string, in the binary format.
// pgx's own array encoder boxes every element into an interface and runs an
// element plan on it: a fact batch sends eight arrays of a thousand strings,
// and that was ~16 % of the API process's CPU on POST /v1/facts
// (docs/benchmarks.md, "Session 15"). Everything else (other Go types, the
// text format, scanning) is pgx's codec unchanged.
type textArrayCodec struct {
	pgtype.Codec
}

func (c textArrayCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.([]string); ok && format == pgtype.BinaryFormatCode {
		return encodeStringsBinary{}
	}
	return c.Codec.PlanEncode(m, oid, format, value)
}

// encodeStringsBinary writes a []string as PostgreSQL's binary array of
// text (array_recv's input): a nil slice is NULL, an empty one the empty
// array, as pgx writes them.
type encodeStringsBinary struct{}

func (encodeStringsBinary) Encode(value any, buf []byte) ([]byte, error) {
	ss := value.([]string)
	if ss == nil {
		return nil, nil // NULL
	}
	if len(ss) > math.MaxInt32 {
		return nil, fmt.Errorf("text[] of %d elements is too long", len(ss))
	}
	size := 20 + 4*len(ss)
	for _, s := range ss {
		if len(s) > math.MaxInt32 {
			return nil, fmt.Errorf("text[] element of %d bytes is too long", len(s))
		}
		size += len(s)
	}
	buf = slices.Grow(buf, size)
	// One dimension, as pgx writes it even for the empty array (the
	// server reads a dimension of length 0 as the empty array).
	buf = binary.BigEndian.AppendUint32(buf, 1)
	buf = binary.BigEndian.AppendUint32(buf, 0) // no NULL elements
	buf = binary.BigEndian.AppendUint32(buf, pgtype.TextOID)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(ss)))
	buf = binary.BigEndian.AppendUint32(buf, 1) // lower bound
	for _, s := range ss {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
		buf = append(buf, s...)
	}
	return buf, nil
}

// registerTextArray puts textArrayCodec in a new connection's type map.
func registerTextArray(_ context.Context, conn *pgx.Conn) error {
	m := conn.TypeMap()
	t, ok := m.TypeForOID(pgtype.TextArrayOID)
	if !ok {
		return fmt.Errorf("pgx has no type for text[] (oid %d)", pgtype.TextArrayOID)
	}
	if _, done := t.Codec.(textArrayCodec); done {
		return nil
	}
	m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: textArrayCodec{t.Codec}})
	return nil
}
