package zonesync

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnames/meshnames/internal/api"
)

// metrics are a process's zone sync metrics; every series has the label
// zone: on the global the zone of the stream, on a zone its own name.
type metrics struct {
	online    *prometheus.GaugeVec
	resources *prometheus.CounterVec
	bytes     *prometheus.CounterVec
	refused   *prometheus.CounterVec
	snapshots *prometheus.CounterVec
	revision  *prometheus.GaugeVec
	streams   *prometheus.CounterVec
	// A zone's own: its attempts to connect that failed, and whether the
	// global refuses it.
	connectFailures *prometheus.CounterVec
	zoneRefused     *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		online: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshnames_zonesync_online", Help: "1 while the zone's sync stream is up.",
		}, []string{"zone"}),
		resources: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_zonesync_resources_total", Help: "Resources (puts and deletes) synced, by zone and direction (sent, received).",
		}, []string{"zone", "direction"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_zonesync_bytes_total", Help: "Encoded batch bytes synced, by zone and direction (sent, received).",
		}, []string{"zone", "direction"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_zonesync_refused_total", Help: "Batches and resources refused from the peer, by zone and reason (malformed, oversized, kind, invalid, zone, owner, other).",
		}, []string{"zone", "reason"}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_zonesync_snapshots_total", Help: "Full states synced because a feed could not resume, by zone and direction.",
		}, []string{"zone", "direction"}),
		revision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshnames_zonesync_revision", Help: "Feed revisions of the zone's stream: sent, acked (by the peer) and received (stored here).",
		}, []string{"zone", "what"}),
		streams: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_zonesync_streams_total", Help: "Sync streams started, by zone.",
		}, []string{"zone"}),
		connectFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "meshnames_zonesync_connect_failures_total", Help: "A zone's attempts to sync with its global that failed, by cause: refused (its token or the global's certificate) or unreachable (anything else, a stream that ended included).",
		}, []string{"zone", "cause"}),
		zoneRefused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "meshnames_zonesync_zone_refused", Help: "1 while a zone's last attempt to sync was refused (its token or the global's certificate); its /readyz fails meanwhile.",
		}, []string{"zone"}),
	}
	if reg != nil {
		reg.MustRegister(m.online, m.resources, m.bytes, m.refused, m.snapshots, m.revision, m.streams, m.connectFailures, m.zoneRefused)
	}
	return m
}

// stats is the insight of one zone's stream, and feeds its metrics.
type stats struct {
	zone string
	m    *metrics

	mu sync.Mutex
	in api.ZoneInsight
}

func newStats(zone string, m *metrics) *stats {
	return &stats{zone: zone, m: m, in: api.ZoneInsight{Zone: zone}}
}

// connected starts a new stream's counters.
func (s *stats) connected(instance, version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.in.Online, s.in.ConnectedSince, s.in.LastSeen = true, now, now
	s.in.Instance, s.in.Version = instance, version
	s.in.Sent, s.in.Received = api.SyncDirection{}, api.SyncDirection{}
	s.in.Streams++
	s.m.online.WithLabelValues(s.zone).Set(1)
	s.m.streams.WithLabelValues(s.zone).Inc()
}

func (s *stats) disconnected(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.in.Online = false
	if err != nil {
		s.in.LastError, s.in.LastErrorTime = err.Error(), time.Now()
	}
	s.m.online.WithLabelValues(s.zone).Set(0)
}

func (s *stats) seen() {
	s.mu.Lock()
	s.in.LastSeen = time.Now()
	s.mu.Unlock()
}

func (s *stats) sent(revision, resources, bytes int64) {
	s.mu.Lock()
	s.in.Sent.Revision = max(s.in.Sent.Revision, revision)
	s.in.Sent.Resources += resources
	s.in.Sent.Bytes += bytes
	s.mu.Unlock()
	s.m.revision.WithLabelValues(s.zone, "sent").Set(float64(revision))
	s.m.resources.WithLabelValues(s.zone, "sent").Add(float64(resources))
	s.m.bytes.WithLabelValues(s.zone, "sent").Add(float64(bytes))
}

func (s *stats) acked(revision int64) {
	s.mu.Lock()
	s.in.Sent.Acked = max(s.in.Sent.Acked, revision)
	s.mu.Unlock()
	s.m.revision.WithLabelValues(s.zone, "acked").Set(float64(revision))
}

func (s *stats) received(revision, resources, bytes int64) {
	s.mu.Lock()
	s.in.Received.Revision = max(s.in.Received.Revision, revision)
	s.in.Received.Resources += resources
	s.in.Received.Bytes += bytes
	s.mu.Unlock()
	if revision > 0 {
		s.m.revision.WithLabelValues(s.zone, "received").Set(float64(revision))
	}
	s.m.resources.WithLabelValues(s.zone, "received").Add(float64(resources))
	s.m.bytes.WithLabelValues(s.zone, "received").Add(float64(bytes))
}

func (s *stats) refused(reason string, err error) {
	s.mu.Lock()
	s.in.Refused++
	s.in.LastError, s.in.LastErrorTime = err.Error(), time.Now()
	s.mu.Unlock()
	s.m.refused.WithLabelValues(s.zone, reason).Inc()
}

func (s *stats) snapshotSent() {
	s.mu.Lock()
	s.in.Sent.Snapshots++
	s.mu.Unlock()
	s.m.snapshots.WithLabelValues(s.zone, "sent").Inc()
}

func (s *stats) snapshotReceived() {
	s.mu.Lock()
	s.in.Received.Snapshots++
	s.mu.Unlock()
	s.m.snapshots.WithLabelValues(s.zone, "received").Inc()
}

// insight returns a copy of the insight.
func (s *stats) insight() api.ZoneInsight {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.in
}
