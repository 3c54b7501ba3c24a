package api

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/commitlayer/commitlayer"
)

// scanFacts is decodeFacts' one pass over a body that is well formed: it
// walks the bytes once, refusing a key given twice as it goes, and builds
// each fact with attrs already normalized. It takes only what it is sure
// of and answers ok false for anything else (any error at all, and the
// rarer spellings the decoder accepts: a field name in another case, a
// null where a string goes); decodeFacts then reads the body again the
// careful way (decodeFactsData), which names what was wrong. So every
// error, and every body the scan passes up, is decodeFactsData's; what
// the scan accepts, decodeFactsData accepts too, as the same facts (the
// differential test in decode_facts_scan_test.go holds it to that).
//
// Strings without escapes are slices of text, the body read once as a
// string: a batch of facts shares its body's memory instead of holding a
// copy of every value.
func scanFacts(text string, bound futureBound) ([]commitlayer.Fact, bool) {
	p := factScan{s: text}
	p.space()
	if !p.byte('{') {
		return nil, false
	}
	p.space()
	if key, ok := p.str(); !ok || key != "facts" {
		return nil, false
	}
	p.space()
	if !p.byte(':') {
		return nil, false
	}
	p.space()
	if !p.byte('[') {
		return nil, false
	}
	var facts []commitlayer.Fact
	for start := p.i; ; {
		p.space()
		f, ok := p.fact(bound)
		if !ok {
			return nil, false
		}
		if facts == nil {
			// Room for as many facts as the rest would hold if each
			// were the size of the first.
			facts = make([]commitlayer.Fact, 0, min(len(p.s)/(p.i-start+1)+1, maxFactsEstimate))
		}
		facts = append(facts, f)
		p.space()
		if p.byte(',') {
			continue
		}
		if p.byte(']') {
			break
		}
		return nil, false
	}
	p.space()
	if !p.byte('}') {
		return nil, false
	}
	p.space()
	if p.i != len(p.s) {
		return nil, false
	}
	return facts, true
}

// maxFactsEstimate bounds the room made ahead for the facts of one body
// (past it they grow as they come): a small first fact in a large body
// does not reserve room for many.
const maxFactsEstimate = 4096

// maxScanDepth is the deepest attrs value the scan reads; deeper ones are
// left to the decoder (which allows 10 000 levels in all).
const maxScanDepth = 512

// factScan is the state of scanFacts.
type factScan struct {
	s        string
	i        int
	linkSlab []commitlayer.Subject // the facts' links, one after the other
	boxes    [64]struct {
		s string
		v any
	}
}

