package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/otlpingest"
	"github.com/commitlayer/commitlayer/service"
)

// MaxTracesBody bounds a POST /v1/traces body, before and after gzip.
const MaxTracesBody = 8 << 20

// maxPartialMessage bounds partial_success.error_message.
const maxPartialMessage = 4096

// Span results counted on commitlayer_otlp_spans_total.
const (
	spanRecorded = "recorded" // a bound execute_tool span: an action recorded
	spanReplayed = "replayed" // the same span again (an exporter's retry): nothing new
	spanUnbound  = "unbound"  // an execute_tool span of a tool no contract binds: dropped
	spanRejected = "rejected" // a bound span that could not become an action
	spanIgnored  = "ignored"  // not an execute_tool span
)

// traceRoutes registers POST /v1/traces and its metric.
func (s *Server) traceRoutes() {
	s.otlpSpans = register(s.registry, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "commitlayer_otlp_spans_total",
		Help: "Spans received on POST /v1/traces, by result: recorded, replayed (an exporter's retry), " +
			"unbound (an execute_tool span of a tool no contract binds; dropped), rejected (a bound span that " +
			"could not become an action), ignored (not an execute_tool span).",
	}, []string{"result"}))
	for _, r := range []string{spanRecorded, spanReplayed, spanUnbound, spanRejected, spanIgnored} {
		s.otlpSpans.WithLabelValues(r)
	}
	// Refusals of the key answer in OTLP's shape too: an exporter reads a
	// google.rpc.Status, never the API's JSON error.
	s.handleWith("POST /v1/traces", authTenant, s.postTraces, s.otlpFailure)
}

// postTraces is OTLP/HTTP trace ingest: each execute_tool span of a tool
// the tenant's contracts bind becomes an action (otlpingest.Map), recorded
// with an Idempotency-Key of its trace and span ids, and its verification
// started. The answer is OTLP's: 200 ExportTraceServiceResponse (with
// partial_success naming the bound spans rejected; unset when none was),
// or a google.rpc.Status in the request's encoding with 400, 401
// (otlpFailure), 413, 415 or 503 with Retry-After (retryable: the
// exporter sends the batch again, and what was recorded is not again).
func (s *Server) postTraces(w http.ResponseWriter, r *http.Request) {
	t := tenantOf(r.Context())
	enc, err := otlpingest.EncodingOf(r.Header.Get("Content-Type"))
	if err != nil {
		w.Header().Set("Accept-Post", "application/x-protobuf, application/json")
		s.otlpError(w, r, otlpingest.JSON, http.StatusUnsupportedMediaType, err.Error())
		return
	}
	body, err := otlpingest.ReadBody(http.MaxBytesReader(w, r.Body, MaxTracesBody), r.Header.Get("Content-Encoding"), MaxTracesBody)
	if err == nil {
		var td ptrace.Traces
		if td, err = otlpingest.Unmarshal(enc, body); err == nil {
			s.ingestTraces(w, r, t.ID, enc, td)
			return
		}
	}
	switch {
	case errors.Is(err, otlpingest.ErrTooLarge):
		s.otlpError(w, r, enc, http.StatusRequestEntityTooLarge, err.Error())
	case errors.Is(err, otlpingest.ErrUnsupported):
		w.Header().Set("Accept-Encoding", "gzip, identity") // RFC 7694
		s.otlpError(w, r, enc, http.StatusUnsupportedMediaType, err.Error())
	case errors.Is(err, otlpingest.ErrMalformed):
		s.otlpError(w, r, enc, http.StatusBadRequest, err.Error())
	default:
		s.logError(r, "read traces", err)
		s.otlpError(w, r, enc, http.StatusBadRequest, "the request body could not be read")
	}
}

