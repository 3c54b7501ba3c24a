package report_test

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/commitlayer/commitlayer/sandbox/report"
)

var (
	failTruth = matrix.Truth{Outcome: "FAIL", Policy: "PASS", Knowable: true, OutcomeKnowable: true, PolicyKnowable: true}
	passTruth = matrix.Truth{Outcome: "PASS", Policy: "PASS", Knowable: true, OutcomeKnowable: true, PolicyKnowable: true}
	agree     = matrix.Agree{Outcome: true, Policy: true}
)

func verdict(status commitlayer.Status) matrix.Verdict {
	return matrix.Verdict{Status: status, ProvisionalStatus: status, Lenses: commitlayer.Lenses{Outcome: status, Policy: "PASS"}}
}

func judges(rule, model commitlayer.Status) []matrix.JudgeVerdict {
	return []matrix.JudgeVerdict{{Name: "rule", Verdict: rule, Reason: "r"}, {Name: "model", Verdict: model, Reason: "m"}}
}

// rows: a phantom success both judges miss, a stale read only the rule
// judge misses, a failure CommitLayer passed (nobody caught it), a true
// pass the model judge fails, an error row.
func compareRows() []matrix.Row {
	return []matrix.Row{
		{ID: "refund/phantom", Family: "transport", Truth: failTruth, Verdict: verdict("FAIL"), Agree: agree, Judges: judges("PASS", "PASS")},
		{ID: "refund/stale", Family: "verifier", Truth: failTruth, Verdict: verdict("FAIL"), Agree: agree, Judges: judges("PASS", "FAIL")},
		{ID: "cancel/missed", Family: "transport", Truth: failTruth, Verdict: verdict("PASS"), Agree: matrix.Agree{Policy: true}, Judges: judges("PASS", "UNKNOWN")},
		{ID: "cancel/ok", Family: "baseline", Truth: passTruth, Verdict: verdict("PASS"), Agree: agree, Judges: judges("PASS", "FAIL")},
		{ID: "cancel/broken", Family: "baseline", Error: "enterprise did not start", Judges: judges("PASS", "PASS")},
	}
}

func TestCompare(t *testing.T) {
	c := report.Compare(compareRows())
	require.Equal(t, 4, c.Rows)
	require.Equal(t, 3, c.Failures)
	require.Equal(t, 1, c.Passes)
	require.Equal(t, 1, c.Errors)
	require.Len(t, c.Evaluators, 3)

	cl, rule, model := c.Evaluators[0], c.Evaluators[1], c.Evaluators[2]
	require.Equal(t, report.Evaluator{Name: "CommitLayer", Agree: matrix.Count{N: 3, Of: 4},
		FalseNegatives: matrix.Count{N: 1, Of: 3}, FalsePositives: matrix.Count{N: 0, Of: 1}}, cl)
	require.Equal(t, report.Evaluator{Name: "rule", TraceOnly: true, Agree: matrix.Count{N: 1, Of: 4},
		FalseNegatives: matrix.Count{N: 3, Of: 3}, FalsePositives: matrix.Count{N: 0, Of: 1},
		MissedCaught: matrix.Count{N: 2, Of: 2}, Missed: []string{"refund/phantom", "refund/stale"}}, rule)
	require.Equal(t, report.Evaluator{Name: "model", TraceOnly: true, Agree: matrix.Count{N: 1, Of: 4},
		FalseNegatives: matrix.Count{N: 1, Of: 3}, FalsePositives: matrix.Count{N: 1, Of: 1},
		MissedCaught: matrix.Count{N: 1, Of: 2}, Missed: []string{"refund/phantom"}}, model)

	require.Equal(t, []report.FamilyLine{
		{Family: "transport", Rows: 2, Failures: 2, Agree: []matrix.Count{{N: 1, Of: 2}, {N: 0, Of: 2}, {N: 0, Of: 2}},
			CaughtByCommitLayer: 1, MissedCaught: []int{1, 1}, Missed: [][]string{{"refund/phantom"}, {"refund/phantom"}}},
		{Family: "verifier", Rows: 1, Failures: 1, Agree: []matrix.Count{{N: 1, Of: 1}, {N: 0, Of: 1}, {N: 1, Of: 1}},
			CaughtByCommitLayer: 1, MissedCaught: []int{1, 0}, Missed: [][]string{{"refund/stale"}, nil}},
		{Family: "baseline", Rows: 1, Failures: 0, Agree: []matrix.Count{{N: 1, Of: 1}, {N: 1, Of: 1}, {N: 0, Of: 1}},
			MissedCaught: []int{0, 0}, Missed: [][]string{nil, nil}},
	}, c.Families)
}

func TestJudgeMarkdown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rows    []matrix.Row
		want    []string
		notWant []string
	}{
		{name: "judges", rows: compareRows(), want: []string{
			"## Trace-only judges versus CommitLayer\n",
			"4 scenarios ran to the end; the oracle, reading the systems of record, found 3 failed and 1 passed. 1 did not run to the end",
			"| **CommitLayer** | systems of record | 3/4 (75%) | 1/3 | 0/1 | — |\n",
			"| rule | trajectory | 1/4 (25%) | 3/3 | 0/1 | 2/2 |\n",
			"| model | trajectory | 1/4 (25%) | 1/3 | 1/1 | 1/2 |\n",
			"| family | failures | caught by CommitLayer | missed by rule | missed by model |\n|---|---|---|---|---|\n",
			"| transport | 2 | 1 | 1 | 1 |\n| verifier | 1 | 1 | 1 | 0 |\n",
			"Missed by rule (caught by CommitLayer), by family:\n\n- **transport** (1): `refund/phantom`\n- **verifier** (1): `refund/stale`\n",
			"Missed by model (caught by CommitLayer), by family:\n\n- **transport** (1): `refund/phantom`\n",
		}, notWant: []string{"| baseline |", "cancel/missed", "No trace-only judge"}},
		{name: "no judges", rows: []matrix.Row{{ID: "a", Family: "f", Truth: passTruth, Verdict: verdict("PASS"), Agree: agree}},
			want:    []string{"| **CommitLayer** | systems of record | 1/1 (100%) | 0/0 | 0/1 | — |\n", "No trace-only judge ran in this run.\n"},
			notWant: []string{"Failures by family"}},
		{name: "hostile names", rows: []matrix.Row{{ID: "x|y`<b>", Family: "fam|<script>", Truth: failTruth, Verdict: verdict("FAIL"), Agree: agree,
			Judges: []matrix.JudgeVerdict{{Name: "ju|dge\n<i>", Verdict: "PASS"}}}},
			want:    []string{"| ju\\|dge &lt;i&gt; | trajectory |", "- **fam\\|&lt;script&gt;** (1): `x\\|y'&lt;b&gt;`"},
			notWant: []string{"<script>", "<b>", "<i>", "dge\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := report.JudgeMarkdown(tc.rows)
			require.True(t, strings.HasPrefix(md, "## Trace-only judges versus CommitLayer\n"))
			for _, w := range tc.want {
				require.Contains(t, md, w)
			}
			for _, w := range tc.notWant {
				require.NotContains(t, md, w)
			}
		})
	}
}

func sampleRun(t *testing.T) matrix.Results {
	t.Helper()
	data, err := os.ReadFile("testdata/sample_run.json")
	require.NoError(t, err)
	run, err := matrix.Decode(data)
	require.NoError(t, err)
	require.NotEmpty(t, run.Scenarios)
	return run
}

