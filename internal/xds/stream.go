package xds

import (
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/anypb"
)

// stream is one proxy's ADS stream. Its send loop owns the type states;
// mu guards them against inspection.
type stream struct {
	id    uint64
	proxy Proxy
	delta bool
	// proxyless is set for gRPC clients, which get the proxyless shape
	// of a resource where it has one.
	proxyless bool
	peer      string
	since     time.Time
	table     *meshTable
	wakeCh    chan struct{}
	// dnsAddr is where the proxy gets the DNS listener (dnsfilter.go);
	// the zero address when it gets none.
	dnsAddr netip.AddrPort

	mu    sync.Mutex
	dpRev int64 // the revision of the Dataplane sel was read from
	sel   *selector
	types [numTypes]*typeState
}

// typeState is what a stream knows of one type.
type typeState struct {
	wildcard bool
	names    set[string]
	// gen is the table generation that what was sent covers.
	gen uint64
	// full: the next send is a full diff (a new subscription, a new
	// selection, or a log that no longer reaches gen).
	full bool
	// added are names newly subscribed, to send at once.
	added []string
	// initial are a delta client's versions at stream start, consumed by
	// the first full diff; prevSel is the selection before a change, so
	// that a full diff removes what it no longer selects.
	initial map[string]string
	prevSel *selector
	hadSel  bool

	nonce     int
	version   string
	sentAt    time.Time
	sentCount int
	pending   bool
	responded bool
	acked     string
	ackedAt   time.Time
	nack      *Nack
}

