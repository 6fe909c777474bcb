package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"

	"github.com/spf13/cobra"

	"github.com/meshnames/meshnames/internal/client"
	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/validate"
)

// MaxApplyBytes bounds the input of apply.
const MaxApplyBytes = 64 << 20

// applyWorkers is how many PUTs apply keeps in flight; the embedded store
// commits concurrent writes together, so a few in flight go much faster
// than one at a time.
const applyWorkers = 16

func newApplyCmd(env Env, newClient func() (*client.Client, error)) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE|-",
		Short: "Create or update resources from YAML or JSON documents",
		Long: `Create or update the resources in FILE (or standard input with -f -), a
stream of YAML documents separated by "---" lines, or one JSON document.

Every document is checked first - its syntax, every field rule, the labels the
control plane owns, and that its mesh exists - and if any document is invalid
nothing is applied and every problem is printed with its document and field.
Then Meshes, Zones and HostnameGenerators are applied one at a time in the
order of the input (a generator's creation time decides its precedence), and
the rest in parallel; apply prints created, updated or unchanged for each
resource, in the order of the input.`,
		Example: `  meshnames apply -f services.yaml
  cat mesh.yaml | meshnames apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return fmt.Errorf("missing -f FILE (use -f - for standard input)")
			}
			data, name, err := readInput(env, file)
			if err != nil {
				return err
			}
			c, err := newClient()
			if err != nil {
				return err
			}
			return apply(cmd.Context(), env, c, name, data)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "file to apply, or - for standard input")
	return cmd
}

func readInput(env Env, file string) ([]byte, string, error) {
	var r io.Reader
	name := file
	if file == "-" {
		r, name = env.In, "<stdin>"
	} else {
		f, err := os.Open(file)
		if err != nil {
			return nil, "", err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxApplyBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > MaxApplyBytes {
		return nil, "", fmt.Errorf("%s is larger than %d bytes; split it", name, MaxApplyBytes)
	}
	return data, name, nil
}

type applyDoc struct {
	index int
	line  int
	obj   *resource.Object
}

func (d applyDoc) where(file string) string {
	return fmt.Sprintf("%s: document %d (line %d)", file, d.index+1, d.line)
}

func apply(ctx context.Context, env Env, c *client.Client, file string, data []byte) error {
	parts := resource.SplitYAML(data)
	if len(parts) == 0 {
		return fmt.Errorf("%s holds no documents", file)
	}
	var docs []applyDoc
	problems := 0
	report := func(where string, errs validate.Errors) {
		for _, e := range errs {
			problems++
			if e.Field == "" {
				fmt.Fprintf(env.Err, "%s: %s\n", where, e.Message)
			} else {
				fmt.Fprintf(env.Err, "%s: %s: %s\n", where, e.Field, e.Message)
			}
		}
	}
	// Decoding is local: it needs no server, and reports positions in the
	// input. Everything else - defaults, validation, the rules of the
	// server's mode, whether the mesh exists, whether a resource is
	// read-only here - is decided by the server's admission layer, asked
	// for every document before anything is written (POST /_apply?dryRun).
	type decoded struct {
		obj  *resource.Object
		errs validate.Errors
	}
	results := make([]decoded, len(parts))
	forEach(len(parts), runtime.GOMAXPROCS(0), func(i int) {
		obj, errs := resource.DecodePartial(parts[i].Data)
		results[i] = decoded{obj: obj, errs: errs}
	})
	seen := map[resource.Key]int{}
	for i, p := range parts {
		d := applyDoc{index: i, line: p.Line, obj: results[i].obj}
		if d.obj == nil {
			continue
		}
		if j, dup := seen[d.obj.Key()]; dup {
			results[i].errs.Addf("name", "%s is also defined by document %d", d.obj.Key(), j+1)
		}
		seen[d.obj.Key()] = i
		docs = append(docs, d)
	}
	checks, checkErr := c.Check(ctx, objects(docs))
	for i, d := range docs {
		if checkErr == nil {
			results[d.index].errs = validate.Merge(results[d.index].errs, checks[i].Causes)
			if checks[i].Error != "" {
				results[d.index].errs = append(results[d.index].errs, validate.Violation{Message: checks[i].Error})
			}
		}
	}
	for i, p := range parts {
		where := applyDoc{index: i, line: p.Line}.where(file)
		if obj := results[i].obj; obj != nil {
			where += ", " + obj.Key().String()
		}
		report(where, results[i].errs)
	}
	if checkErr != nil {
		if problems > 0 {
			fmt.Fprintf(env.Err, "nothing applied: %d problem(s) in %s\n", problems, file)
		}
		return checkErr
	}
	if problems > 0 {
		return fmt.Errorf("nothing applied: %d problem(s) in %s", problems, file)
	}

	lines := make([]string, len(docs))
	failed := 0
	var mu sync.Mutex
	put := func(i int) {
		d := docs[i]
		res, err := c.Put(ctx, d.obj, client.PutOptions{Minimal: true})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed++
			lines[i] = fmt.Sprintf("%s failed: %v", d.obj.Key(), err)
			return
		}
		line := fmt.Sprintf("%s %s", d.obj.Key(), res.Result)
		for _, w := range res.Warnings {
			line += "\nWarning: " + w
		}
		lines[i] = line
	}
	// Meshes, Zones and HostnameGenerators first, one at a time in the
	// order of the input: meshes must exist before what they hold, and a
	// generator's creation time decides its precedence (seed 000), so the
	// one written first in the file must be created first. Services and
	// Dataplanes follow in parallel.
	var rest []int
	for i, d := range docs {
		if !resource.MustLookup(d.obj.Kind).MeshScoped {
			put(i)
		} else {
			rest = append(rest, i)
		}
	}
	forEach(len(rest), applyWorkers, func(j int) { put(rest[j]) })
	for _, l := range lines {
		fmt.Fprintln(env.Out, l)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d resources were not applied", failed, len(docs))
	}
	return nil
}

// forEach calls f(0) ... f(n-1) from up to workers goroutines and returns
// when all calls have.
func forEach(n, workers int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// objects returns the documents' resources.
func objects(docs []applyDoc) []*resource.Object {
	out := make([]*resource.Object, len(docs))
	for i, d := range docs {
		out[i] = d.obj
	}
	return out
}
