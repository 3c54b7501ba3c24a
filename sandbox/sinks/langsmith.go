package sinks

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/commitlayer/commitlayer/sandbox/matrix"
	"github.com/google/uuid"
)

// DefaultLangSmithURL is LangSmith's API.
const DefaultLangSmithURL = "https://api.smith.langchain.com"

// idSpace is the UUIDv5 namespace of run and feedback ids.
var idSpace = uuid.MustParse("6f1c1c5e-3a0b-5a8e-9d2e-6c6f6d6d6974")

// LangSmith logs a run as a LangSmith tracer session (an experiment), one
// root run per scenario and one feedback per score.
type LangSmith struct {
	c *client
}

var _ Sink = (*LangSmith)(nil)

// NewLangSmith returns a LangSmith sink. workspace, when set, is sent as
// x-tenant-id (for keys linked to several workspaces). A base URL ending
// in /api/v1 or /api is trimmed to the deployment's root.
func NewLangSmith(o Options, workspace string) (*LangSmith, error) {
	if o.BaseURL != "" {
		o.BaseURL = strings.TrimRight(o.BaseURL, "/")
		for _, suffix := range []string{"/api/v1", "/api"} {
			if strings.HasSuffix(o.BaseURL, suffix) {
				o.BaseURL = strings.TrimSuffix(o.BaseURL, suffix)
				break
			}
		}
	}
	c, err := newClient("langsmith", o, DefaultLangSmithURL, func(key string, h http.Header) {
		h.Set("x-api-key", key)
		if workspace != "" {
			h.Set("x-tenant-id", workspace)
		}
	})
	if err != nil {
		return nil, err
	}
	return &LangSmith{c: c}, nil
}

// Name is "langsmith".
func (l *LangSmith) Name() string { return "langsmith" }

// lsRun is one run of POST /api/v1/runs/batch (RunIngestParam).
type lsRun struct {
	ID          string         `json:"id"`
	TraceID     string         `json:"trace_id"`
	DottedOrder string         `json:"dotted_order"`
	Name        string         `json:"name"`
	RunType     string         `json:"run_type"`
	StartTime   string         `json:"start_time"`
	EndTime     string         `json:"end_time,omitempty"`
	Inputs      map[string]any `json:"inputs"`
	Outputs     map[string]any `json:"outputs,omitempty"`
	Error       string         `json:"error,omitempty"`
	SessionID   string         `json:"session_id"`
	Extra       map[string]any `json:"extra,omitempty"`
	Tags        []string       `json:"tags,omitempty"`
}

// lsFeedback is one POST /api/v1/feedback (FeedbackCreateSchema).
type lsFeedback struct {
	ID             string         `json:"id"`
	RunID          string         `json:"run_id"`
	TraceID        string         `json:"trace_id"`
	SessionID      string         `json:"session_id"`
	Key            string         `json:"key"`
	Score          float64        `json:"score"`
	Comment        string         `json:"comment,omitempty"`
	Correction     map[string]any `json:"correction,omitempty"`
	FeedbackSource map[string]any `json:"feedback_source"`
}

