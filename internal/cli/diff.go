package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshnames/meshnames/internal/client"
	"github.com/meshnames/meshnames/internal/resource"
)

func newDiffCmd(env Env, newClient func() (*client.Client, error)) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "diff -f FILE|-",
		Short: "Show what applying documents would change, hostnames and VIPs included",
		Long: `Show what "meshnames apply -f FILE" would change, without writing anything.

Every document is checked as apply checks it. For each resource that would be
created or updated, diff prints a unified diff of its labels and spec (what
is stored against what FILE holds); then the hostnames and VIPs that services
would gain, lose or be refused, as the controllers would decide them now -
including services FILE does not hold, such as those a new
HostnameGenerator would name or whose name a new service would take.

The exit status is 0 when nothing would change, 1 when something would, and
2 when the documents cannot be checked (the problems are printed).`,
		Example: `  meshnames diff -f services.yaml
  cat gen.yaml | meshnames diff -f -`,
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
			changed, err := diff(cmd, env, c, name, data)
			switch {
			case err != nil:
				return &exitError{code: 2, err: err}
			case changed:
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "file to compare, or - for standard input")
	return cmd
}

// diff prints what applying data would change and reports whether
// anything would.
func diff(cmd *cobra.Command, env Env, c *client.Client, file string, data []byte) (bool, error) {
	ctx := cmd.Context()
	docs, checked, err := check(ctx, env, c, file, data, "compared")
	if err != nil {
		return false, err
	}
	changed := false
	for i, d := range docs {
		res := checked.Items[i].Result
		if res == "unchanged" {
			continue
		}
		changed = true
		var before string
		if res == "updated" {
			cur, err := c.Get(ctx, resource.MustLookup(d.obj.Kind), d.obj.Mesh, d.obj.Name)
			if err != nil {
				return false, err
			}
			if before, err = intent(cur); err != nil {
				return false, err
			}
		}
		after, err := intent(checked.Items[i].Object)
		if err != nil {
			return false, err
		}
		name := d.obj.Key().String()
		fmt.Fprintf(env.Out, "--- %s (stored)\n+++ %s (%s)\n", name, name, file)
		for _, l := range unifiedLines(splitLines(before), splitLines(after)) {
			fmt.Fprintln(env.Out, l)
		}
	}
	if len(checked.Changes) > 0 {
		changed = true
	}
	printChanges(env, checked.Changes)
	return changed, nil
}

// intent is what a write of obj sets, as YAML: its identity, labels and
// spec (the server's status and times are not written by apply).
func intent(obj *resource.Object) (string, error) {
	o := &resource.Object{Kind: obj.Kind, Mesh: obj.Mesh, Name: obj.Name, Labels: obj.Labels, Spec: obj.Spec}
	b, err := resource.EncodeYAML(o)
	return string(b), err
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// unifiedLines returns the lines of a, then b, marked " ", "-" or "+"
// from a longest common subsequence: every line of each, in order.
func unifiedLines(a, b []string) []string {
	// lcs[i][j] is the length of the longest common subsequence of a[i:]
	// and b[j:]; documents are short.
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out = append(out, " "+a[i])
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, "-"+a[i])
			i++
		default:
			out = append(out, "+"+b[j])
			j++
		}
	}
	return out
}

// exitError ends the command with an exit status of its own; err, when
// set, is printed as errors are.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return fmt.Sprintf("exit status %d", e.code)
}

func (e *exitError) Unwrap() error { return e.err }

// exitCode returns the exit status of err and whether to print it.
func exitCode(err error) (int, bool) {
	var e *exitError
	if errors.As(err, &e) {
		return e.code, e.err != nil
	}
	return 1, true
}
