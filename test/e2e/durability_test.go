package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"
)

// loadState is what the clients of TestDurability_KillDuringLoad were told:
// per service, the port of the last PUT answered 2xx and the port of a PUT
// sent but never answered (in flight at the kill: it may have committed or
// not). Each service is written by one client only, one PUT at a time.
type loadState struct {
	mu      sync.Mutex
	acked   map[string]int
	pending map[string]int
	owner   map[string]int // client that writes it
	acks    int
	refused []string // answers other than 2xx
}

func newLoadState() *loadState {
	return &loadState{acked: map[string]int{}, pending: map[string]int{}, owner: map[string]int{}}
}

// loadClient keeps enough idle connections for every client, as rest-load's
// does: the load runs over keep-alive connections.
var loadClient = &http.Client{
	Timeout:   60 * time.Second,
	Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64},
}

// putLoadService PUTs MeshService name with port, in the shape rest-load
// uses (labels, one port, no selector), and returns the status code.
func putLoadService(ctx context.Context, api, name string, port int) (int, []byte, error) {
	body, _ := json.Marshal(map[string]any{
		"type": "MeshService", "name": name, "mesh": "default",
		"labels": map[string]string{"kuma.io/origin": "zone", "bench": "true", "ns": fmt.Sprintf("ns-%d", port%100)},
		"spec":   map[string]any{"ports": []map[string]any{{"port": port, "targetPort": 8080, "appProtocol": "http", "name": "main"}}},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, api+"/meshes/default/meshservices/"+name, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := loadClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	msg, err := io.ReadAll(resp.Body)
	return resp.StatusCode, msg, err
}

// load runs clients that PUT at full speed against p until the server
// stops answering or ctx ends: three creates of new services for each
// update of one of the client's own services with a new port.
func (s *loadState) load(ctx context.Context, p *proc, round, clients int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
			var own []string
			s.mu.Lock()
			for name, o := range s.owner {
				if o == w {
					own = append(own, name)
				}
			}
			s.mu.Unlock()
			sort.Strings(own)
			for i := 0; ctx.Err() == nil; i++ {
				var name string
				if i%4 == 3 && len(own) > 0 {
					name = own[rng.IntN(len(own))]
				} else {
					name = fmt.Sprintf("load-r%d-c%d-%d", round, w, i)
					own = append(own, name)
				}
				port := 1 + rng.IntN(65000)
				s.mu.Lock()
				s.owner[name] = w
				s.pending[name] = port
				s.mu.Unlock()
				code, msg, err := putLoadService(ctx, p.api, name, port)
				s.mu.Lock()
				switch {
				case err != nil:
					// No answer: in flight at the kill, or the server is
					// gone. The PUT stays pending.
					s.mu.Unlock()
					return
				case code == http.StatusOK || code == http.StatusCreated:
					s.acked[name] = port
					delete(s.pending, name)
					s.acks++
				default:
					delete(s.pending, name)
					s.refused = append(s.refused, fmt.Sprintf("PUT %s: HTTP %d: %s", name, code, msg))
				}
				s.mu.Unlock()
			}
		})
	}
	return &wg
}

func (s *loadState) ackCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acks
}

// loadView is what the check reads of a service.
type loadView struct {
	Name string `json:"name"`
	Spec struct {
		Ports []struct {
			Port int `json:"port"`
		} `json:"ports"`
	} `json:"spec"`
	Status struct {
		VIPs []struct {
			IP string `json:"ip"`
		} `json:"vips"`
		Addresses []struct {
			Hostname string `json:"hostname"`
			Status   string `json:"status"`
		} `json:"addresses"`
	} `json:"status"`
}

func (v *loadView) named() bool {
	if len(v.Status.VIPs) == 0 {
		return false
	}
	for _, a := range v.Status.Addresses {
		if a.Hostname != "" && a.Status == "Available" {
			return true
		}
	}
	return false
}

