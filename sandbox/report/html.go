package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// DefaultTemporalUI is the Temporal UI of the dev server.
const DefaultTemporalUI = "http://localhost:8233"

// Options shape the HTML report.
type Options struct {
	// TemporalUI is the Temporal UI's base URL (default DefaultTemporalUI);
	// Namespace its namespace (default "default").
	TemporalUI string
	Namespace  string
	// Title heads the page (default "CommitLayer benchmark run").
	Title string
}

//go:embed report.html.tmpl
var pageTemplate string

var tmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct":    pct,
	"status": statusClass,
}).Parse(pageTemplate))

type kv struct{ Label, Value string }

type page struct {
	Title     string
	Meta      []kv
	Cmp       Comparison
	HasJudges bool
	Metrics   []kv
	Charts    []chart
	Groups    []kv
	Rows      []rowView
	Generated string
}

type rowView struct {
	ID, Process, Family, Summary string
	Attempt                      int
	Truth                        string
	TruthStatus                  commitlayer.Status
	Provisional, Final           commitlayer.Status
	Lenses                       string
	Agree                        bool
	Disagree                     string
	Judges                       []judgeView
	Findings                     []commitlayer.Finding
	Error                        string
	Latency                      string
	Link                         string
}

type judgeView struct {
	Name, Reason string
	Verdict      commitlayer.Status
	// Right is true when the verdict is the oracle's truth.
	Right bool
}

// Render writes run's HTML report to w.
func Render(w io.Writer, run matrix.Results, o Options) error {
	p, err := build(run, o)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, p); err != nil {
		return fmt.Errorf("render report: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("render report: %w", err)
	}
	return nil
}