// Nack is a rejected response, kept until a later one is accepted.
type Nack struct {
	Version string    `json:"version"`
	Nonce   string    `json:"nonce"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// sent is a resource as one stream gets it.
type sent struct {
	name, version string
	any           *anypb.Any
	sum           uint64 // entrySum(name, version)
}

// pick returns e as this stream gets it. Under s.mu and s.table.mu.RLock.
func (s *stream) pick(e *entry) sent {
	if isDNS(e.owner) && s.ownDNS() {
		return s.dnsVariant(e)
	}
	if s.proxyless && e.alt != nil {
		return sent{e.name, e.alt.version, e.alt.any, e.alt.sum}
	}
	return sent{e.name, e.version, e.any, e.sum}
}

func (s *stream) poke() {
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

// out is one response to send: the resources and, for delta, the names
// removed.
type out struct {
	typ       Type
	resources []sent
	removed   []string
	version   string
	nonce     string
	// shared, when set, is the set of resources (and its encodings) that
	// every plain wildcard stream gets in full
	shared *wildcardSet
}

// subscribe applies a request's subscription to typ: names (SotW: the
// whole list; delta: those added) and, for delta, unsubscribed names.
// It reports whether the type is newly subscribed.
func (st *typeState) subscribe(delta, first bool, sub, unsub []string, full bool) {
	if !delta {
		wildcard := len(sub) == 0 || slices.Contains(sub, "*")
		names := set[string]{}
		for _, n := range sub {
			if n != "*" {
				names.add(n)
			}
		}
		if first || wildcard != st.wildcard {
			st.full = true
		} else {
			for n := range names {
				if _, had := st.names[n]; !had {
					st.added = append(st.added, n)
				}
			}
		}
		st.wildcard, st.names = wildcard, names
		if full && len(st.added) > 0 {
			st.full, st.added = true, nil
		}
		return
	}
	if first {
		st.names = set[string]{}
		st.wildcard = len(sub) == 0
		st.full = true
	}
	for _, n := range sub {
		if n == "*" {
			if !st.wildcard {
				st.wildcard, st.full = true, true
			}
			continue
		}
		if _, had := st.names[n]; !had {
			st.names.add(n)
			if !first {
				st.added = append(st.added, n)
			}
		}
	}
	for _, n := range unsub {
		if n == "*" {
			st.wildcard = false
			continue
		}
		delete(st.names, n)
	}
}

// inView reports whether the proxy subscribes to e and may reach it.
func (s *stream) inView(st *typeState, sel *selector, e *entry) bool {
	if _, named := st.names[e.name]; !named {
		if !st.wildcard || e.api {
			return false
		}
	}
	if isDNS(e.owner) {
		return s.dnsAddr.IsValid() // its names are those the proxy may reach (dnsVariant)
	}
	if sel == nil {
		return true
	}
	o := s.table.owners[e.owner]
	return o != nil && sel.selects(e, o.labels)
}

// plain reports whether the stream gets every resource of typ that
// wildcard subscriptions get, and nothing else, when it gets them all:
// an Envoy (not proxyless: their shapes may differ) subscribed with a
// wildcard without names, without reachableBackends, without a selection
// to leave and without versions it already holds.
func (s *stream) plain(st *typeState, sel *selector) bool {
	return !s.proxyless && st.wildcard && len(st.names) == 0 && sel == nil && !st.hadSel && len(st.initial) == 0 &&
		(!s.dnsAddr.IsValid() || !s.ownDNS())
}

// fullState reports whether a SotW response of typ must hold every
// resource of the subscription (LDS and CDS), not only those changed.
func fullState(typ Type) bool { return typ == ListenerType || typ == ClusterType }

// compute returns what to send for typ, or nil when nothing is due.
// It reads the table under its read lock.
func (s *stream) compute(typ Type) *out {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.types[typ]
	if st == nil {
		return nil
	}
	t := s.table
	t.mu.RLock()
	defer t.mu.RUnlock()
	sel := s.sel
	o := &out{typ: typ}
	first := !st.responded
	full := st.full
	var changed []string
	if !full && st.gen < t.gen {
		var ok bool
		if changed, ok = t.since(typ, st.gen); !ok {
			full = true
		}
	}
	res := t.res[typ]
	// a SotW full-state response is the whole set: sent even empty,
	// which tells the client everything it had is gone
	wholeSet := false
	sorted := false // o.resources are in name order
	switch {
	case full && s.delta && s.plain(st, sel):
		o.shared = t.wildcardSet(typ, s.dnsAddr.IsValid())
		st.initial = nil
	case full && s.delta:
		sorted = true
		for _, e := range t.sortedEntries(typ) {
			if s.inView(st, sel, e) {
				if v, ok := st.initial[e.name]; !ok || v != s.pick(e).version {
					o.resources = append(o.resources, s.pick(e))
				}
			} else if st.hadSel && st.prevSel.selects(e, ownerLabels(t, e)) && (st.wildcard || has(st.names, e.name)) {
				o.removed = append(o.removed, e.name)
			}
		}
		for n := range st.initial {
			if res[n] == nil {
				o.removed = append(o.removed, n)
			}
		}
		st.initial = nil
	case full || (fullState(typ) && !s.delta && (len(st.added) > 0 || s.relevant(st, typ, sel, changed))):
		wholeSet = fullState(typ) && !s.delta
		if s.plain(st, sel) {
			o.shared = t.wildcardSet(typ, s.dnsAddr.IsValid())
		} else if st.wildcard {
			sorted = true
			for _, e := range t.sortedEntries(typ) {
				if s.inView(st, sel, e) {
					o.resources = append(o.resources, s.pick(e))
				}
			}
		} else {
			for n := range st.names {
				if e := res[n]; e != nil && s.inView(st, sel, e) {
					o.resources = append(o.resources, s.pick(e))
				}
			}
		}
	default:
		seen := set[string]{}
		for _, n := range changed {
			if _, dup := seen[n]; dup || (n == DNSListenerName && !s.dnsAddr.IsValid()) {
				continue // a proxy without the DNS listener never hears of it
			}
			seen.add(n)
			e := res[n]
			switch {
			case e != nil && s.inView(st, sel, e):
				o.resources = append(o.resources, s.pick(e))
			case s.delta && (st.wildcard || has(st.names, n)) && (e == nil || !e.api || has(st.names, n)):
				// gone, or no longer selected: a delta client drops it
				// (a removal of a name it never had is ignored)
				o.removed = append(o.removed, n)
			}
		}
		for _, n := range st.added {
			if _, dup := seen[n]; dup {
				continue
			}
			if e := res[n]; e != nil && s.inView(st, sel, e) {
				o.resources = append(o.resources, s.pick(e))
			}
		}
	}
	st.gen, st.full, st.added, st.hadSel, st.prevSel = t.gen, false, nil, false, nil
	if o.shared != nil {
		o.resources = o.shared.resources
	}
	if len(o.resources) == 0 && len(o.removed) == 0 && !first && !wholeSet {
		return nil
	}
	if o.shared != nil {
		o.version = o.shared.version
	} else {
		if !sorted {
			slices.SortFunc(o.resources, func(a, b sent) int { return compareStrings(a.name, b.name) })
		}
		slices.Sort(o.removed)
		o.version = responseVersion(o.resources, o.removed)
	}
	st.nonce++
	o.nonce = strconv.Itoa(st.nonce)
	st.version, st.sentAt, st.pending, st.responded = o.version, time.Now(), true, true
	st.sentCount++
	return o
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func ownerLabels(t *meshTable, e *entry) map[string]string {
	if o := t.owners[e.owner]; o != nil {
		return o.labels
	}
	return nil
}

// relevant reports whether a name in changed is, or was, in the view of
// st: whether a SotW full-state response is due.
func (s *stream) relevant(st *typeState, typ Type, sel *selector, changed []string) bool {
	for _, n := range changed {
		if has(st.names, n) {
			return true
		}
		if !st.wildcard {
			continue
		}
		if e := s.table.res[typ][n]; e == nil || s.inView(st, sel, e) {
			return true // gone (perhaps from the view), or in it
		}
	}
	return false
}

// responseVersion is the version_info of a response: a hash of the names
// and versions it holds, the same on every instance.
func responseVersion(rs []sent, removed []string) string {
	h := fnv.New64a()
	var b [8]byte
	for _, e := range rs {
		binary.LittleEndian.PutUint64(b[:], e.sum)
		h.Write(b[:])
	}
	for _, n := range removed {
		h.Write([]byte{1})
		h.Write([]byte(n))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ack records a client's answer to the response nonce of typ: an ACK, or
// a NACK with its message. It returns the time from send to answer, and
// whether the nonce was the last one sent (a stale answer is ignored).
func (s *stream) ack(typ Type, nonce, errMsg string, now time.Time) (time.Duration, bool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.types[typ]
	if st == nil || nonce != strconv.Itoa(st.nonce) {
		return 0, false, false
	}
	if !st.pending {
		return 0, true, false
	}
	st.pending = false
	if errMsg != "" {
		st.nack = &Nack{Version: st.version, Nonce: nonce, Message: errMsg, At: now}
		return now.Sub(st.sentAt), true, true
	}
	st.acked, st.ackedAt, st.nack = st.version, now, nil
	return now.Sub(st.sentAt), true, false
}
