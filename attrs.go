package commitlayer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
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
func NormalizeValue(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool, string, int64, float64:
		return v, nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s out of range", x)
		}
		return normFloat(f), nil
	case float32:
		return normFloat(float64(x)), nil
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
			return nil, fmt.Errorf("number %d out of range", x)
		}
		return int64(x), nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := NormalizeValue(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = n
		}
		return out, nil
	case Attrs:
		return NormalizeValue(map[string]any(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := NormalizeValue(e)
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
