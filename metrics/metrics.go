// Package metrics adapts the Temporal SDK's metrics to Prometheus: Handler
// is a client.MetricsHandler on a prometheus.Registerer, so the SDK's
// metrics appear on /metrics next to the API's own.
//
// Timers become histograms in seconds named <name>_seconds; tags become
// labels. The SDK emits one name with different tag sets, which a plain Vec
// cannot hold, so each (name, sorted label keys) gets its own Vec and one
// unchecked collector exposes them all.
//
// Not the SDK's contrib/opentelemetry handler with the OTel Prometheus
// exporter (issue 9, exporter v0.69): a name used for two kinds of metric
// fails the whole scrape (here the second kind is dropped and counted in
// commitlayer_sdk_metric_conflicts_total), its "monotonic" counter applies
// negative deltas, a second handler on one registry does not fail, names
// without _total need a deprecated option, and tag keys colliding after
// escaping merge. Revisit when it drops conflicting instruments instead.
package metrics

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// DefaultTimerBuckets are the timers' histogram buckets (seconds) when
// Options.TimerBuckets is empty: 1 ms to 10 minutes.
var DefaultTimerBuckets = []float64{
	.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
}

// Options tune a Handler.
type Options struct {
	TimerBuckets []float64 // timers' histogram bucket bounds, in seconds
}

// Handler is a client.MetricsHandler backed by Prometheus, safe for
// concurrent use; those derived with WithTags share their root's metrics.
type Handler struct {
	set  *set
	tags map[string]string // sanitized label name → value
	ks   []string          // the label names, sorted
	keys string            // ks joined by "\x00", computed once
}

var _ client.MetricsHandler = (*Handler)(nil)

// NewHandler registers a collector for the SDK's metrics on reg and returns
// the root handler.
func NewHandler(reg prometheus.Registerer, opts Options) (*Handler, error) {
	buckets := opts.TimerBuckets
	if len(buckets) == 0 {
		buckets = DefaultTimerBuckets
	}
	s := &set{
		buckets: slices.Clone(buckets),
		vecs:    map[string]prometheus.Collector{},
		kinds:   map[string]string{},
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "commitlayer_sdk_metric_conflicts_total",
			Help: "Temporal SDK metrics dropped because their name was already used by a metric of another kind.",
		}, []string{"name"}),
	}
	if err := reg.Register(s); err != nil {
		return nil, fmt.Errorf("register temporal sdk metrics collector: %w", err)
	}
	if err := reg.Register(s.conflicts); err != nil {
		return nil, fmt.Errorf("register temporal sdk metric conflicts counter: %w", err)
	}
	return &Handler{set: s, tags: map[string]string{}}, nil
}

// WithTags returns a handler whose metrics carry these tags in addition to
// the current ones; a key present in both takes the new value.
func (h *Handler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(h.tags)
	// In key order: two keys sanitizing to one label name resolve alike every time.
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		merged[labelName(k)] = strings.ToValidUTF8(tags[k], "\uFFFD")
	}
	ks := slices.Sorted(maps.Keys(merged))
	return &Handler{set: h.set, tags: merged, ks: ks, keys: strings.Join(ks, "\x00")}
}

// Counter returns the counter name with this handler's tags.
func (h *Handler) Counter(name string) client.MetricsCounter {
	if v, ok := h.set.get("counter", sanitize(name, true), h).(*prometheus.CounterVec); ok {
		return counter{v.With(h.tags)}
	}
	return nop{}
}

// Gauge returns the gauge name with this handler's tags.
func (h *Handler) Gauge(name string) client.MetricsGauge {
	if v, ok := h.set.get("gauge", sanitize(name, true), h).(*prometheus.GaugeVec); ok {
		return gauge{v.With(h.tags)}
	}
	return nop{}
}

// Timer returns the timer name with this handler's tags, recorded as a
// histogram in seconds named <name>_seconds.
func (h *Handler) Timer(name string) client.MetricsTimer {
	n := sanitize(name, true)
	if !strings.HasSuffix(n, "_seconds") {
		n += "_seconds"
	}
	if v, ok := h.set.get("timer", n, h).(*prometheus.HistogramVec); ok {
		return timer{v.With(h.tags)}
	}
	return nop{}
}

// set is the collector a root handler and those derived share; unchecked
// (Describe sends nothing): a name's label sets are known only as emitted.
type set struct {
	buckets   []float64
	conflicts *prometheus.CounterVec

	mu    sync.RWMutex
	vecs  map[string]prometheus.Collector // name + "\x00" + h.keys → its Vec
	kinds map[string]string               // name → the kind it was first used as
}

// get returns the Vec for (name, h's label names), creating it on first
// use, or nil if name is already used by a metric of another kind.
func (s *set) get(kind, name string, h *Handler) prometheus.Collector {
	id := name + "\x00" + h.keys
	s.mu.RLock()
	v, ok := s.vecs[id]
	first := s.kinds[name]
	s.mu.RUnlock()
	if ok && first == kind {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if first, seen := s.kinds[name]; seen && first != kind {
		s.conflicts.WithLabelValues(name).Inc()
		return nil
	}
	if v, ok := s.vecs[id]; ok {
		return v
	}
	help := fmt.Sprintf("Temporal SDK %s %s.", kind, name)
	switch kind {
	case "counter":
		v = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, h.ks)
	case "gauge":
		v = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, h.ks)
	default:
		v = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: s.buckets}, h.ks)
	}
	s.vecs[id] = v
	s.kinds[name] = kind
	return v
}

// Describe sends nothing: the collector is unchecked.
func (s *set) Describe(chan<- *prometheus.Desc) {}

// Collect sends the metrics of every Vec.
func (s *set) Collect(ch chan<- prometheus.Metric) {
	s.mu.RLock()
	vecs := slices.Collect(maps.Values(s.vecs))
	s.mu.RUnlock()
	for _, v := range vecs {
		v.Collect(ch)
	}
}

type counter struct{ c prometheus.Counter }

// Inc adds d; the SDK never decrements, and a negative d (which Prometheus
// would panic on) is dropped.
func (c counter) Inc(d int64) {
	if d > 0 {
		c.c.Add(float64(d))
	}
}

type gauge struct{ g prometheus.Gauge }

func (g gauge) Update(f float64) { g.g.Set(f) }

type timer struct{ o prometheus.Observer }

func (t timer) Record(d time.Duration) { t.o.Observe(d.Seconds()) }

type nop struct{}

func (nop) Inc(int64)            {}
func (nop) Update(float64)       {}
func (nop) Record(time.Duration) {}

// labelName maps a tag key to a valid label name [a-zA-Z_][a-zA-Z0-9_]*,
// not starting with the reserved "__".
func labelName(s string) string {
	n := sanitize(s, false)
	if strings.HasPrefix(n, "__") {
		n = "tag" + n
	}
	return n
}

// sanitize maps s to the legacy Prometheus alphabet [a-zA-Z_][a-zA-Z0-9_]*
// (with ':' too for a metric name), other characters replaced with '_'.
func sanitize(s string, colon bool) string {
	if s == "" {
		return "_"
	}
	var b strings.Builder
	for i, r := range s {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' ||
			(i > 0 && r >= '0' && r <= '9') || (colon && r == ':') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
