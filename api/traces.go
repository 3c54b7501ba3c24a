package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/commitlayer/commitlayer"
	"github.com/commitlayer/commitlayer/contracts"
	"github.com/commitlayer/commitlayer/otlpingest"
	"github.com/commitlayer/commitlayer/service"
)

// MaxTracesBody bounds a POST /v1/traces body, before and after gzip.
const MaxTracesBody = 8 << 20

const maxPartialMessage = 4096 // partial_success.error_message

// Span results counted on commitlayer_otlp_spans_total.
const (
	spanRecorded = "recorded" // a bound tool call: an action recorded
	spanReplayed = "replayed" // the same span again (an exporter's retry): nothing new
	spanUnbound  = "unbound"  // a tool call of a tool no contract binds: dropped
	spanRejected = "rejected" // a bound span that could not become an action
	spanIgnored  = "ignored"  // not a tool call
)

// traceRoutes registers POST /v1/traces and its metric.
func (s *Server) traceRoutes() {
	s.otlpSpans = register(s.registry, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "commitlayer_otlp_spans_total",
		Help: "Spans received on POST /v1/traces, by result: recorded, replayed (an exporter's retry), " +
			"unbound (a tool call of a tool no contract binds; dropped), rejected (a bound span that " +
			"could not become an action, or one that looks like a call but cannot be read), ignored (not a tool call).",
	}, []string{"result"}))
	for _, r := range []string{spanRecorded, spanReplayed, spanUnbound, spanRejected, spanIgnored} {
		s.otlpSpans.WithLabelValues(r)
	}
	// Refusals of the key answer in OTLP's shape too: an exporter reads a
	// google.rpc.Status.
	s.handleWith("POST /v1/traces", authTenant, s.postTraces, s.otlpFailure)
}

// postTraces is OTLP/HTTP trace ingest: each span of a tool call the
// tenant's contracts bind becomes an action, keyed by its trace and span
// ids. The answer is OTLP's: 200 (partial_success naming rejected spans),
// or a google.rpc.Status; a 503 is retryable, as what was recorded replays.
func (s *Server) postTraces(w http.ResponseWriter, r *http.Request) error {
	t := tenantOf(r.Context())
	enc, err := otlpingest.EncodingOf(r.Header.Get("Content-Type"))
	if err != nil {
		w.Header().Set("Accept-Post", "application/x-protobuf, application/json")
		return refuse(http.StatusUnsupportedMediaType, err.Error())
	}
	td, err := otlpingest.Read(http.MaxBytesReader(w, r.Body, MaxTracesBody), enc, r.Header.Get("Content-Encoding"), MaxTracesBody)
	switch {
	case err == nil:
		return s.ingestTraces(w, r, t.ID, enc, td)
	case errors.Is(err, otlpingest.ErrTooLarge):
		return refuse(http.StatusRequestEntityTooLarge, err.Error())
	case errors.Is(err, otlpingest.ErrUnsupported):
		w.Header().Set("Accept-Encoding", "gzip, identity") // RFC 7694
		return refuse(http.StatusUnsupportedMediaType, err.Error())
	case errors.Is(err, otlpingest.ErrMalformed):
		return refuse(http.StatusBadRequest, err.Error())
	}
	s.logError(r, "read traces", err)
	return refuse(http.StatusBadRequest, "the request body could not be read")
}

// tracesBudget bounds recording one request's actions: an OpenTelemetry
// exporter gives up after 10 s by default. Past it the answer is 503.
const tracesBudget = 8 * time.Second

const maxRejectionsKept = 20 // per request

