package commitlayer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Attrs are the attributes of a fact or the params of an action, with
// NormalizeValue's types, so predicates compare exact integers.
type Attrs map[string]any

// UnmarshalJSON decodes an object as UnmarshalJSONFrom does.
func (a *Attrs) UnmarshalJSON(b []byte) error { return jsonv2.Unmarshal(b, a) }

// UnmarshalJSONFrom decodes an object (null is nil) as NormalizeValue
// leaves it, refusing duplicate names and invalid UTF-8; a number refused
// is a *jsonv2.SemanticError naming where it is.
func (a *Attrs) UnmarshalJSONFrom(dec *jsontext.Decoder) error { return a.read(dec, true) }

// DecodeStoredAttrs decodes stored attrs as UnmarshalJSON does, but keeps a float beyond
// 2^53 stored before the exactness rule rather than failing (the contracts refuse it).
func DecodeStoredAttrs(b []byte) (Attrs, error) {
	var a storedAttrs
	err := jsonv2.Unmarshal(b, &a)
	return Attrs(a), err
}

type storedAttrs Attrs

func (a *storedAttrs) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return (*Attrs)(a).read(dec, false)
}

func (a *Attrs) read(dec *jsontext.Decoder, strict bool) error {
	switch dec.PeekKind() {
	case 'n':
		*a = nil
		_, err := dec.ReadToken()
		return err
	case '{':
		v, err := readJSON(dec, strict)
		if err == nil {
			*a = v.(map[string]any)
		}
		return err
	case 0: // a syntax error, reported by the read
		_, err := dec.ReadToken()
		return err
	}
	if err := dec.SkipValue(); err != nil {
		return err
	}
	return errors.New("must be an object")
}

// MarshalJSONTo writes NormalizeValue's types token by token (reflection costs a
// microsecond a fact), the rest through jsonv2, all of it with jsonv2.Deterministic.
func (a Attrs) MarshalJSONTo(enc *jsontext.Encoder) error {
	if d, _ := jsonv2.GetOption(enc.Options(), jsonv2.Deterministic); d {
		return jsonv2.MarshalEncode(enc, map[string]any(a))
	}
	return writeJSON(enc, map[string]any(a))
}

func writeJSON(enc *jsontext.Encoder, v any) error {
	switch x := v.(type) {
	case string:
		return enc.WriteToken(jsontext.String(x))
	case int64:
		return enc.WriteToken(jsontext.Int(x))
	case int:
		return enc.WriteToken(jsontext.Int(int64(x)))
	case map[string]any:
		if err := enc.WriteToken(jsontext.BeginObject); err != nil {
			return err
		}
		for k, e := range x {
			if err := enc.WriteToken(jsontext.String(k)); err != nil {
				return err
			}
			if err := writeJSON(enc, e); err != nil {
				return err
			}
		}
		return enc.WriteToken(jsontext.EndObject)
	case []any:
		if err := enc.WriteToken(jsontext.BeginArray); err != nil {
			return err
		}
		for _, e := range x {
			if err := writeJSON(enc, e); err != nil {
				return err
			}
		}
		return enc.WriteToken(jsontext.EndArray)
	}
	return jsonv2.MarshalEncode(enc, v)
}

// readJSON reads one value with NormalizeValue's types.
func readJSON(dec *jsontext.Decoder, strict bool) (any, error) {
	switch dec.PeekKind() {
	case '{':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		m := map[string]any{}
		for dec.PeekKind() != '}' {
			name, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			k := name.String()
			if m[k], err = readJSON(dec, strict); err != nil {
				return nil, err
			}
		}
		_, err := dec.ReadToken()
		return m, err
	case '[':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		l := []any{}
		for dec.PeekKind() != ']' {
			v, err := readJSON(dec, strict)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		_, err := dec.ReadToken()
		return l, err
	case '0':
		raw, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		n, err := number(string(raw), strict)
		if err != nil {
			return nil, &jsonv2.SemanticError{JSONPointer: dec.StackPointer(), Err: err}
		}
		return n, nil
	}
	tok, err := dec.ReadToken()
	switch {
	case err != nil:
		return nil, err
	case tok.Kind() == 'n':
		return nil, nil
	case tok.Kind() == '"':
		return tok.String(), nil
	}
	return tok.Bool(), nil
}

// NormalizeValue turns a decoded JSON (or YAML) value into the types the
// engine evaluates: integral numbers int64, others float64, maps and slices
// normalized recursively; other types are an error.
//
// Numbers are kept exact or refused (ErrInexact), never rounded: an integer
// outside int64, or a non-integer of magnitude 2^53 or more (where float64
// no longer tells whole units apart). Money is integer minor units, which
// int64 holds; a larger identifier belongs in a string.
func NormalizeValue(v any) (any, error) { return normalize(v, true) }

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
		return number(string(x), strict)
	case float32:
		return exactFloat(float64(x), strict, strconv.FormatFloat(float64(x), 'g', -1, 32))
	case int, int8, int16, int32:
		return reflect.ValueOf(x).Int(), nil
	case uint, uint8, uint16, uint32:
		return int64(reflect.ValueOf(x).Uint()), nil
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

// number is the value of a JSON number's text, as NormalizeValue says
// (refusals only when strict).
func number(text string, strict bool) (any, error) {
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		return i, nil
	}
	if strict && !strings.ContainsAny(text, ".eE") {
		return nil, fmt.Errorf("integer %s %w: it does not fit in 64 bits (−2^63 to 2^63−1); send a larger identifier as a string", Clip(text, 40), ErrInexact)
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s out of range", Clip(text, 40))
	}
	return exactFloat(f, strict, Clip(text, 40))
}

// normFloat makes an integral float int64, so 2500.0 and 2500 are equal money.
func normFloat(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < maxExactFloat {
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