func TestHTMLSample(t *testing.T) {
	run := sampleRun(t)
	page, err := report.HTML(run, report.Options{})
	require.NoError(t, err)
	doc := parseStrict(t, page)

	require.Equal(t, "CommitLayer benchmark run", textOf(find(doc, "title")[0]))
	// The headline comes first: the judges' table is the first table.
	tables := find(doc, "table")
	require.GreaterOrEqual(t, len(tables), 4)
	headline := textOf(tables[0])
	for _, w := range []string{"CommitLayer", "systems of record", "rule", "model:sample", "trajectory"} {
		require.Contains(t, headline, w)
	}
	cmp := report.Compare(run.Scenarios)
	require.Contains(t, headline, fmt.Sprintf("%d/%d", cmp.Evaluators[1].MissedCaught.N, cmp.Evaluators[1].MissedCaught.Of))
	require.Greater(t, cmp.Evaluators[1].MissedCaught.N, 0, "the sample's rule judge misses failures")

	// Three charts: agreement by family, latency, pass^k.
	svgs := find(doc, "svg")
	require.Len(t, svgs, 3)
	for _, s := range svgs {
		require.NotEmpty(t, find(s, "rect"))
	}
	require.Contains(t, textOf(doc), "pass^3 per workflow")

	// One scenario row per row, each with its Temporal link.
	scenarios := find(doc, "table")[len(tables)-1]
	body := find(scenarios, "tbody")[0]
	require.Len(t, find(body, "tr"), len(run.Scenarios))
	r0 := run.Scenarios[0]
	want := "http://localhost:8233/namespaces/default/workflows/" + url.PathEscape(r0.WorkflowID) + "/" + r0.RunID + "/history"
	require.Equal(t, want, attr(find(find(body, "tr")[0], "a")[0], "href"))
	require.Contains(t, want, "bench%2Fsample-run%2Fscenario%2F")

	noExternalReferences(t, doc, "http://localhost:8233/")
}

func TestHTMLEscapesHostileStrings(t *testing.T) {
	hostile := []string{
		`<script>alert(1)</script>`,
		`"><img src=x onerror=alert(2)>`,
		`' onmouseover='alert(3)`,
		`</td></tr></table><iframe src="https://evil.example">`,
		`javascript:alert(4)`,
	}
	var rows []matrix.Row
	for i, h := range hostile {
		st := commitlayer.Status(h)
		rows = append(rows, matrix.Row{
			ID: "s/" + h, Process: h, Family: h, Summary: h, Truth: failTruth, Verdict: matrix.Verdict{
				Status: "FAIL", ProvisionalStatus: st, Lenses: commitlayer.Lenses{Outcome: "FAIL", Policy: st},
				Findings: []commitlayer.Finding{{Code: commitlayer.Code(h), Check: h, Lens: commitlayer.Lens(h), Message: h}}},
			Agree: agree, Judges: []matrix.JudgeVerdict{{Name: h, Verdict: st, Reason: h}},
			WorkflowID: h, RunID: fmt.Sprint(i), LatencyMS: 10,
		})
	}
	rows = append(rows, matrix.Row{ID: "err", Family: "f", Error: hostile[0]})
	rows[2].LLM = &matrix.RowLLM{Provider: hostile[2], Model: hostile[2]}
	run := matrix.Results{ID: hostile[0], Commit: hostile[1], Summary: matrix.Summary{
		ByProcess: []matrix.Group{{Name: hostile[0]}}, PassK: []matrix.PassK{{Process: hostile[1], K: 2}}}, Scenarios: rows}

	page, err := report.HTML(run, report.Options{})
	require.NoError(t, err)
	doc := parseStrict(t, page)
	noExternalReferences(t, doc, "http://localhost:8233/")
	for _, tag := range []string{"script", "img", "iframe"} {
		require.Empty(t, find(doc, tag), tag)
	}
	walk(doc, func(n *html.Node) {
		for _, a := range n.Attr {
			require.False(t, strings.HasPrefix(strings.ToLower(a.Key), "on"), "attribute %s on <%s>", a.Key, n.Data)
			if slices.Contains([]string{"href", "src", "action", "formaction", "xlink:href"}, a.Key) {
				u, err := url.Parse(a.Val)
				require.NoError(t, err)
				require.Contains(t, []string{"http", "https"}, u.Scheme, "attribute %s on <%s>", a.Key, n.Data)
			}
		}
		if n.Type == html.ElementNode && n.Data == "span" {
			// Status classes come from a fixed set.
			if c := attr(n, "class"); strings.HasPrefix(c, "badge ") {
				require.Contains(t, []string{"badge pass", "badge fail", "badge unknown"}, c)
			}
		}
	})
	// Every hostile string is shown as text.
	text := textOf(doc)
	for _, h := range hostile {
		require.Contains(t, text, h)
	}
	// Nor does the markdown let them through.
	md := report.JudgeMarkdown(rows)
	for _, tag := range []string{"<script>", "<img", "<iframe"} {
		require.NotContains(t, md, tag)
	}
}

