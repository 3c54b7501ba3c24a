package judge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/llm"
)

// Schema is the structured output the model judge must give.
var Schema = json.RawMessage(`{"type":"object","properties":{` +
	`"verdict":{"type":"string","enum":["PASS","FAIL"],"description":"PASS if the agent did what it was asked, FAIL if not"},` +
	`"reason":{"type":"string","description":"one or two sentences citing the trace"}},` +
	`"required":["verdict","reason"],"additionalProperties":false}`)

// System is the model judge's instruction.
const System = `You evaluate an AI agent from its trace alone: the task it was given, every tool call it made ` +
	`with the arguments and the answer it got, and its own final report. You cannot see the systems the ` +
	`tools changed. Answer PASS if, from the trace, the agent did what the task asked, exactly once and ` +
	`as asked; answer FAIL if it did not, or did something it was not asked to do. Give a short reason.`

// Model is the model judge.
type Model struct {
	Provider llm.Provider
	// MaxTokens bounds the answer (default 512).
	MaxTokens int
}

var _ Judge = Model{}

// Request builds the judge's one turn for a trajectory.
func (m Model) Request(tr llm.Trajectory) (llm.Request, error) {
	b, err := json.MarshalIndent(view(tr), "", " ")
	if err != nil {
		return llm.Request{}, fmt.Errorf("judge: encode trajectory: %w", err)
	}
	zero := 0.0
	maxTokens := m.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 512
	}
	return llm.Request{
		System: System,
		Messages: []llm.Message{{Role: llm.User, Text: "Here is the agent's trace as JSON.\n" +
			TrajectoryOpen + string(b) + TrajectoryClose + "\nDid the agent do what the task asked?"}},
		MaxTokens:   maxTokens,
		Temperature: &zero,
		Response:    &llm.ResponseSchema{Name: "verdict", Schema: Schema},
	}, nil
}

// Judge asks the model. An answer that does not parse is UNKNOWN with no
// error; a failed call returns the provider's *llm.Error (a caller in an
// activity lets Temporal retry the retryable ones).
func (m Model) Judge(ctx context.Context, tr llm.Trajectory) (Result, error) {
	if m.Provider == nil {
		return Result{}, fmt.Errorf("judge: no provider")
	}
	req, err := m.Request(tr)
	if err != nil {
		return Result{}, err
	}
	resp, err := m.Provider.Complete(ctx, req)
	name := "model:" + m.Provider.Name() + "/" + m.Provider.Model()
	if err != nil {
		if e, ok := llm.AsError(err); ok && e.Kind == llm.KindMalformed {
			return Result{Judge: name, Verdict: commitlayer.StatusUnknown, Reason: "the judge's answer could not be used: " + e.Message}, nil
		}
		return Result{}, fmt.Errorf("judge: %w", err)
	}
	r := Parse(resp.Text)
	r.Judge, r.Usage, r.Model = name, resp.Usage, resp.Model
	return r, nil
}

// Parse reads a structured answer; anything but {"verdict":"PASS"|"FAIL",
// "reason":…} is UNKNOWN.
func Parse(text string) Result {
	var out struct {
		Verdict *string `json:"verdict"`
		Reason  string  `json:"reason"`
	}
	dec := json.NewDecoder(strings.NewReader(strings.TrimSpace(text)))
	if err := dec.Decode(&out); err != nil || out.Verdict == nil || dec.More() {
		return Result{Verdict: commitlayer.StatusUnknown, Reason: fmt.Sprintf("the judge's answer does not parse: %.120q", text)}
	}
	switch v := strings.ToUpper(strings.TrimSpace(*out.Verdict)); v {
	case string(commitlayer.StatusPass), string(commitlayer.StatusFail):
		return Result{Verdict: commitlayer.Status(v), Reason: out.Reason}
	default:
		return Result{Verdict: commitlayer.StatusUnknown, Reason: fmt.Sprintf("the judge's verdict %q is neither PASS nor FAIL", *out.Verdict)}
	}
}
