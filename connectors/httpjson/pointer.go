package httpjson

import (
	"fmt"
	"strconv"
	"strings"
)

// Pointer is a parsed JSON Pointer (RFC 6901): "" is the whole document,
// "/a/0/b~1c" is member "a", element 0, member "b/c".
type Pointer struct {
	raw    string
	tokens []string
}

// ParsePointer parses an RFC 6901 pointer.
func ParsePointer(s string) (Pointer, error) {
	if s == "" {
		return Pointer{}, nil
	}
	if s[0] != '/' {
		return Pointer{}, fmt.Errorf("JSON pointer %q must be empty or start with '/'", s)
	}
	parts := strings.Split(s[1:], "/")
	for i, p := range parts {
		for j := 0; j < len(p); j++ {
			if p[j] == '~' && (j+1 >= len(p) || (p[j+1] != '0' && p[j+1] != '1')) {
				return Pointer{}, fmt.Errorf("JSON pointer %q: '~' must be followed by 0 or 1", s)
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return Pointer{raw: s, tokens: parts}, nil
}

func (p Pointer) String() string { return p.raw }

// Get resolves the pointer in a value decoded from JSON; ok is false when
// a step is missing.
func (p Pointer) Get(doc any) (any, bool) {
	cur := doc
	for _, t := range p.tokens {
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[t]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			if t == "" || (len(t) > 1 && t[0] == '0') {
				return nil, false
			}
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			cur = x[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
