package api

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireScanAgrees holds scanFacts to what decodeFactsData, the careful
// reader it stands in front of, makes of body: the scan may pass a body up
// (decodeFacts then answers decodeFactsData's error or facts), but the
// facts it accepts are decodeFactsData's facts, and decodeFacts answers
// exactly what decodeFactsData does. It returns whether the scan took the
// body, and whether the decoder did.
func requireScanAgrees(t testing.TB, body string, bound futureBound) (scan, decoder bool) {
	t.Helper()
	want, wantErr := decodeFactsData([]byte(body), bound)
	got, gotErr := decodeFacts(strings.NewReader(body), bound)
	if wantErr != nil {
		// Of two bad values in one attrs object, the one named depends on
		// map order: another run of the decoder may name the other.
		for range 50 {
			if reflect.DeepEqual(wantErr, gotErr) {
				break
			}
			_, wantErr = decodeFactsData([]byte(body), bound)
		}
		require.Equal(t, wantErr, gotErr, "body %q", body)
	} else {
		require.NoError(t, gotErr, "body %q", body)
		require.Equal(t, want, got, "body %q", body)
	}
	scanned, ok := scanFacts(body, bound)
	if ok {
		require.NoError(t, wantErr, "the scan took a body the decoder refuses: %q", body)
		require.Equal(t, want, scanned, "body %q", body)
	}
	return ok, wantErr == nil
}

// factBody is a body of one fact with attrs (raw JSON) and the rest fixed.
func factBody(attrs string) string {
	return `{"facts":[{"source":"payments","type":"refund_created","subject":"order:o_1","external_id":"p-1",` +
		`"occurred_at":"2026-11-29T10:00:00Z","attrs":` + attrs + `,"links":["ticket:t_1"]}]}`
}

func TestScanFactsEdgeCases(t *testing.T) {
	bound := futureBound{Latest: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Skew: time.Minute}
	// fast: bodies the scan must take itself (the common shapes); the rest
	// it may take or pass up, as long as it agrees.
	fast := []string{
		factBody(`{}`),
		factBody(`null`),
		factBody(`{"amount":2500,"currency":"USD"}`),
		factBody(`{"a":{"b":{"c":[1,2,{"d":null}]}},"e":[],"f":{},"g":true,"h":false}`),
		factBody(`{"n":-0,"m":0.5,"x":1e2,"y":2500.0,"z":-1.25E-3,"big":9223372036854775807,"neg":-9223372036854775808}`),
		factBody(`{"f":9007199254740991.0,"g":1.5e10,"h":-4.9e-324}`),
		factBody(`{"s":"caf\u00e9 \"q\" \\ \/ \b\f\n\r\t","emoji":"\ud83d\ude00","raw":"café 😀","k\u0065y":1}`),
		factBody(`{"":"","ſ":"x","Amount":1,"amount":2}`),
		factBody(`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18}`),
		` {"facts" : [ {"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z"} ,` + "\n\t\r" +
			`{"external_id":"y","occurred_at":"2026-11-29T10:00:00.123456789+05:30","subject":"a:b","type":"t","source":"a","seq":7,"links":null}] } ` + "\n",
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","seq":"5","links":[]}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","seq":null,"links":["a:c","b:d","c:e"]}]}`,
		`{"fac\u0074s":[{"sour\u0063e":"a","type":"t","subject":"a:b","external_id":"x\u00e9","occurred_at":"2026-11-29T10:00:00Z"}]}`,
	}
	for _, body := range fast {
		scan, _ := requireScanAgrees(t, body, bound)
		require.True(t, scan, "the scan passed up %q", body)
	}
	// Each refused, or spelt in a way the scan leaves to the decoder.
	other := []string{
		``, ` `, `null`, `[]`, `{}`, `{"facts":null}`, `{"facts":[]}`, `{"facts":{}}`, `{"facts":[null]}`, `{"facts":[{}]}`,
		`{"facts":[1]}`, `{"Facts":[]}`, `{"facts":[],"facts":[]}`, `{"facts":[]} {}`, `{"facts":[]}]`, "\ufeff" + factBody(`{}`),
		factBody(`{"k":1,"k":2}`), factBody(`{"a":{"k":1,"k":2}}`), factBody(`{"a":[{"k":1},{"k":1,"k":1}]}`),
		factBody(`{"k":1,"\u006b":2}`), factBody(`{"a":{"b":{"c":{"d":{"k":[],"k":{}}}}}}`),
		factBody(`[]`), factBody(`"x"`), factBody(`1`), factBody(`true`),
		factBody(`{"n":9223372036854775808}`), factBody(`{"n":-9223372036854775809}`), factBody(`{"n":123456789012345678901234567890}`),
		factBody(`{"n":9007199254740992.5}`), factBody(`{"n":1e300}`), factBody(`{"n":1e400}`), factBody(`{"n":-1e999}`),
		factBody(`{"n":4.9e-324}`), factBody(`{"n":1e-400}`), factBody(`{"n":01}`), factBody(`{"n":1.}`), factBody(`{"n":.5}`),
		factBody(`{"n":+1}`), factBody(`{"n":1e}`), factBody(`{"n":-}`), factBody(`{"n":NaN}`), factBody(`{"n":0x10}`), factBody(`{"n":1_000}`),
		factBody(`{"s":"\u0000"}`), factBody(`{"s\u0000":1}`), factBody(`{"s":"\ud800"}`), factBody(`{"s":"\udc00"}`),
		factBody(`{"s":"\ud800\u0041"}`), factBody(`{"s":"\ud800x"}`), factBody(`{"s":"\ud83d\ud83d"}`), factBody(`{"s":"\uZZZZ"}`),
		factBody(`{"s":"\u12"}`), factBody(`{"s":"\x41"}`), factBody(`{"s":"\'"}`), factBody("{\"s\":\"a\tb\"}"), factBody("{\"s\":\"a\x01\"}"),
		factBody("{\"s\":\"\xff\"}"), factBody("{\"s\":\"\xed\xa0\x80\"}"), factBody("{\"\xc3\":1}"), factBody(`{"s":"unterminated}`),
		factBody(`{"a":tru}`), factBody(`{"a":nul}`), factBody(`{"a":truex}`), factBody(`{"a":1,}`), factBody(`{,"a":1}`), factBody(`{"a" 1}`),
		factBody(`{"a":[1,]}`), factBody(`{"a":[,1]}`), factBody(`{"a":1`), factBody(`{"a":[1`), factBody(strings.Repeat(`{"a":`, 600) + `1` + strings.Repeat(`}`, 600)),
		factBody(strings.Repeat(`[`, 20000) + strings.Repeat(`]`, 20000)),
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","Source":"b"}]}`,
		`{"facts":[{"SOURCE":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z"}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","extra":1}]}`,
		`{"facts":[{"source":"a","source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z"}]}`,
		`{"facts":[{"source":null,"type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z"}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","links":[null]}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","links":"a:b"}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","links":["a:b","nocolon"]}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","links":["a:\u0000"]}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","seq":{"a":1,"a":2}}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","seq":[1]}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","seq":"\u0000"}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-12-02T00:00:00Z"}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"0001-01-01T00:00:00Z"}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29"}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":5}]}`,
		`{"facts":[{"source":"a b","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z"}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"A:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z"}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"","occurred_at":"2026-11-29T10:00:00Z"}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"` + strings.Repeat("x", 513) + `","occurred_at":"2026-11-29T10:00:00Z"}]}`,
		`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z"}`,
	}
	for _, body := range other {
		requireScanAgrees(t, body, bound)
	}
}