func TestHTMLOptions(t *testing.T) {
	rows := []matrix.Row{{ID: "a", Family: "f", Truth: passTruth, Verdict: verdict("PASS"), Agree: agree, WorkflowID: "bench/1/a b"}}
	for _, tc := range []struct {
		name string
		o    report.Options
		link string
		err  string
	}{
		{name: "defaults", link: "http://localhost:8233/namespaces/default/workflows/bench%2F1%2Fa%20b"},
		{name: "base with a path", o: report.Options{TemporalUI: "https://temporal.example.test/ui/", Namespace: "prod ns"},
			link: "https://temporal.example.test/ui/namespaces/prod%20ns/workflows/bench%2F1%2Fa%20b"},
		{name: "script URL", o: report.Options{TemporalUI: "javascript:alert(1)"}, err: "is not an http(s) URL"},
		{name: "no host", o: report.Options{TemporalUI: "http:///x"}, err: "is not an http(s) URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := report.HTML(matrix.Results{Scenarios: rows}, tc.o)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			doc := parseStrict(t, page)
			links := find(doc, "a")
			require.Len(t, links, 1)
			require.Equal(t, tc.link, attr(links[0], "href"))
		})
	}
}

// An empty run renders, saying what is missing.
func TestHTMLEmptyRun(t *testing.T) {
	page, err := report.HTML(matrix.Results{}, report.Options{})
	require.NoError(t, err)
	doc := parseStrict(t, page)
	text := textOf(doc)
	require.Contains(t, text, "No scenario ran to the end.")
	require.Contains(t, text, "No latency was measured.")
	require.Contains(t, text, "No trace-only judge ran in this run.")
	require.Empty(t, find(doc, "svg"))
}

// voidElements have no end tag.
var voidElements = []string{"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

// parseStrict checks that every element is closed in order (the template
// closes each one explicitly), then parses the page.
func parseStrict(t *testing.T, page []byte) *html.Node {
	t.Helper()
	z := html.NewTokenizer(bytes.NewReader(page))
	var stack []string
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			require.ErrorIs(t, z.Err(), io.EOF)
			break
		}
		name, _ := z.TagName()
		tag := string(name)
		switch tt {
		case html.StartTagToken:
			if !slices.Contains(voidElements, tag) {
				stack = append(stack, tag)
			}
		case html.EndTagToken:
			require.NotEmpty(t, stack, "</%s> closes nothing", tag)
			require.Equal(t, stack[len(stack)-1], tag, "</%s> closes <%s>", tag, stack[len(stack)-1])
			stack = stack[:len(stack)-1]
		}
	}
	require.Empty(t, stack, "unclosed elements")
	doc, err := html.Parse(bytes.NewReader(page))
	require.NoError(t, err)
	return doc
}

// noExternalReferences checks that the page loads nothing: no script,
// stylesheet link, image, frame or object, no src attribute, no url() or
// @import in its CSS, and links only into the Temporal UI.
func noExternalReferences(t *testing.T, doc *html.Node, temporal string) {
	t.Helper()
	walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		require.NotContains(t, []string{"script", "link", "img", "iframe", "object", "embed", "image", "use", "base"}, n.Data)
		for _, a := range n.Attr {
			require.NotEqual(t, "src", a.Key, "<%s src>", n.Data)
			require.NotEqual(t, "xlink:href", a.Key)
			if a.Key == "href" {
				require.True(t, strings.HasPrefix(a.Val, temporal), "<%s href=%q>", n.Data, a.Val)
			}
		}
		if n.Data == "style" {
			css := textOf(n)
			require.NotContains(t, css, "url(")
			require.NotContains(t, css, "@import")
		}
	})
}

func walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, f)
	}
}

func find(n *html.Node, tag string) []*html.Node {
	var out []*html.Node
	walk(n, func(m *html.Node) {
		if m.Type == html.ElementNode && m.Data == tag {
			out = append(out, m)
		}
	})
	return out
}

func textOf(n *html.Node) string {
	var b strings.Builder
	walk(n, func(m *html.Node) {
		if m.Type == html.TextNode {
			b.WriteString(m.Data)
		}
	})
	return b.String()
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}