func (s *Server) ingestTraces(w http.ResponseWriter, r *http.Request, tenantID string, enc otlpingest.Encoding, td ptrace.Traces) {
	calls, others := otlpingest.ToolCalls(td)
	s.otlpSpans.WithLabelValues(spanIgnored).Add(float64(others))
	var bindings *contracts.Bindings
	if len(calls) > 0 {
		var err error
		if bindings, err = s.tenantBindings(r.Context(), tenantID); err != nil {
			s.logError(r, "traces: load bindings", err)
			w.Header().Set("Retry-After", "1")
			s.otlpError(w, r, enc, http.StatusServiceUnavailable, "the tenant's contracts could not be read now; retry shortly")
			return
		}
	}
	var rejected int64
	var messages []string
	counts := map[string]int{}
	// One recorder per request (service.ToolCalls): binding match, when
	// the work began, the retry chain and the keys, over the calls in the
	// order they started. A retry of a failed call is an attempt of its
	// action; chains do not span requests.
	slices.SortStableFunc(calls, func(a, b otlpingest.ToolCall) int { return a.Start.Compare(b.Start) })
	recorder := service.NewToolCalls(2*len(calls)+1, 0)
	actionOf := map[string]string{} // chain key → the action recorded for it in this request
	for _, c := range calls {
		if c.ArgsError != "" && bindings.Bound(c.Tool) {
			recorder.Record(spanCall(c), nil) // its start still counts for the work of the next action
			rejected++
			counts[spanRejected]++
			messages = append(messages, fmt.Sprintf("span %s of tool %s: %s %s", c.SpanID, commitlayer.Clip(c.Tool, 64), otlpingest.AttrToolArguments, c.ArgsError))
			continue
		}
		recs, bound, err := recorder.Record(spanCall(c), bindings)
		if !bound {
			counts[spanUnbound]++
			continue
		}
		spanFailed := err != nil
		if err != nil {
			messages = append(messages, err.Error())
		}
		created := false
		for _, rec := range recs {
			rctx, cancel := context.WithTimeout(r.Context(), recordTimeout)
			var stored commitlayer.ActionRecord
			var isNew bool
			if id, ok := actionOf[rec.ChainKey]; ok && rec.Retry {
				stored, isNew, err = s.actions.RecordAttempt(rctx, tenantID, id, rec.Key, service.Attempt{
					Claim: rec.Action.Claim, Trace: rec.Entry, At: c.Start})
			} else {
				stored, isNew, err = s.actions.Record(rctx, tenantID, rec.Action, rec.ChainKey, rec.Hash)
			}
			cancel()
			if err != nil {
				msg, retry := recordFailure(err)
				if retry {
					// Nothing of this span is lost: the exporter retries
					// the batch and what was recorded answers as replayed.
					s.logError(r, "traces: record action", err)
					w.Header().Set("Retry-After", "1")
					s.otlpError(w, r, enc, http.StatusServiceUnavailable, "actions could not be recorded now; retry shortly")
					return
				}
				spanFailed = true
				messages = append(messages, fmt.Sprintf("span %s, contract %s: %s", c.SpanID, rec.Action.Contract, msg))
				continue
			}
			actionOf[rec.ChainKey] = stored.ID
			created = created || isNew
			if rec.Retry {
				if isNew {
					s.recheckAfter(r, tenantID, stored, waitParams{})
				}
				continue
			}
			startKey := tenantID + "\x00" + stored.ID
			fresh := isNew || s.needsStart(r.Context(), tenantID, stored.ID, startKey)
			s.startOrLeave(r, tenantID, stored, fresh, startKey)
			if isNew {
				s.metrics.actions.WithLabelValues("created").Inc()
			} else {
				s.metrics.actions.WithLabelValues("replayed").Inc()
			}
		}
		switch {
		case spanFailed:
			rejected++
			counts[spanRejected]++
		case created:
			counts[spanRecorded]++
		default:
			counts[spanReplayed]++
		}
	}
	for k, n := range counts {
		s.otlpSpans.WithLabelValues(k).Add(float64(n))
	}
	b, err := otlpingest.Response(enc, rejected, truncate(strings.Join(messages, "; "), maxPartialMessage))
	if err != nil {
		s.logError(r, "traces: answer", err)
		s.otlpError(w, r, enc, http.StatusInternalServerError, "internal error")
		return
	}
	w.Header().Set("Content-Type", enc.ContentType())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// spanCall is a tool-call span as the recorder reads it.
func spanCall(c otlpingest.ToolCall) service.ToolCall {
	return service.ToolCall{Source: "otlp", Scope: c.TraceID, CallID: c.SpanID, Name: "span " + c.SpanID, Tool: c.Tool, Args: c.Args, Result: c.Result,
		Failed: c.Claim.Status == commitlayer.ClaimFailure, Message: c.Claim.Message, Agent: c.Agent, Start: c.Start,
		Trace: map[string]string{"source": "otlp", "trace_id": c.TraceID, "span_id": c.SpanID, "tool": c.Tool, "tool_call_id": c.CallID}}
}

// recordFailure says what to tell about an action that could not be
// recorded: the client's fault (a message for partial_success), or a
// store that did not answer (retry the request).
func recordFailure(err error) (msg string, retry bool) {
	if ae := clientError(err); ae != nil {
		return ae.Message, false
	}
	switch {
	case isConflict(err):
		return "recorded before with another request", false
	case isInvalid(err):
		return "the action holds a value the store cannot keep", false
	}
	return "", true
}

// tenantBindings compiles the bindings of the tenant's latest contract
// versions. A stored contract that no longer compiles binds nothing.
func (s *Server) tenantBindings(ctx context.Context, tenantID string) (*contracts.Bindings, error) {
	recs, err := s.contractDB.ListContracts(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list contracts: %w", err)
	}
	var cs []*contracts.Contract
	for _, rec := range recs {
		_, c, err := s.contracts.Load(ctx, tenantID, rec.ID, rec.Version)
		if err != nil {
			if isInvalid(err) {
				continue
			}
			return nil, fmt.Errorf("load contract %s: %w", rec.ID, err)
		}
		cs = append(cs, c)
	}
	return contracts.NewBindings(cs), nil
}

// otlpError answers a google.rpc.Status in enc with status.
func (s *Server) otlpError(w http.ResponseWriter, r *http.Request, enc otlpingest.Encoding, status int, message string) {
	w.Header().Set("Content-Type", enc.ContentType())
	w.WriteHeader(status)
	_, _ = w.Write(otlpingest.Status(enc, status, message))
}

// otlpFailure answers a refusal before postTraces (a missing or unknown
// key, a store that did not answer) as writeError would, in OTLP's shape:
// a google.rpc.Status in the request's encoding (JSON when it names none
// OTLP knows), 503 with Retry-After when the store is away.
func (s *Server) otlpFailure(w http.ResponseWriter, r *http.Request, err error) {
	enc, encErr := otlpingest.EncodingOf(r.Header.Get("Content-Type"))
	if encErr != nil {
		enc = otlpingest.JSON
	}
	ae := clientError(err)
	switch {
	case ae != nil:
	case errors.Is(err, commitlayer.ErrUnavailable):
		s.logError(r, "unavailable", err)
		w.Header().Set("Retry-After", "1")
		ae = &apiError{Status: http.StatusServiceUnavailable, Message: "the service cannot reach its database now; retry shortly"}
	default:
		s.logError(r, "internal error", err)
		ae = &apiError{Status: http.StatusInternalServerError, Message: "internal error"}
	}
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="commitlayer"`)
	}
	s.otlpError(w, r, enc, ae.Status, ae.Message)
}