// TestScanFactsRandom compares the scan with the decoder on generated
// bodies (fields in any order, given twice or not at all, other spellings,
// nested attrs with tricky numbers and strings) and on random edits of
// them.
func TestScanFactsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 1))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	bound := futureBound{Latest: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Skew: time.Minute}
	var taken, good int
	for i := range n {
		body := genBody(rng)
		if i%2 == 1 {
			body = mutate(rng, body)
		}
		b := bound
		if i%3 == 0 {
			b = futureBound{}
		}
		scan, decoder := requireScanAgrees(t, body, b)
		if scan {
			taken++
		}
		if decoder {
			good++
		}
	}
	t.Logf("of %d bodies the decoder took %d, the scan %d", n, good, taken)
	require.Greater(t, taken, n/10, "the generator hardly makes bodies the scan takes")
	require.Greater(t, taken, good*9/10, "the scan passes up too many good bodies")
}

var (
	genKeys = []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "amount", "status", "reason", "refund_id", "amount", "currency", "k\\u0065y", "key", "", "ſ", "Amount", "\\u00e9", "é"}
	// Each list: the values the scan takes, then (past the bar) the ones
	// it leaves to the decoder, picked one time in 25.
	genNumbers = []string{"0", "-0", "1", "-1", "2500", "2500.0", "0.5", "-1.25e-3", "1E2", "1e+2", "9007199254740991",
		"9223372036854775807", "-9223372036854775808", "4.9e-324", "1e-400", "1.5", "3.14159", "9007199254740991.0",
		"|", "9007199254740992.0", "9007199254740993.5", "9223372036854775808", "-9223372036854775809", "18446744073709551616",
		"1e308", "1e309", "123456789012345678901234567890", "00", "1.", ".1", "+1", "0x1"}
	genStrings = []string{"", "USD", "café", "😀", `\u00e9`, `\ud83d\ude00`, `\"`, `\\`, `\/`, `\n\t`, `\b\f\r`, "ticket:t_1", "order:o 1",
		"|", `\ud800`, `\udc00`, `\u0000`, `\x`, "\xff", "a\x01b", `\u00`}
	genSubjects = []string{"order:o_1", "ticket:t_2", "a:b", `a:\u00e9`, "|", "nocolon", "A:b", "a:", ":b", "a:b c", `a:\u0000`}
	genTimes    = []string{"2026-11-29T10:00:00Z", "2026-11-29T10:00:00.123456789+05:30", "2026-11-29T10:00:00.5-00:00",
		"|", "2026-12-02T00:00:00Z", "0001-01-01T00:00:00Z", "2026-11-29", "2026-13-01T00:00:00Z"}
)