// Deliver creates (or finds) the run's session, posts one complete root
// run per row in batches, then the rows' scores as feedback.
func (l *LangSmith) Deliver(ctx context.Context, run matrix.Results, rows []matrix.Row) Report {
	ctx, cancel := context.WithTimeout(ctx, l.c.opts.Deadline)
	defer cancel()
	rep := Report{Sink: l.Name(), Rows: len(rows)}
	for _, r := range rows {
		rep.Scores += len(Scores(r))
	}
	defer logReport(ctx, l.c.opts.Logger, &rep)

	start := run.StartedAt.UTC()
	if start.IsZero() {
		start = time.Now().UTC()
	}
	var session struct {
		ID string `json:"id"`
	}
	err := l.c.do(ctx, "langsmith create session", http.MethodPost, "/api/v1/sessions", url.Values{"upsert": {"true"}},
		map[string]any{
			"name":        experimentName(run),
			"description": "CommitLayer benchmark run: trace-only judges versus CommitLayer's verdicts, against the oracle",
			"start_time":  start.Format(time.RFC3339Nano),
			"extra":       map[string]any{"metadata": runMetadata(run)},
		}, &session)
	if err == nil && session.ID == "" {
		err = fmt.Errorf("langsmith create session: answer has no id")
	}
	if err != nil {
		rep.reason(err)
		return rep
	}
	rep.Experiment = session.ID

	var feedback []lsFeedback
	for _, bt := range batches(len(rows), l.c.opts.BatchSize) {
		post := make([]lsRun, 0, bt[1]-bt[0])
		var fb []lsFeedback
		for i, r := range rows[bt[0]:bt[1]] {
			lr := l.run(run, session.ID, start, bt[0]+i, r)
			post = append(post, lr)
			fb = append(fb, l.feedback(lr, r)...)
		}
		err := l.c.do(ctx, "langsmith post runs", http.MethodPost, "/api/v1/runs/batch", nil,
			map[string]any{"post": post}, nil)
		if err != nil {
			rep.reason(err)
			continue
		}
		rep.Delivered += len(post)
		feedback = append(feedback, fb...)
	}

	// Feedback has no batch endpoint: a few requests at a time.
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, f := range feedback {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := l.c.do(ctx, "langsmith create feedback", http.MethodPost, "/api/v1/feedback", nil, f, nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				rep.reason(err)
				return
			}
			rep.ScoresDelivered++
		})
	}
	wg.Wait()
	return rep
}

func (l *LangSmith) run(run matrix.Results, sessionID string, runStart time.Time, i int, r matrix.Row) lsRun {
	id := uuid.NewSHA1(idSpace, []byte(experimentName(run)+"\x00"+rowKey(r))).String()
	// Rows keep their order in the session: each starts a microsecond after
	// the one before, and lasts its verify latency.
	start := runStart.Add(time.Duration(i) * time.Microsecond)
	end := start.Add(time.Duration(r.LatencyMS * float64(time.Millisecond)))
	meta := rowMetadata(run, r)
	meta["expected"] = expected(r)
	return lsRun{
		ID: id, TraceID: id, DottedOrder: dottedOrder(start, id), Name: rowKey(r), RunType: "chain",
		StartTime: start.Format(time.RFC3339Nano), EndTime: end.Format(time.RFC3339Nano),
		Inputs: input(r), Outputs: map[string]any{"verdict": output(r), "judges": judgesOrEmpty(r.Judges)},
		Error: r.Error, SessionID: sessionID, Extra: map[string]any{"metadata": meta}, Tags: tags(r),
	}
}

// dottedOrder is a root run's dotted order: its start time, "Z", its id.
func dottedOrder(t time.Time, id string) string {
	t = t.UTC()
	return fmt.Sprintf("%s%06dZ%s", t.Format("20060102T150405"), t.Nanosecond()/1000, id)
}

// feedback is one feedback per score of r, the oracle's truth as the
// correction of CommitLayer's and each judge's reason as its comment.
func (l *LangSmith) feedback(lr lsRun, r matrix.Row) []lsFeedback {
	reasons := map[string]string{}
	for _, j := range r.Judges {
		reasons[JudgeScorePrefix+j.Name] = string(j.Verdict) + ": " + j.Reason
	}
	reasons[ScoreCommitLayer] = string(r.Verdict.Status)
	var out []lsFeedback
	for _, key := range sortedKeys(Scores(r)) {
		f := lsFeedback{
			ID: uuid.NewSHA1(idSpace, []byte(lr.ID+"\x00"+key)).String(), RunID: lr.ID, TraceID: lr.TraceID,
			SessionID: lr.SessionID, Key: key, Score: Scores(r)[key], Comment: reasons[key],
			FeedbackSource: map[string]any{"type": "api"},
		}
		if key == ScoreCommitLayer {
			f.Correction = expected(r)
		}
		out = append(out, f)
	}
	return out
}