func (p *factScan) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// byte consumes c if it comes next.
func (p *factScan) byte(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// Bits of the fields a fact has given, to refuse one given twice.
const (
	fieldSource = 1 << iota
	fieldType
	fieldSubject
	fieldExternalID
	fieldOccurredAt
	fieldAttrs
	fieldLinks
	fieldSeq
)

// fact reads one fact object and converts it as decodeFactsData does
// (factIn.fact). Only the exact field names are taken.
func (p *factScan) fact(bound futureBound) (commitlayer.Fact, bool) {
	if !p.byte('{') {
		return commitlayer.Fact{}, false
	}
	var (
		in    factIn
		given int
	)
	for {
		p.space()
		key, ok := p.str()
		if !ok {
			return commitlayer.Fact{}, false
		}
		p.space()
		if !p.byte(':') {
			return commitlayer.Fact{}, false
		}
		p.space()
		var field int
		switch key {
		case "source":
			field = fieldSource
			in.Source, ok = p.str()
		case "type":
			field = fieldType
			in.Type, ok = p.str()
		case "subject":
			field = fieldSubject
			in.Subject, ok = p.str()
		case "external_id":
			field = fieldExternalID
			in.ExternalID, ok = p.str()
		case "occurred_at":
			field = fieldOccurredAt
			in.OccurredAt, ok = p.str()
		case "attrs":
			field = fieldAttrs
			in.normalized, ok = p.attrs()
		case "links":
			field = fieldLinks
			in.subjects, ok = p.links()
		case "seq":
			field = fieldSeq
			_, ok = p.value(1) // read (and dropped) as attrs would be
		default:
			return commitlayer.Fact{}, false
		}
		if !ok || given&field != 0 {
			return commitlayer.Fact{}, false
		}
		given |= field
		p.space()
		if p.byte(',') {
			continue
		}
		if p.byte('}') {
			break
		}
		return commitlayer.Fact{}, false
	}
	if given&fieldAttrs == 0 {
		in.normalized = commitlayer.Attrs{}
	}
	f, err := in.fact(bound)
	if err != nil {
		return commitlayer.Fact{}, false
	}
	return f, true
}

// attrs reads attrs: null (empty attrs) or an object.
func (p *factScan) attrs() (commitlayer.Attrs, bool) {
	if p.literal("null") {
		return commitlayer.Attrs{}, true
	}
	if p.i >= len(p.s) || p.s[p.i] != '{' {
		return nil, false
	}
	m, ok := p.object(1)
	return commitlayer.Attrs(m), ok
}

// links reads links: null or an array of strings, nil when there are
// none. The facts of a batch share one array for them.
func (p *factScan) links() ([]commitlayer.Subject, bool) {
	if p.literal("null") {
		return nil, true
	}
	if !p.byte('[') {
		return nil, false
	}
	p.space()
	if p.byte(']') {
		return nil, true
	}
	first := len(p.linkSlab)
	for {
		p.space()
		l, ok := p.str()
		if !ok {
			return nil, false
		}
		if len(p.linkSlab) == cap(p.linkSlab) {
			// A new array: the facts before keep theirs.
			grown := make([]commitlayer.Subject, len(p.linkSlab)-first, max(64, 2*cap(p.linkSlab), 2*(len(p.linkSlab)-first)))
			copy(grown, p.linkSlab[first:])
			p.linkSlab, first = grown, 0
		}
		p.linkSlab = append(p.linkSlab, commitlayer.Subject(l))
		p.space()
		if p.byte(',') {
			continue
		}
		if p.byte(']') {
			return p.linkSlab[first:len(p.linkSlab):len(p.linkSlab)], true
		}
		return nil, false
	}
}

// value reads an attrs value, normalized as commitlayer.NormalizeValue
// leaves it: int64 for an integer, float64 for another number,
// map[string]any, []any, string, bool or nil.
func (p *factScan) value(depth int) (any, bool) {
	if p.i >= len(p.s) {
		return nil, false
	}
	switch c := p.s[p.i]; {
	case c == '"':
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		return p.box(s), true
	case c == '{':
		if depth >= maxScanDepth {
			return nil, false
		}
		return p.object(depth + 1)
	case c == '[':
		if depth >= maxScanDepth {
			return nil, false
		}
		return p.array(depth + 1)
	case c == '-' || c >= '0' && c <= '9':
		t, ok := p.number()
		if !ok {
			return nil, false
		}
		return normalizeNumber(t)
	case p.literal("true"):
		return true, true
	case p.literal("false"):
		return false, true
	case p.literal("null"):
		return nil, true
	}
	return nil, false
}

// box returns s as an any. A short string is boxed once per batch while
// it repeats (currencies, statuses): the scan keeps the last few it boxed.
func (p *factScan) box(s string) any {
	if len(s) == 0 || len(s) > maxBoxedLen {
		return s
	}
	e := &p.boxes[(len(s)*31+int(s[0])*7+int(s[len(s)-1]))%len(p.boxes)]
	if e.v != nil && e.s == s {
		return e.v
	}
	e.s, e.v = s, s
	return e.v
}

// maxBoxedLen is the longest string box keeps.
const maxBoxedLen = 32

// normalizeNumber is commitlayer.NormalizeValue of json.Number(t), without
// boxing the text for an integer; a number it refuses is not ok.
func normalizeNumber(t string) (any, bool) {
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		return n, true
	}
	v, err := commitlayer.NormalizeValue(json.Number(t))
	return v, err == nil
}

