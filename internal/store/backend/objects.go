package backend

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/meshnames/meshnames/internal/resource"
)

// objectsChunk is how many rows a worker of Objects decodes at a time.
const objectsChunk = 512

// Objects decodes live rows into objects the caller owns, in the order of
// rows, on up to GOMAXPROCS goroutines: decoding the JSON of a List of
// the whole store (100,000 services at a start) is most of its CPU, and
// nothing else runs until the cache has it. On failure it returns the
// error of the first row, in order, that failed to decode.
func Objects(ctx context.Context, rows []*Row) ([]*resource.Object, error) {
	objs := make([]*resource.Object, len(rows))
	chunks := (len(rows) + objectsChunk - 1) / objectsChunk
	errs := make([]error, chunks)
	var next atomic.Int64
	work := func() {
		for {
			c := int(next.Add(1) - 1)
			if c >= chunks {
				return
			}
			if err := ctx.Err(); err != nil {
				errs[c] = err
				return
			}
			for i := c * objectsChunk; i < min((c+1)*objectsChunk, len(rows)); i++ {
				o, err := rows[i].Object()
				if err != nil {
					errs[c] = err
					break
				}
				objs[i] = o
			}
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), chunks) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return objs, nil
}
