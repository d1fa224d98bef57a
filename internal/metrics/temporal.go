package metrics

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	temporalclient "go.temporal.io/sdk/client"
)

// TemporalHandler exports the Temporal SDK's metrics (temporal_*) through a
// Prometheus registry, so each process's /metrics carries them beside
// Remedy's own. Timers become histograms in seconds.
type TemporalHandler struct {
	set  *temporalSet
	tags map[string]string
}

// temporalSet holds one vector per metric name. A name's label keys are
// those of its first use; later uses map onto them (a missing tag is empty,
// an extra one dropped), because Prometheus fixes labels per name.
type temporalSet struct {
	reg prometheus.Registerer
	mu  sync.Mutex
	vec map[string]*temporalVec
}

type temporalVec struct {
	labels    []string
	counter   *prometheus.CounterVec
	gauge     *prometheus.GaugeVec
	histogram *prometheus.HistogramVec
}

// NewTemporalHandler registers the SDK's metrics with reg as they appear.
func NewTemporalHandler(reg prometheus.Registerer) *TemporalHandler {
	return &TemporalHandler{set: &temporalSet{reg: reg, vec: map[string]*temporalVec{}}}
}

// WithTags returns a handler adding tags to every metric it creates.
func (h *TemporalHandler) WithTags(tags map[string]string) temporalclient.MetricsHandler {
	merged := make(map[string]string, len(h.tags)+len(tags))
	for k, v := range h.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return &TemporalHandler{set: h.set, tags: merged}
}

// Counter returns the counter name with the handler's tags.
func (h *TemporalHandler) Counter(name string) temporalclient.MetricsCounter {
	v, values := h.set.get(name, h.tags, "counter")
	if v == nil {
		return temporalclient.MetricsNopHandler.Counter(name)
	}
	c := v.counter.WithLabelValues(values...)
	return counterFunc(func(d int64) { c.Add(float64(d)) })
}

// Gauge returns the gauge name with the handler's tags.
func (h *TemporalHandler) Gauge(name string) temporalclient.MetricsGauge {
	v, values := h.set.get(name, h.tags, "gauge")
	if v == nil {
		return temporalclient.MetricsNopHandler.Gauge(name)
	}
	g := v.gauge.WithLabelValues(values...)
	return gaugeFunc(g.Set)
}

// Timer returns the timer name, a histogram in seconds, with the handler's tags.
func (h *TemporalHandler) Timer(name string) temporalclient.MetricsTimer {
	v, values := h.set.get(name, h.tags, "timer")
	if v == nil {
		return temporalclient.MetricsNopHandler.Timer(name)
	}
	o := v.histogram.WithLabelValues(values...)
	return timerFunc(func(d time.Duration) { o.Observe(d.Seconds()) })
}

// get returns the vector of name, creating and registering it on first use,
// and tags as its label values; nil when name is already another type.
func (s *temporalSet) get(name string, tags map[string]string, typ string) (*temporalVec, []string) {
	name = sanitize(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vec[name]
	if !ok {
		v = &temporalVec{}
		for k := range tags {
			v.labels = append(v.labels, sanitize(k))
		}
		sort.Strings(v.labels)
		var c prometheus.Collector
		switch typ {
		case "counter":
			v.counter = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: "Temporal SDK counter " + name + "."}, v.labels)
			c = v.counter
		case "gauge":
			v.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: "Temporal SDK gauge " + name + "."}, v.labels)
			c = v.gauge
		default:
			v.histogram = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: "Temporal SDK timer " + name + ", in seconds.",
				Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, v.labels)
			c = v.histogram
		}
		if err := s.reg.Register(c); err != nil {
			return nil, nil
		}
		s.vec[name] = v
	}
	if (typ == "counter") != (v.counter != nil) || (typ == "gauge") != (v.gauge != nil) || (typ == "timer") != (v.histogram != nil) {
		return nil, nil
	}
	byLabel := make(map[string]string, len(tags))
	for k, val := range tags {
		byLabel[sanitize(k)] = val
	}
	values := make([]string, len(v.labels))
	for i, l := range v.labels {
		values[i] = byLabel[l]
	}
	return v, values
}

// sanitize maps a Temporal metric or tag name onto Prometheus' alphabet.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }
