// Package metrics adapts the Temporal SDK's metrics to Prometheus: Handler
// implements client.MetricsHandler on a prometheus.Registerer, so the worker
// and client pass it in client.Options.MetricsHandler and the SDK's metrics
// appear on /metrics next to the API's own.
//
// Mapping: counters stay counters under the SDK's name, gauges stay gauges,
// and timers become histograms in seconds named <name>_seconds. Tags become
// labels. The SDK emits one metric name with different tag sets (a handler
// WithTags adds keys), which a plain Vec cannot hold, so every (name, sorted
// label keys) pair gets its own Vec and one unchecked collector exposes them
// all under the metric's name.
//
// Why not the SDK's contrib/opentelemetry MetricsHandler with the
// OpenTelemetry Prometheus exporter (go.opentelemetry.io/otel/exporters/
// prometheus v0.69, otel SDK v1.47)? It was tried against this package's
// tests (issue 9) and cannot serve the same /metrics:
//   - a name the SDK uses for two kinds of metric (a counter and a gauge)
//     makes the registry's Gather fail ("invalid metric"), so promhttp
//     answers 500 and the scrape loses the API's own metrics too; here the
//     second kind is dropped and counted in
//     commitlayer_sdk_metric_conflicts_total;
//   - the contrib's "monotonic" Int64Counter applies negative deltas
//     (5, then -3, reads 2), which a Prometheus counter must never do; here
//     they are ignored;
//   - a second handler on the same registry registers without error, where
//     NewHandler here fails;
//   - counter names without _total need the exporter's deprecated
//     WithoutCounterSuffixes, and tag keys that collide after escaping
//     ("a-b", "a.b", "a_b") merge into one label with joined values
//     ("dash;dot;under") instead of one value chosen deterministically.
//
// Revisit when the exporter drops conflicting instruments instead of
// failing the scrape.
package metrics

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// DefaultTimerBuckets are the histogram buckets (seconds) used for timers
// when Options.TimerBuckets is empty: 1 ms to 10 minutes.
var DefaultTimerBuckets = []float64{
	.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
}

// Options tune a Handler.
type Options struct {
	// TimerBuckets are the histogram bucket bounds, in seconds, for timers.
	TimerBuckets []float64
}

// Handler is a client.MetricsHandler backed by Prometheus. Handlers derived
// with WithTags share the metrics of the one NewHandler returned. It is safe
// for concurrent use.
type Handler struct {
	set  *set
	tags map[string]string // sanitized label name → value
	keys string            // sorted label names joined by "\x00", computed once
	ks   []string          // the same, as a slice
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
		buckets: append([]float64(nil), buckets...),
		vecs:    map[string]*vec{},
		kinds:   map[string]kind{},
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
	merged := make(map[string]string, len(h.tags)+len(tags))
	for k, v := range h.tags {
		merged[k] = v
	}
	// Sorted so that two keys sanitizing to the same label name resolve the
	// same way every time.
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		merged[labelName(k)] = labelValue(tags[k])
	}
	ks := make([]string, 0, len(merged))
	for k := range merged {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return &Handler{set: h.set, tags: merged, ks: ks, keys: strings.Join(ks, "\x00")}
}

// Counter returns the counter name with this handler's tags.
func (h *Handler) Counter(name string) client.MetricsCounter {
	v := h.set.get(kindCounter, metricName(name), h)
	if v == nil {
		return nop{}
	}
	return counter{v.counter.With(h.tags)}
}

// Gauge returns the gauge name with this handler's tags.
func (h *Handler) Gauge(name string) client.MetricsGauge {
	v := h.set.get(kindGauge, metricName(name), h)
	if v == nil {
		return nop{}
	}
	return gauge{v.gauge.With(h.tags)}
}

// Timer returns the timer name with this handler's tags, recorded as a
// histogram in seconds named <name>_seconds.
func (h *Handler) Timer(name string) client.MetricsTimer {
	n := metricName(name)
	if !strings.HasSuffix(n, "_seconds") {
		n += "_seconds"
	}
	v := h.set.get(kindTimer, n, h)
	if v == nil {
		return nop{}
	}
	return timer{v.hist.With(h.tags)}
}

type kind int

const (
	kindCounter kind = iota + 1
	kindGauge
	kindTimer
)

func (k kind) String() string {
	switch k {
	case kindCounter:
		return "counter"
	case kindGauge:
		return "gauge"
	default:
		return "timer"
	}
}

// vec holds the metrics of one (name, label keys) pair; exactly one of the
// three fields is set.
type vec struct {
	counter *prometheus.CounterVec
	gauge   *prometheus.GaugeVec
	hist    *prometheus.HistogramVec
}

func (v *vec) collector() prometheus.Collector {
	switch {
	case v.counter != nil:
		return v.counter
	case v.gauge != nil:
		return v.gauge
	default:
		return v.hist
	}
}

// set is the collector shared by a root handler and everything derived from
// it. It is unchecked (Describe sends nothing) because the label sets of a
// name are only known as the SDK emits them.
type set struct {
	buckets   []float64
	conflicts *prometheus.CounterVec

	mu    sync.RWMutex
	vecs  map[string]*vec // name + "\x00" + sorted label keys joined by "\x00"
	kinds map[string]kind // name → the kind it was first used as
}

// get returns the vec for (name, h's label names), creating it on first use,
// or nil if name is already used by a metric of another kind.
func (s *set) get(k kind, name string, h *Handler) *vec {
	id := name + "\x00" + h.keys
	keys := h.ks
	s.mu.RLock()
	v, ok := s.vecs[id]
	first := s.kinds[name]
	s.mu.RUnlock()
	if ok && first == k {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if first, seen := s.kinds[name]; seen && first != k {
		s.conflicts.WithLabelValues(name).Inc()
		return nil
	}
	if v, ok := s.vecs[id]; ok {
		return v
	}
	help := fmt.Sprintf("Temporal SDK %s %s.", k, name)
	v = &vec{}
	switch k {
	case kindCounter:
		v.counter = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, keys)
	case kindGauge:
		v.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, keys)
	default:
		v.hist = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: s.buckets}, keys)
	}
	s.vecs[id] = v
	s.kinds[name] = k
	return v
}

// Describe sends nothing: the collector is unchecked.
func (s *set) Describe(chan<- *prometheus.Desc) {}

// Collect sends the metrics of every vec.
func (s *set) Collect(ch chan<- prometheus.Metric) {
	s.mu.RLock()
	vecs := make([]*vec, 0, len(s.vecs))
	for _, v := range s.vecs {
		vecs = append(vecs, v)
	}
	s.mu.RUnlock()
	for _, v := range vecs {
		v.collector().Collect(ch)
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

// metricName maps a name to the legacy Prometheus metric name alphabet
// [a-zA-Z_:][a-zA-Z0-9_:]*, replacing other characters with '_'.
func metricName(s string) string {
	return sanitize(s, true)
}

// labelName maps a tag key to a valid label name [a-zA-Z_][a-zA-Z0-9_]*,
// not starting with the reserved "__".
func labelName(s string) string {
	n := sanitize(s, false)
	if strings.HasPrefix(n, "__") {
		n = "tag" + n
	}
	return n
}

func sanitize(s string, colon bool) string {
	if s == "" {
		return "_"
	}
	var b strings.Builder
	for i, r := range s {
		ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' ||
			(i > 0 && r >= '0' && r <= '9') || (colon && r == ':')
		if ok {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func labelValue(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
