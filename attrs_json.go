package commitlayer

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends the attrs as JSON, byte for byte what json.Marshal
// writes for them, without reflection: attrs normalized by NormalizeValue
// (what the API stores and the store reads back) hold only nil, bool,
// string, int64, float64, []any and map[string]any, and those are written
// here. Attrs holding any other type (a caller's own value) are left to
// json.Marshal, as is a NaN or an infinity (json.Marshal refuses them, and
// so does this, with its error). On error b is returned as given.
func (a Attrs) AppendJSON(b []byte) ([]byte, error) {
	out, ok := appendJSON(b, map[string]any(a))
	return orMarshal(b, out, ok, a)
}

// AppendJSON appends the fact as JSON, byte for byte what json.Marshal
// writes for it (the client sends batches of facts so, without
// reflection), and json.Marshal's error where it has one. On error b is
// returned as given.
func (f *Fact) AppendJSON(b []byte) ([]byte, error) {
	out, ok := f.appendJSON(b)
	return orMarshal(b, out, ok, f)
}

// orMarshal is out when the fast path wrote it (ok); otherwise b with
// json.Marshal's bytes for v appended, or b as given with its error.
func orMarshal(b, out []byte, ok bool, v any) ([]byte, error) {
	if ok {
		return out, nil
	}
	start := len(b)
	m, err := json.Marshal(v)
	if err != nil {
		return b[:start], err
	}
	return append(b[:start], m...), nil
}

// appendJSON is AppendJSON's fast path; ok is false for a fact it does not
// write (an occurred_at json.Marshal refuses, attrs it leaves to
// json.Marshal), b then holding a partial value.
func (f *Fact) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"source":`...)
	b = appendString(b, f.Source)
	b = append(b, `,"type":`...)
	b = appendString(b, f.Type)
	b = append(b, `,"subject":`...)
	b = appendString(b, string(f.Subject))
	b = append(b, `,"external_id":`...)
	b = appendString(b, f.ExternalID)
	b = append(b, `,"occurred_at":"`...)
	// time.Time's MarshalJSON is its AppendText quoted (RFC 3339 with
	// nanoseconds needs no escaping), with the same errors.
	b, err := f.OccurredAt.AppendText(b)
	if err != nil {
		return b, false
	}
	b = append(b, `","attrs":`...)
	if f.Attrs == nil {
		b = append(b, "null"...)
	} else {
		var ok bool
		if b, ok = appendJSON(b, map[string]any(f.Attrs)); !ok {
			return b, false
		}
	}
	if len(f.Links) > 0 {
		b = append(b, `,"links":`...)
		b, _ = appendArray(b, f.Links, func(b []byte, l Subject) ([]byte, bool) { return appendString(b, string(l)), true })
	}
	if f.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendInt(b, f.Seq, 10)
	}
	return append(b, '}'), true
}

// appendJSON appends v as json.Marshal would; ok is false for a value it
// does not write (b then holds a partial value).
func appendJSON(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		return strconv.AppendBool(b, x), true
	case string:
		return appendString(b, x), true
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case float64:
		return appendFloat(b, x, 64)
	// What a caller's own attrs hold most (the client writes them before
	// any normalizing): Go's other numbers, strings and maps of them.
	case int:
		return strconv.AppendInt(b, int64(x), 10), true
	case int32:
		return strconv.AppendInt(b, int64(x), 10), true
	case int16:
		return strconv.AppendInt(b, int64(x), 10), true
	case int8:
		return strconv.AppendInt(b, int64(x), 10), true
	case uint:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint64:
		return strconv.AppendUint(b, x, 10), true
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint16:
		return strconv.AppendUint(b, uint64(x), 10), true
	case float32:
		return appendFloat(b, float64(x), 32)
	case Attrs:
		return appendJSON(b, map[string]any(x))
	case []string:
		return appendArray(b, x, func(b []byte, e string) ([]byte, bool) { return appendString(b, e), true })
	case []any:
		return appendArray(b, x, appendJSON)
	case map[string]any:
		if x == nil {
			return append(b, "null"...), true
		}
		var small [16]string
		keys := small[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			var ok bool
			if b, ok = appendJSON(b, x[k]); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return b, false
}

// appendArray appends xs as a JSON array (null when nil), each element
// written by elem; ok is false as soon as elem's is.
func appendArray[T any](b []byte, xs []T, elem func([]byte, T) ([]byte, bool)) ([]byte, bool) {
	if xs == nil {
		return append(b, "null"...), true
	}
	b = append(b, '[')
	for i, e := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = elem(b, e); !ok {
			return b, false
		}
	}
	return append(b, ']'), true
}

// appendFloat is encoding/json's float encoder (ES6 number to string) for
// a float of bits 64 or 32.
func appendFloat(b []byte, f float64, bits int) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

const hexDigits = "0123456789abcdef"

// appendString is encoding/json's string encoder with HTML escaping (what
// json.Marshal does): <, > and & escaped, invalid UTF-8 as \ufffd, U+2028
// and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
