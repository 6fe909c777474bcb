package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/client"
	"github.com/meshnames/meshnames/internal/decode"
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
	var dryRun, showProgress bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE|-",
		Short: "Create or update resources from YAML or JSON documents",
		Long: `Create or update the resources in FILE (or standard input with -f -), a
stream of YAML documents separated by "---" lines, or one JSON document.

Every document is checked first - its syntax, every field rule, the labels the
control plane owns, and that its mesh exists - and if any document is invalid
nothing is applied and every problem is printed at its line of the file, with
its document and field. Then Meshes, Zones and HostnameGenerators are applied
one at a time in the order of the input (a generator's creation time decides
its precedence), and the rest in parallel; apply prints created, updated or
unchanged for each resource, in the order of the input, and for more than one
resource a summary line (how many were created, updated and unchanged).

While it writes, a line on standard error counts the resources written,
when standard error is a terminal or with --progress (then a line at each
tenth, for logs).

With --dry-run nothing is written: apply prints what each write would do,
and the hostnames and VIPs that services would gain, lose or be refused, as
the controllers would decide them now (see also "meshnames diff").`,
		Example: `  meshnames apply -f services.yaml
  meshnames apply -f services.yaml --dry-run
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
			return apply(cmd.Context(), env, c, name, data, dryRun, showProgress)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "file to apply, or - for standard input")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check every document and show what would change, hostnames and VIPs included, without writing")
	cmd.Flags().BoolVar(&showProgress, "progress", false, "report progress on standard error even when it is not a terminal")
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
	part  resource.Document
	obj   *resource.Object
	lines *decode.Lines // found on first use: only problems need them
}

// where says where the field of a problem is: the file, the field's line,
// the document and, once decoded, the resource.
func (d *applyDoc) where(file string, field string) string {
	w := fmt.Sprintf("%s:%d: document %d", file, d.line(field), d.index+1)
	if d.obj != nil {
		w += ", " + d.obj.Key().String()
	}
	return w
}

// line is the line of the stream that holds field, or the document's
// first line when it cannot be found.
func (d *applyDoc) line(field string) int {
	if d.lines == nil {
		l := decode.YAMLLines(d.part.Data)
		d.lines = &l
	}
	n, whole := d.lines.Find(validate.Path(field))
	if rest, ok := strings.CutPrefix(field, "spec."); ok && !whole {
		// Dataplanes and Meshes may be written with their spec fields at
		// the top level, as Kuma writes them, without a spec.
		if _, hasSpec := d.lines.Find("spec"); !hasSpec {
			if m, whole := d.lines.Find(validate.Path(rest)); whole {
				n = m
			}
		}
	}
	if n == 0 {
		return d.part.Line
	}
	return d.part.Line + n - 1
}

// yamlLine matches the line yaml.v2 gives in a syntax error, which counts
// from the start of the document.
var yamlLine = regexp.MustCompile(`^(.*)yaml: line ([0-9]+): (.*)$`)

// report prints the problems of d in the order of their lines and returns
// how many there were.
func (d *applyDoc) report(w io.Writer, file string, errs validate.Errors) int {
	errs = slices.Clone(errs)
	slices.SortStableFunc(errs, func(a, b validate.Violation) int { return d.line(a.Field) - d.line(b.Field) })
	for _, e := range errs {
		where, msg := d.where(file, e.Field), e.Message
		if e.Field == resource.DocumentField {
			// A syntax error: the document as a whole, at the line the
			// parser stopped.
			if m := yamlLine.FindStringSubmatch(msg); m != nil {
				n, _ := strconv.Atoi(m[2])
				where = fmt.Sprintf("%s:%d: document %d", file, d.part.Line+n-1, d.index+1)
				msg = m[1] + m[3]
			}
			fmt.Fprintf(w, "%s: %s\n", where, msg)
			continue
		}
		if e.Field == "" {
			fmt.Fprintf(w, "%s: %s\n", where, msg)
		} else {
			fmt.Fprintf(w, "%s: %s: %s\n", where, e.Field, msg)
		}
	}
	return len(errs)
}

func apply(ctx context.Context, env Env, c *client.Client, file string, data []byte, dryRun, showProgress bool) error {
	docs, checked, err := check(ctx, env, c, file, data, "applied")
	if err != nil {
		return err
	}
	if dryRun {
		for i, d := range docs {
			fmt.Fprintf(env.Out, "%s %s (dry run)\n", d.obj.Key(), checked.Items[i].Result)
		}
		printChanges(env, checked.Changes)
		return nil
	}
	return write(ctx, env, c, docs, showProgress)
}

// check decodes the documents of data (from file) and asks the server to
// admit every one without writing; verb says what did not happen when
// some cannot be ("applied"). It prints every problem, at its line of the
// file with its document and field, and fails when there is one.
func check(ctx context.Context, env Env, c *client.Client, file string, data []byte, verb string) ([]*applyDoc, *api.ApplyReport, error) {
	parts := resource.SplitYAML(data)
	if len(parts) == 0 {
		return nil, nil, fmt.Errorf("%s holds no documents", file)
	}
	var docs []*applyDoc
	problems := 0
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
	all := make([]*applyDoc, len(parts))
	seen := map[resource.Key]int{}
	for i, p := range parts {
		d := &applyDoc{index: i, part: p, obj: results[i].obj}
		all[i] = d
		if d.obj == nil {
			continue
		}
		if j, dup := seen[d.obj.Key()]; dup {
			results[i].errs.Addf("name", "%s is also defined by document %d", d.obj.Key(), j+1)
		}
		seen[d.obj.Key()] = i
		docs = append(docs, d)
	}
	checked, checkErr := c.Check(ctx, objects(docs))
	for i, d := range docs {
		if checkErr == nil {
			results[d.index].errs = validate.Merge(results[d.index].errs, checked.Items[i].Causes)
			if checked.Items[i].Error != "" {
				results[d.index].errs = append(results[d.index].errs, validate.Violation{Message: checked.Items[i].Error})
			}
		}
	}
	for i, d := range all {
		problems += d.report(env.Err, file, results[i].errs)
	}
	if checkErr != nil {
		if problems > 0 {
			fmt.Fprintf(env.Err, "nothing %s: %d problem(s) in %s\n", verb, problems, file)
		}
		return nil, nil, checkErr
	}
	if problems > 0 {
		return nil, nil, fmt.Errorf("nothing %s: %d problem(s) in %s", verb, problems, file)
	}
	return docs, checked, nil
}

// write applies docs, which the server admitted, reporting progress on
// standard error when it is a terminal or showProgress.
func write(ctx context.Context, env Env, c *client.Client, docs []*applyDoc, showProgress bool) error {
	lines := make([]string, len(docs))
	failed := 0
	outcomes := map[string]int{} // created, updated, unchanged
	var mu sync.Mutex
	prog := newProgress(env.Err, len(docs), showProgress)
	put := func(i int) {
		d := docs[i]
		res, err := c.Put(ctx, d.obj, client.PutOptions{Minimal: true})
		prog.add()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed++
			lines[i] = fmt.Sprintf("%s failed: %v", d.obj.Key(), err)
			return
		}
		outcomes[res.Result]++
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
	prog.finish()
	for _, l := range lines {
		fmt.Fprintln(env.Out, l)
	}
	if len(docs) > 1 {
		summary := fmt.Sprintf("%d resources: %d created, %d updated, %d unchanged", len(docs), outcomes["created"], outcomes["updated"], outcomes["unchanged"])
		if failed > 0 {
			summary += fmt.Sprintf(", %d failed", failed)
		}
		fmt.Fprintln(env.Out, summary)
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
func objects(docs []*applyDoc) []*resource.Object {
	out := make([]*resource.Object, len(docs))
	for i, d := range docs {
		out[i] = d.obj
	}
	return out
}

// printChanges prints the hostnames and VIPs services would gain or lose,
// one per line, by service.
func printChanges(env Env, changes []api.NameChange) {
	if len(changes) == 0 {
		fmt.Fprintln(env.Out, "No hostname or VIP would change.")
		return
	}
	for _, ch := range changes {
		what := "hostname " + ch.Hostname
		if ch.VIP != "" {
			what = "VIP " + ch.VIP
			if ch.Hostname != "" {
				what += " (" + ch.Hostname + ")"
			}
		}
		verb := ch.Change
		if verb == api.ChangeRefused {
			verb = "is refused"
		}
		line := fmt.Sprintf("%s %s/%s %s %s", ch.Kind, ch.Mesh, ch.Name, verb, what)
		if ch.Reason != "" {
			line += ": " + ch.Reason
		}
		fmt.Fprintln(env.Out, line)
	}
}