// listLoad pages through every MeshService of mesh default.
func listLoad(api string) (map[string]*loadView, error) {
	out := map[string]*loadView{}
	for offset := 0; ; {
		resp, err := loadClient.Get(fmt.Sprintf("%s/meshes/default/meshservices?size=1000&offset=%d", api, offset))
		if err != nil {
			return nil, err
		}
		var page struct {
			Total int         `json:"total"`
			Items []*loadView `json:"items"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("list: %s: %w", resp.Status, err)
		}
		for _, it := range page.Items {
			out[it.Name] = it
		}
		offset += len(page.Items)
		if len(page.Items) == 0 || offset >= page.Total {
			return out, nil
		}
	}
}

// check compares what p serves after a restart with what the clients were
// told: every acknowledged PUT is there with its spec (or with the spec of
// a PUT in flight at the kill, which may have committed), nothing else is;
// then it waits until every service has a VIP and a hostname, and checks
// that no VIP is held twice and none changed since the last check (vips).
// It resolves the PUTs in flight with what the store kept.
func (s *loadState) check(t *testing.T, p *proc, vips map[string]string) {
	t.Helper()
	got, err := listLoad(p.api)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	for name := range got {
		_, acked := s.acked[name]
		_, pending := s.pending[name]
		if !acked && !pending {
			t.Errorf("%s exists after the restart but no client sent it", name)
		}
	}
	inFlightLanded, inFlightLost := 0, 0
	for name, want := range s.acked {
		v, ok := got[name]
		pend, pending := s.pending[name]
		switch {
		case !ok:
			t.Errorf("%s: its PUT with port %d was acknowledged, and it is gone after kill -9", name, want)
		case len(v.Spec.Ports) != 1:
			t.Errorf("%s has ports %+v after the restart, want one with port %d", name, v.Spec.Ports, want)
		case v.Spec.Ports[0].Port == want:
		case pending && v.Spec.Ports[0].Port == pend:
			s.acked[name] = pend
			inFlightLanded++
		default:
			t.Errorf("%s has port %d after kill -9, but port %d was acknowledged (in flight: %d)", name, v.Spec.Ports[0].Port, want, pend)
		}
	}
	for name, pend := range s.pending {
		if _, acked := s.acked[name]; acked {
			continue
		}
		v, ok := got[name]
		switch {
		case !ok:
			inFlightLost++
		case len(v.Spec.Ports) == 1 && v.Spec.Ports[0].Port == pend:
			s.acked[name] = pend
			inFlightLanded++
		default:
			t.Errorf("%s, created by a PUT in flight at the kill with port %d, has ports %+v", name, pend, v.Spec.Ports)
		}
	}
	s.pending = map[string]int{}
	acked := len(s.acked)
	s.mu.Unlock()
	t.Logf("after the restart: %d services as acknowledged, %d PUTs in flight at the kill landed, %d did not", acked, inFlightLanded, inFlightLost)

	// Every service gets named, each VIP names one service, and a VIP
	// does not change while its service exists.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err = listLoad(p.api)
		if err != nil {
			t.Fatal(err)
		}
		unnamed := 0
		for _, v := range got {
			if !v.named() {
				unnamed++
			}
		}
		if unnamed == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d services have no VIP or no Available hostname 2 minutes after the restart", unnamed, len(got))
		}
		time.Sleep(100 * time.Millisecond)
	}
	holder := map[string]string{}
	for name, v := range got {
		for _, vip := range v.Status.VIPs {
			if other, ok := holder[vip.IP]; ok {
				t.Errorf("VIP %s is held by %s and %s", vip.IP, other, name)
			}
			holder[vip.IP] = name
		}
		ip := v.Status.VIPs[0].IP
		if before, ok := vips[name]; ok && before != ip {
			t.Errorf("the VIP of %s changed from %s to %s across kill -9", name, before, ip)
		}
		vips[name] = ip
	}
}

// TestDurability_KillDuringLoad puts an embedded-store server under the
// write load of the rest-load benchmark (8 clients PUTting at full speed
// over keep-alive connections, creates and updates), kills it with
// SIGKILL mid-load, and restarts it on the same data directory, four
// times. After each restart every PUT answered 2xx is there with the spec
// it acknowledged, every service gets a VIP and a hostname, no VIP is held
// by two services and no service's VIP changed.
func TestDurability_KillDuringLoad(t *testing.T) {
	t.Parallel() // no timing bound that other processes could break
	if testing.Short() {
		t.Skip("-short: kills a server under load four times")
	}
	const clients, kills = 8, 4
	dir := t.TempDir()
	s := newLoadState()
	vips := map[string]string{}
	for round := range kills + 1 {
		p := start(t, fmt.Sprintf("run-%d", round), "--data-dir", dir)
		p.waitReady(2 * time.Minute)
		if round > 0 {
			s.check(t, p, vips)
			if t.Failed() {
				return
			}
		}
		if round == kills {
			if err := p.stop(time.Minute); err != nil {
				t.Errorf("the last server did not stop cleanly: %v", err)
			}
			break
		}
		ctx, cancel := context.WithCancel(context.Background())
		base := s.ackCount()
		wg := s.load(ctx, p, round, clients)
		// Kill once a few hundred writes of this round were acknowledged,
		// a different number each round.
		target := base + 400 + 200*round
		for deadline := time.Now().Add(2 * time.Minute); s.ackCount() < target; {
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("only %d writes acknowledged in 2 minutes", s.ackCount()-base)
			}
			time.Sleep(time.Millisecond)
		}
		p.kill()
		cancel()
		wg.Wait()
		t.Logf("round %d: killed after %d acknowledged writes", round, s.ackCount()-base)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.refused) > 0 {
		t.Errorf("%d PUTs were answered with an error, first: %s", len(s.refused), s.refused[0])
	}
	if s.acks < 1000 {
		t.Errorf("only %d writes acknowledged; the load did not exercise much", s.acks)
	}
}
