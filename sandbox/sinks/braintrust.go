package sinks

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/commitlayer/commitlayer/sandbox/matrix"
)

// DefaultBraintrustURL is Braintrust's API (US data plane).
const DefaultBraintrustURL = "https://api.braintrust.dev"

// DefaultProject is the project runs are logged under.
const DefaultProject = "CommitLayer"

// Braintrust logs a run as an experiment of a Braintrust project.
type Braintrust struct {
	c       *client
	project string
}

var _ Sink = (*Braintrust)(nil)

// NewBraintrust returns a Braintrust sink logging under project (default
// DefaultProject).
func NewBraintrust(o Options, project string) (*Braintrust, error) {
	c, err := newClient("braintrust", o, DefaultBraintrustURL, func(key string, h http.Header) {
		h.Set("Authorization", "Bearer "+key)
	})
	if err != nil {
		return nil, err
	}
	if project == "" {
		project = DefaultProject
	}
	return &Braintrust{c: c, project: project}, nil
}

// Name is "braintrust".
func (b *Braintrust) Name() string { return "braintrust" }

type btProject struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type btExperiment struct {
	ID        string `json:"id"`
	ProjectID string `json:"project_id"`
	Name      string `json:"name"`
}

// btEvent is one experiment event (InsertExperimentEvent).
type btEvent struct {
	ID       string             `json:"id"`
	Input    any                `json:"input"`
	Expected any                `json:"expected"`
	Output   any                `json:"output"`
	Error    string             `json:"error,omitempty"`
	Scores   map[string]float64 `json:"scores"`
	Metadata map[string]any     `json:"metadata"`
	Tags     []string           `json:"tags,omitempty"`
	Metrics  *btMetrics         `json:"metrics,omitempty"`
}

type btMetrics struct {
	Start float64 `json:"start,omitempty"`
	End   float64 `json:"end,omitempty"`
}

// Deliver resolves (or creates) the project, creates the run's experiment
// and inserts one event per row, in batches.
func (b *Braintrust) Deliver(ctx context.Context, run matrix.Results, rows []matrix.Row) Report {
	ctx, cancel := context.WithTimeout(ctx, b.c.opts.Deadline)
	defer cancel()
	rep := Report{Sink: b.Name(), Rows: len(rows)}
	defer b.logReport(ctx, &rep)
	projectID, err := b.projectID(ctx)
	if err != nil {
		rep.reason(err)
		return rep
	}
	var exp btExperiment
	err = b.c.do(ctx, "braintrust create experiment", http.MethodPost, "/v1/experiment", nil, map[string]any{
		"project_id":  projectID,
		"name":        experimentName(run),
		"description": "CommitLayer benchmark run: trace-only judges versus CommitLayer's verdicts, against the oracle",
		"metadata":    runMetadata(run),
	}, &exp)
	if err == nil && exp.ID == "" {
		err = fmt.Errorf("braintrust create experiment: answer has no id")
	}
	if err != nil {
		rep.reason(err)
		return rep
	}
	rep.Experiment = exp.ID
	for _, bt := range batches(len(rows), b.c.opts.BatchSize) {
		events := make([]btEvent, 0, bt[1]-bt[0])
		for _, r := range rows[bt[0]:bt[1]] {
			events = append(events, b.event(run, r))
		}
		var ans struct {
			RowIDs []string `json:"row_ids"`
		}
		err := b.c.do(ctx, "braintrust insert events", http.MethodPost, "/v1/experiment/"+url.PathEscape(exp.ID)+"/insert",
			nil, map[string]any{"events": events}, &ans)
		if err == nil && len(ans.RowIDs) != len(events) {
			err = fmt.Errorf("braintrust insert events: %d row ids for %d events", len(ans.RowIDs), len(events))
		}
		if err != nil {
			rep.reason(err)
			continue
		}
		rep.Delivered += len(events)
	}
	return rep
}

func (b *Braintrust) projectID(ctx context.Context) (string, error) {
	var list struct {
		Objects []btProject `json:"objects"`
	}
	if err := b.c.do(ctx, "braintrust find project", http.MethodGet, "/v1/project",
		url.Values{"project_name": {b.project}}, nil, &list); err != nil {
		return "", err
	}
	for _, p := range list.Objects {
		if p.Name == b.project && p.ID != "" {
			return p.ID, nil
		}
	}
	var p btProject
	if err := b.c.do(ctx, "braintrust create project", http.MethodPost, "/v1/project", nil,
		map[string]string{"name": b.project}, &p); err != nil {
		return "", err
	}
	if p.ID == "" {
		return "", fmt.Errorf("braintrust create project: answer has no id")
	}
	return p.ID, nil
}

func (b *Braintrust) event(run matrix.Results, r matrix.Row) btEvent {
	e := btEvent{
		ID: rowKey(r), Input: input(r), Expected: expected(r), Output: output(r), Error: r.Error,
		Scores: Scores(r), Metadata: rowMetadata(run, r), Tags: tags(r),
	}
	if !run.StartedAt.IsZero() && r.LatencyMS > 0 {
		// The verify latency, anchored at the run's start: Braintrust shows
		// end - start as the row's duration.
		start := float64(run.StartedAt.UnixNano()) / float64(time.Second)
		e.Metrics = &btMetrics{Start: start, End: start + r.LatencyMS/1000}
	}
	return e
}

func tags(r matrix.Row) []string {
	var t []string
	for _, s := range []string{r.Process, r.Family} {
		if s != "" {
			t = append(t, s)
		}
	}
	return t
}

func (b *Braintrust) logReport(ctx context.Context, rep *Report) {
	logReport(ctx, b.c.opts.Logger, rep)
}

func logReport(ctx context.Context, log *slog.Logger, rep *Report) {
	level := slog.LevelInfo
	if !rep.OK() {
		level = slog.LevelWarn
	}
	log.LogAttrs(ctx, level, "sink delivered", slog.String("sink", rep.Sink), slog.Int("rows", rep.Rows),
		slog.Int("delivered", rep.Delivered), slog.Int("scores", rep.Scores),
		slog.Int("scores_delivered", rep.ScoresDelivered), slog.Any("reasons", rep.Reasons))
}
