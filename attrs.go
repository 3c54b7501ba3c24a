package commitlayer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Attrs are the attributes of a fact or the params of an action. Numbers
// decoded from JSON are int64 when they are integral (money is integer minor
// units) and float64 otherwise, so predicates compare exact integers.
type Attrs map[string]any

// UnmarshalJSON decodes an object keeping integers exact.
func (a *Attrs) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*a = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	n, err := NormalizeValue(m)
	if err != nil {
		return err
	}
	*a = n.(map[string]any)
	return nil
}

// NormalizeValue turns a decoded JSON (or YAML) value into the types the
// engine evaluates: json.Number and all Go integer kinds become int64 when
// integral, other numbers float64; maps and slices are normalized
// recursively. Values of other types are an error.
//
// Numbers are kept exact or refused, never rounded: an integer outside
// int64 is an error (ErrInexact), and so is a non-integer number whose
// magnitude is 2^53 or more (a float64 there no longer tells whole units
// apart: 2^64 and 2^64+1 would compare equal). Money is integer minor units
// and int64 holds every amount a system of record keeps; a larger
// identifier belongs in a string.
func NormalizeValue(v any) (any, error) { return normalize(v, true) }

// NormalizeStoredValue is NormalizeValue for values read back from storage:
// a number stored before the exactness rule (a float beyond 2^53) is kept
// as it is rather than failing the read; the contracts refuse to compare it.
func NormalizeStoredValue(v any) (any, error) { return normalize(v, false) }

// ErrInexact is wrapped by the errors of numbers NormalizeValue refuses.
var ErrInexact = errors.New("cannot be kept exactly")

// maxExactFloat is 2^53: from there on a float64 skips whole numbers.
const maxExactFloat = 1 << 53

func exactFloat(f float64, strict bool, text string) (any, error) {
	if strict && (math.IsInf(f, 0) || math.IsNaN(f) || math.Abs(f) >= maxExactFloat) {
		return nil, fmt.Errorf("number %s %w: beyond ±2^53 a non-integer number does not tell whole units apart (send an integer of at most 2^63−1, or a string)", text, ErrInexact)
	}
	return normFloat(f), nil
}

func normalize(v any, strict bool) (any, error) {
	switch x := v.(type) {
	case nil, bool, string, int64:
		return v, nil
	case float64:
		if _, err := exactFloat(x, strict, strconv.FormatFloat(x, 'g', -1, 64)); err != nil {
			return nil, err
		}
		return x, nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		if strict && !strings.ContainsAny(string(x), ".eE") {
			return nil, fmt.Errorf("integer %s %w: it does not fit in 64 bits (−2^63 to 2^63−1); send a larger identifier as a string", Clip(string(x), 40), ErrInexact)
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s out of range", Clip(string(x), 40))
		}
		return exactFloat(f, strict, Clip(string(x), 40))
	case float32:
		return exactFloat(float64(x), strict, strconv.FormatFloat(float64(x), 'g', -1, 32))
	case int:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case uint:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return nil, fmt.Errorf("integer %d %w: it does not fit in 64 bits (−2^63 to 2^63−1)", x, ErrInexact)
		}
		return int64(x), nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := normalize(e, strict)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = n
		}
		return out, nil
	case Attrs:
		return normalize(map[string]any(x), strict)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalize(e, strict)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = n
		}
		return out, nil
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = e
		}
		return out, nil
	default:
		return nil, fmt.Errorf("unsupported value of type %T", v)
	}
}

// normFloat keeps floats that hold an exact integer as int64, so 2500.0 and
// 2500 compare equal as money.
func normFloat(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return f
}

// Normalize returns a normalized copy of a (see NormalizeValue).
func (a Attrs) Normalize() (Attrs, error) {
	if a == nil {
		return nil, nil
	}
	n, err := NormalizeValue(map[string]any(a))
	if err != nil {
		return nil, err
	}
	return Attrs(n.(map[string]any)), nil
}