func (s *Server) ingestTraces(w http.ResponseWriter, r *http.Request, tenantID string, enc otlpingest.Encoding, td ptrace.Traces) error {
	var bindings *contracts.Bindings
	if td.SpanCount() > 0 {
		var err error
		if bindings, err = s.tenantBindings(r.Context(), tenantID); err != nil {
			s.logError(r, "traces: load bindings", err)
			w.Header().Set("Retry-After", "1")
			return refuse(http.StatusServiceUnavailable, "the tenant's contracts could not be read now; retry shortly")
		}
	}
	calls, others := otlpingest.ToolCalls(td, bindings.Bound)
	s.otlpSpans.WithLabelValues(spanIgnored).Add(float64(others))
	ctx, cancel := context.WithTimeout(r.Context(), tracesBudget)
	defer cancel()
	latest := s.bound().Latest
	var rejections []commitlayer.SpanRejection
	var messages []string
	var starts, rechecks []commitlayer.ActionRecord
	counts := map[string]int{}
	// One recorder per request, over the calls in the order they started:
	// a retry of a failed call is an attempt of its action; chains do not
	// span requests.
	slices.SortStableFunc(calls, func(a, b otlpingest.ToolCall) int { return a.Start.Compare(b.Start) })
	recorder := service.NewToolCalls(2*len(calls)+1, 0)
	actionOf := map[string]string{} // chain key → the action recorded for it in this request
	for _, c := range calls {
		recs, bound, err := otlpingest.Record(c, recorder, bindings)
		if !bound {
			counts[spanUnbound]++
			continue
		}
		var why []string
		if err != nil {
			why = append(why, err.Error())
		}
		isNew := false
		for _, rec := range recs {
			if err := service.CheckAction(rec.Action, latest); err != nil {
				why = append(why, fmt.Sprintf("span %s (%s), contract %s: %s", c.SpanID, c.Dialect, rec.Action.Contract, err))
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, service.RecordTimeout)
			var (
				stored commitlayer.ActionRecord
				fresh  bool
			)
			id, retry := actionOf[rec.ChainKey]
			retry = retry && rec.Retry
			if retry {
				stored, fresh, err = s.actions.RecordAttempt(rctx, tenantID, id, rec.Key, service.Attempt{
					Claim: rec.Action.Claim, Trace: rec.Entry, At: c.Start})
			} else {
				stored, fresh, err = s.actions.Record(rctx, tenantID, rec.Action, rec.ChainKey, rec.Hash)
			}
			cancel()
			if err != nil {
				msg, retry := recordFailure(err)
				if retry || ctx.Err() != nil {
					// The exporter retries; what was recorded replays.
					s.logError(r, "traces: record action", err)
					w.Header().Set("Retry-After", "1")
					return refuse(http.StatusServiceUnavailable, "actions could not be recorded now; retry shortly")
				}
				why = append(why, fmt.Sprintf("span %s, contract %s: %s", c.SpanID, rec.Action.Contract, msg))
				continue
			}
			actionOf[rec.ChainKey] = stored.ID
			isNew = isNew || fresh
			switch {
			case retry && fresh:
				rechecks = append(rechecks, stored)
			case retry:
			default:
				starts = append(starts, stored)
				s.metrics.actions.WithLabelValues(map[bool]string{true: "created", false: "replayed"}[fresh]).Inc()
			}
		}
		switch {
		case len(why) > 0:
			counts[spanRejected]++
			messages = append(messages, why...)
			rejections = append(rejections, commitlayer.SpanRejection{At: s.now().UTC(), TraceID: c.TraceID, SpanID: c.SpanID,
				Tool: c.Tool, Dialect: c.Dialect, Message: commitlayer.Clip(strings.Join(why, "; "), 1024)})
		case isNew:
			counts[spanRecorded]++
		default:
			counts[spanReplayed]++
		}
	}
	for k, n := range counts {
		s.otlpSpans.WithLabelValues(k).Add(float64(n))
	}
	if len(rejections) > 0 {
		// Kept for GET /v1/sources; the answer says why either way.
		if err := s.store.RecordSpanRejections(ctx, tenantID, rejections[:min(len(rejections), maxRejectionsKept)]); err != nil {
			s.logError(r, "traces: keep rejections", err)
		}
	}
	b, err := otlpingest.Response(enc, int64(counts[spanRejected]), commitlayer.Clip(strings.Join(messages, "; "), maxPartialMessage))
	if err != nil {
		return fmt.Errorf("traces: answer: %w", err)
	}
	w.Header().Set("Content-Type", enc.ContentType())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	// Started after answering: the exporter need not wait for Temporal
	// (the reconciler starts whatever is not).
	s.actions.StartLater(r.Context(), tenantID, starts)
	s.actions.RecheckLater(r.Context(), tenantID, rechecks)
	return nil
}

// recordFailure is the client's fault (a message for partial_success), or
// retry for a store that did not answer.
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

// tenantBindings compiles the tenant's latest contracts' bindings; one that
// no longer compiles binds nothing.
func (s *Server) tenantBindings(ctx context.Context, tenantID string) (*contracts.Bindings, error) {
	recs, err := s.store.ListContracts(ctx, tenantID)
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

func refuse(status int, message string) error { return &apiError{Status: status, Message: message} }

// otlpFailure is writeError in OTLP's shape: a google.rpc.Status in the
// request's encoding (JSON when it names none OTLP knows).
func (s *Server) otlpFailure(w http.ResponseWriter, r *http.Request, err error) {
	enc, encErr := otlpingest.EncodingOf(r.Header.Get("Content-Type"))
	if encErr != nil {
		enc = otlpingest.JSON
	}
	ae := s.answer(w, r, err)
	w.Header().Set("Content-Type", enc.ContentType())
	w.WriteHeader(ae.Status)
	_, _ = w.Write(otlpingest.Status(enc, ae.Status, ae.Message))
}