// HTML is run's HTML report.
func HTML(run matrix.Results, o Options) ([]byte, error) {
	var buf bytes.Buffer
	if err := Render(&buf, run, o); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WorkflowLink is the Temporal UI page of a workflow (its run when runID
// is set).
func WorkflowLink(base *url.URL, namespace, workflowID, runID string) string {
	u := *base
	p := strings.TrimRight(u.Path, "/") + "/namespaces/" + url.PathEscape(namespace) + "/workflows/" + url.PathEscape(workflowID)
	if runID != "" {
		p += "/" + url.PathEscape(runID) + "/history"
	}
	u.Path, u.RawPath = "", ""
	return u.String() + p
}

func build(run matrix.Results, o Options) (page, error) {
	if o.TemporalUI == "" {
		o.TemporalUI = DefaultTemporalUI
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.Title == "" {
		o.Title = "CommitLayer benchmark run"
	}
	base, err := url.Parse(o.TemporalUI)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return page{}, fmt.Errorf("render report: Temporal UI URL %q is not an http(s) URL", o.TemporalUI)
	}
	base.RawQuery, base.Fragment = "", ""

	cmp := Compare(run.Scenarios)
	p := page{Title: o.Title, Cmp: cmp, HasJudges: len(cmp.Judges()) > 0,
		Generated: time.Now().UTC().Format(time.RFC3339)}
	add := func(label, value string) {
		if value != "" {
			p.Meta = append(p.Meta, kv{label, value})
		}
	}
	add("Run", run.ID)
	add("Replay of", run.ReplayOf)
	if r := run.Replay; r != nil {
		add("Replayed calls", fmt.Sprintf("%d, %d answered differently from the recording; %d/%d rows faithful, %d/%d verdicts as recorded",
			r.Calls, r.DivergentCalls, r.FaithfulRows, r.Rows, r.SameVerdict, r.Rows))
	}
	add("Commit", run.Commit)
	if !run.StartedAt.IsZero() {
		add("Started", run.StartedAt.UTC().Format(time.RFC3339))
	}
	if run.WallSeconds > 0 {
		add("Wall time", fmt.Sprintf("%.1f s", run.WallSeconds))
	}
	if run.Concurrency > 0 {
		add("Concurrency", fmt.Sprint(run.Concurrency))
	}
	add("Payments", run.PaymentsBackend)
	if m := modelOf(run.Scenarios); m != nil {
		add("Provider", m.Provider)
		add("Model", m.Model)
	}
	if run.Repeat > 1 {
		add("Repeat", fmt.Sprintf("k = %d", run.Repeat))
	}

	s := run.Summary
	metric := func(label, value string) { p.Metrics = append(p.Metrics, kv{label, value}) }
	metric("Scenarios", fmt.Sprint(s.Scenarios))
	metric("Agreement with the oracle, outcome lens", pct(s.AgreeOutcome))
	metric("Agreement with the oracle, policy lens", pct(s.AgreePolicy))
	metric("Agreement with the oracle, both lenses", pct(s.AgreeBoth))
	metric("True failures detected", pct(s.TrueFailures))
	metric("False negatives (verifier PASS, truth FAIL)", fmt.Sprintf("%d of %d with a failing lens", s.FalseNegatives.N, s.FalseNegatives.Of))
	metric("False positives (verifier FAIL, truth PASS)", fmt.Sprintf("%d of %d with a passing lens (%d true passes)", s.FalsePositives.N, s.FalsePositives.Of, s.TruePasses))
	metric("UNKNOWN when the truth is unknowable", s.UnknownWhenUnknowable.String())
	metric("Agent claimed success falsely — caught", s.FalseClaimsCaught.String())
	metric("Duplicate effects detected", s.DuplicatesDetected.String())
	metric("Provisional verdicts corrected at the settlement re-check", s.CorrectedAtRecheck.String())
	metric("Reversals after settlement caught", s.ReversalsCaught.String())
	metric("Effects on a subject with no recorded action", fmt.Sprintf("%s flagged, %d false alarms", s.OrphansFlagged, s.OrphanFalseAlarms))
	metric("End-to-end verify latency (action recorded → final verdict), mean / p99 / max",
		fmt.Sprintf("%.0f ms / %.0f ms / %.0f ms", s.LatencyMeanMS, s.LatencyP99MS, s.LatencyMaxMS))
	metric("Pass latency in the worker (pull, read facts, evaluate, store), mean / p99 / max",
		fmt.Sprintf("%.1f ms / %.1f ms / %.1f ms", s.PassLatencyMeanMS, s.PassLatencyP99MS, s.PassLatencyMaxMS))
	metric("Errors", fmt.Sprint(s.Errors))
	for _, g := range s.ByProcess {
		p.Groups = append(p.Groups, kv{"process " + g.Name, pct(g.Agree)})
	}
	for _, g := range s.ByFamily {
		p.Groups = append(p.Groups, kv{"family " + g.Name, pct(g.Agree)})
	}

	p.Charts = []chart{agreementChart(cmp), latencyChart(run.Scenarios)}
	if len(s.PassK) > 0 {
		p.Charts = append(p.Charts, passKChart(s.PassK))
	}

	for _, r := range run.Scenarios {
		v := rowView{ID: r.ID, Process: r.Process, Family: r.Family, Summary: r.Summary, Attempt: r.Attempt,
			TruthStatus: r.Truth.Status(), Truth: lensPair(r.Truth.Outcome, r.Truth.OutcomeKnowable, r.Truth.Policy, r.Truth.PolicyKnowable),
			Provisional: r.Verdict.ProvisionalStatus, Final: r.Verdict.Status,
			Lenses: string(r.Verdict.Lenses.Outcome + "/" + r.Verdict.Lenses.Policy), Agree: r.Agrees(),
			Findings: r.Verdict.Findings, Error: r.Error, Latency: fmt.Sprintf("%.0f ms", r.LatencyMS)}
		if !v.Agree && r.Error == "" {
			var bad []string
			if !r.Agree.Outcome {
				bad = append(bad, "outcome")
			}
			if !r.Agree.Policy {
				bad = append(bad, "policy")
			}
			v.Disagree = strings.Join(bad, ", ")
		}
		for _, j := range r.Judges {
			v.Judges = append(v.Judges, judgeView{Name: j.Name, Verdict: j.Verdict, Reason: j.Reason,
				Right: v.TruthStatus != commitlayer.StatusUnknown && j.Verdict == v.TruthStatus})
		}
		if r.WorkflowID != "" {
			v.Link = WorkflowLink(base, o.Namespace, r.WorkflowID, r.RunID)
		}
		p.Rows = append(p.Rows, v)
	}
	return p, nil
}

// lensPair is "outcome/policy", "?" marking a lens a verifier could not
// know.
func lensPair(outcome commitlayer.Status, ok bool, policy commitlayer.Status, pk bool) string {
	mark := func(s commitlayer.Status, known bool) string {
		if !known {
			return string(s) + "?"
		}
		return string(s)
	}
	return mark(outcome, ok) + "/" + mark(policy, pk)
}

// statusClass is the CSS class of a status.
func statusClass(s commitlayer.Status) string {
	switch s {
	case commitlayer.StatusPass:
		return "pass"
	case commitlayer.StatusFail:
		return "fail"
	}
	return "unknown"
}

// modelOf is the model-driven agent's provider and model, from the first
// row that names one; nil for a scripted run.
func modelOf(rows []matrix.Row) *matrix.RowLLM {
	for _, r := range rows {
		if r.LLM != nil {
			return r.LLM
		}
	}
	return nil
}