func genValue(rng *rand.Rand, depth int) string {
	k := rng.IntN(10)
	if depth > 3 && k < 4 {
		k += 4
	}
	switch k {
	case 0, 1:
		var b strings.Builder
		b.WriteByte('{')
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%s":%s`, genKeys[rng.IntN(len(genKeys))], genValue(rng, depth+1))
		}
		b.WriteByte('}')
		return b.String()
	case 2, 3:
		var b strings.Builder
		b.WriteByte('[')
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(genValue(rng, depth+1))
		}
		b.WriteByte(']')
		return b.String()
	case 4, 5:
		return pick(rng, genNumbers)
	case 6, 7:
		return `"` + pick(rng, genStrings) + `"`
	case 8:
		return []string{"true", "false"}[rng.IntN(2)]
	}
	return "null"
}

// pick picks from a list with a bar (see genNumbers).
func pick(rng *rand.Rand, list []string) string {
	bar := slices.Index(list, "|")
	if rng.IntN(25) == 0 {
		return list[bar+1+rng.IntN(len(list)-bar-1)]
	}
	return list[rng.IntN(bar)]
}

func genFact(rng *rand.Rand, n int) string {
	type field struct{ key, value string }
	fields := []field{
		{"source", `"payments"`}, {"type", `"refund_created"`},
		{"subject", `"` + pick(rng, genSubjects) + `"`},
		{"external_id", fmt.Sprintf(`"p-%d"`, n)},
		{"occurred_at", `"` + pick(rng, genTimes) + `"`},
	}
	if rng.IntN(4) > 0 {
		fields = append(fields, field{"attrs", genValue(rng, 0)})
	}
	if rng.IntN(2) == 0 {
		var links []string
		for range rng.IntN(3) {
			links = append(links, `"`+pick(rng, genSubjects)+`"`)
		}
		fields = append(fields, field{"links", "[" + strings.Join(links, ",") + "]"})
	}
	if rng.IntN(8) == 0 {
		fields = append(fields, field{"seq", genValue(rng, 3)})
	}
	// Now and then: a field dropped, given twice, misspelt or null.
	switch rng.IntN(50) {
	case 0:
		fields = fields[1:]
	case 1:
		fields = append(fields, fields[rng.IntN(len(fields))])
	case 2:
		fields[0].key = "Source"
	case 3:
		fields[rng.IntN(len(fields))].value = "null"
	case 4:
		fields = append(fields, field{"extra", "1"})
	}
	rng.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `%s"%s"%s:%s%s`, space(rng), f.key, space(rng), space(rng), f.value)
	}
	b.WriteByte('}')
	return b.String()
}

func space(rng *rand.Rand) string {
	return []string{"", "", "", " ", "\n\t", "\r\n "}[rng.IntN(6)]
}

func genBody(rng *rand.Rand) string {
	var facts []string
	for i := range 1 + rng.IntN(3) {
		facts = append(facts, genFact(rng, i))
	}
	return space(rng) + `{"facts":[` + strings.Join(facts, ","+space(rng)) + `]}` + space(rng)
}

// mutate edits a body at random: a byte dropped, one of a few meaningful
// ones inserted, or a span doubled.
func mutate(rng *rand.Rand, body string) string {
	if body == "" {
		return body
	}
	i := rng.IntN(len(body))
	switch rng.IntN(3) {
	case 0:
		return body[:i] + body[i+1:]
	case 1:
		ins := []string{`"`, `\`, `{`, `}`, `[`, `]`, `,`, `:`, `0`, `e`, `-`, `.`, ` `, "\x00", "\xff", `\u`, `null`}
		return body[:i] + ins[rng.IntN(len(ins))] + body[i:]
	}
	j := min(len(body), i+1+rng.IntN(16))
	return body[:j] + body[i:j] + body[j:]
}

// FuzzScanFacts holds the scan to the decoder on whatever the fuzzer
// makes.
func FuzzScanFacts(f *testing.F) {
	f.Add(factBody(`{"amount":2500,"currency":"USD","m":[1,{"k":null}],"s":"\u00e9"}`))
	f.Add(factBody(`{"k":1,"\u006b":2}`))
	f.Add(factBody(`{"n":9223372036854775808,"f":1e300}`))
	f.Add(`{"facts":[{"source":"a","type":"t","subject":"a:b","external_id":"x","occurred_at":"2026-11-29T10:00:00Z","seq":5,"links":["a:c"]}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		requireScanAgrees(t, body, futureBound{Latest: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Skew: time.Minute})
	})
}