// object reads an object (at '{'); a key given twice is not ok.
func (p *factScan) object(depth int) (map[string]any, bool) {
	p.i++ // {
	m := map[string]any{}
	p.space()
	if p.byte('}') {
		return m, true
	}
	for {
		p.space()
		key, ok := p.str()
		if !ok {
			return nil, false
		}
		if _, dup := m[key]; dup {
			return nil, false
		}
		p.space()
		if !p.byte(':') {
			return nil, false
		}
		p.space()
		v, ok := p.value(depth)
		if !ok {
			return nil, false
		}
		m[key] = v
		p.space()
		if p.byte(',') {
			continue
		}
		if p.byte('}') {
			return m, true
		}
		return nil, false
	}
}

// array reads an array (at '[').
func (p *factScan) array(depth int) ([]any, bool) {
	p.i++ // [
	out := []any{}
	p.space()
	if p.byte(']') {
		return out, true
	}
	for {
		p.space()
		v, ok := p.value(depth)
		if !ok {
			return nil, false
		}
		out = append(out, v)
		p.space()
		if p.byte(',') {
			continue
		}
		if p.byte(']') {
			return out, true
		}
		return nil, false
	}
}

// literal consumes word (true, false, null) if it comes next.
func (p *factScan) literal(word string) bool {
	if strings.HasPrefix(p.s[p.i:], word) {
		p.i += len(word)
		return true
	}
	return false
}

// number reads a number as JSON spells it and returns its text. What
// follows is the caller's to check (a delimiter).
func (p *factScan) number() (string, bool) {
	s, i := p.s, p.i
	digits := func() bool {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return "", false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return "", false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return "", false
		}
	}
	t := s[p.i:i]
	p.i = i
	return t, true
}

// str reads a string (at '"') and returns its value. Not ok: not a
// string, a control character, invalid UTF-8, an invalid escape, an
// escaped surrogate without its pair, or a NUL (each an error of
// decodeFactsData's, or a string it refuses).
func (p *factScan) str() (string, bool) {
	if p.i >= len(p.s) || p.s[p.i] != '"' {
		return "", false
	}
	start := p.i + 1
	for j := start; j < len(p.s); j++ {
		switch c := p.s[j]; {
		case c == '"':
			p.i = j + 1
			return p.s[start:j], true
		case c == '\\':
			return p.escaped(start, j)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(p.s[j:])
			if r == utf8.RuneError && size == 1 {
				return "", false
			}
			j += size - 1
		}
	}
	return "", false
}

// escaped finishes str for a string with an escape: start is its first
// byte, j the first backslash.
func (p *factScan) escaped(start, j int) (string, bool) {
	s := p.s
	b := make([]byte, 0, j-start+16)
	b = append(b, s[start:j]...)
	for j < len(s) {
		c := s[j]
		switch {
		case c == '"':
			p.i = j + 1
			return string(b), true
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(s[j:])
			if r == utf8.RuneError && size == 1 {
				return "", false
			}
			b = append(b, s[j:j+size]...)
			j += size
			continue
		case c != '\\':
			b = append(b, c)
			j++
			continue
		}
		if j+1 >= len(s) {
			return "", false
		}
		switch s[j+1] {
		case '"', '\\', '/':
			b = append(b, s[j+1])
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := hex4(s, j+2)
			if !ok {
				return "", false
			}
			j += 6
			switch {
			case r == 0:
				return "", false
			case utf16.IsSurrogate(r):
				if r >= 0xDC00 || j+1 >= len(s) || s[j] != '\\' || s[j+1] != 'u' {
					return "", false
				}
				lo, ok := hex4(s, j+2)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return "", false
				}
				r = utf16.DecodeRune(r, lo)
				j += 6
			}
			b = utf8.AppendRune(b, r)
			continue
		default:
			return "", false
		}
		j += 2
	}
	return "", false
}

// hex4 reads the four hex digits of a \u escape at s[i:].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
