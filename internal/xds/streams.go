package xds

import (
	"sort"

	"github.com/meshnames/meshnames/internal/api"
)

// Streams returns the ADS streams of the proxy p on this instance, as
// Inspect reports them, without building its config: for views that list
// many proxies (the GUI's Dataplanes). None when p is not connected here.
func (s *Server) Streams(p Proxy) []api.XDSStream {
	s.mu.Lock()
	streams := make([]*stream, 0, len(s.streams[p]))
	for st := range s.streams[p] {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	sort.Slice(streams, func(i, j int) bool { return streams[i].id < streams[j].id })
	out := make([]api.XDSStream, 0, len(streams))
	for _, st := range streams {
		out = append(out, st.state())
	}
	return out
}
