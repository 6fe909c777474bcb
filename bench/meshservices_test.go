package bench

// Benchmark of MeshServices synthesised from Dataplanes (universal mode)
// against a real `meshnames serve` on the embedded store, recorded in
// docs/performance.md under "Naming".
//
//	go test -run '^$' -bench DataplanesToServices -benchtime 1x -count 6 -timeout 60m ./bench/

import (
	"fmt"
	"testing"
	"time"
)

// dataplaneJSON is a Dataplane with one inbound of service tag, as Kuma's
// universal mode registers them.
func dataplaneJSON(name, tag string, i int) []byte {
	return fmt.Appendf(nil, `{"type":"Dataplane","name":%q,"mesh":"default","spec":{"networking":{"address":"10.%d.%d.%d",`+
		`"inbound":[{"name":"http","port":8080,"servicePort":80,"tags":{"kuma.io/service":%q,"kuma.io/protocol":"http"}}]}}}`,
		name, i>>16&0xff, i>>8&0xff, i&0xff, tag)
}

// BenchmarkDataplanesToServices PUTs 10,000 Dataplanes of 1,000 services
// (10 each, the Dataplanes of one service spread over the run) into a
// fresh server with 16 concurrent workers, and measures from the first PUT
// until every one of the 1,000 synthesised MeshServices exists with its
// default hostname Available and a VIP (the API's list, polled every
// 10 ms; total-s), and the same from the last acknowledged PUT
// (s-after-last-put).
func BenchmarkDataplanesToServices(b *testing.B) {
	const services, perService, workers = 1000, 10, 16
	n := services * perService
	b.Run(fmt.Sprintf("dataplanes=%d/services=%d", n, services), func(b *testing.B) {
		names := make([]string, n)
		bodies := make([][]byte, n)
		for i := range n {
			names[i] = fmt.Sprintf("dp-%05d", i)
			bodies[i] = dataplaneJSON(names[i], fmt.Sprintf("svc-%04d", i%services), i)
		}
		var putS, totalS, afterS []float64
		for b.Loop() {
			b.StopTimer()
			c := newClient()
			p := startServer(b, b.TempDir())
			p.waitReady(c, time.Minute)
			b.StartTimer()

			start := time.Now()
			lastAck, err := putAllAt(c, func(name string) string { return p.api + "/meshes/default/dataplanes/" + name }, names, bodies, workers)
			if err != nil {
				b.Fatal(err)
			}
			var done time.Time
			for deadline := time.Now().Add(5 * time.Minute); ; {
				total, named, err := countNamed(c, p.api)
				if err != nil {
					b.Fatal(err)
				}
				if total == services && named == services {
					done = time.Now()
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("%d MeshServices, %d named, 5 minutes after the last PUT", total, named)
				}
				p.checkAlive()
				time.Sleep(10 * time.Millisecond)
			}
			b.StopTimer()
			p.stop()
			putS = append(putS, lastAck.Sub(start).Seconds())
			totalS = append(totalS, done.Sub(start).Seconds())
			afterS = append(afterS, done.Sub(lastAck).Seconds())
			b.StartTimer()
		}
		b.ReportMetric(mean(putS), "put-s")
		b.ReportMetric(mean(totalS), "total-s")
		b.ReportMetric(mean(afterS), "s-after-last-put")
	})
}
