// Package hostname renders HostnameGenerator templates (seeds 000 and 001)
// into DNS names and decides whether a rendered name is acceptable.
//
// A template is a Go text/template over the fields .Name, .DisplayName,
// .Namespace, .Zone and .Mesh, with the functions `label "KEY"` (the value of
// a label of the service; an error when the service lacks it) and `name`
// (seed 000's spelling of .Name). A rendered hostname must be a lower case
// RFC 1123 DNS name; it is never rewritten to become one, because a name the
// operator did not write is worse than a clear error in the service status.
//
// Templates are written by operators but evaluated by the control plane for
// every selected service, so rendering is kept bounded: the template text and
// every string it builds are capped in size, and the constructs that loop or
// recurse (range, define, block, template) are refused at parse time, as are
// the escaping functions (html, js, urlquery) and call, which have no use in a
// DNS name.
//
// The package is a leaf: it imports only the standard library and
// internal/validate. It must not import internal/resource (which imports it)
// or anything above it.
//
// Concurrency: a parsed *Template is immutable and safe for concurrent
// Render calls from any number of goroutines.
package hostname

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"

	"github.com/meshnames/meshnames/internal/validate"
)

// MaxTemplateLength bounds the template text, and MaxStringLength every
// string a template builds with print, printf or println. Real templates
// are a few dozen bytes; the caps keep rendering cheap whatever an operator
// writes.
const (
	MaxTemplateLength = 1024
	MaxStringLength   = 1024
)

// Vars are the values a template renders with, taken from one service.
type Vars struct {
	// Name is the resource name.
	Name string
	// DisplayName is the kuma.io/display-name label; when empty, Render
	// uses Name (seed 001: DisplayName falls back to the name).
	DisplayName string
	// Namespace is the k8s.kuma.io/namespace label, empty on Universal.
	Namespace string
	// Zone is the kuma.io/zone label, or the local zone when absent.
	Zone string
	// Mesh is the mesh of the service.
	Mesh string
	// Labels are the service's labels, read by `label "KEY"`.
	Labels map[string]string
	// labels, when compact is set, are read instead of Labels: the engine
	// keeps each service's labels in this compact form.
	labels  labelSet
	compact bool
}

// label returns the value of the label key and whether the service has it.
func (v *Vars) label(key string) (string, bool) {
	if v.compact {
		return v.labels.get(v.Name, key)
	}
	value, ok := v.Labels[key]
	return value, ok
}

// data is what a template sees as dot. Labels are reachable only through
// the label function, so that there is one way to read them and one error
// when one is missing.
type data struct {
	Name, DisplayName, Namespace, Zone, Mesh string
}

// MissingLabelError is returned by Render when the template asks for a label
// the service does not have (seed 000: the hostname is then not generated and
// the service gets a NotAvailable address with a reason).
type MissingLabelError struct {
	Key string
}

func (e *MissingLabelError) Error() string {
	return fmt.Sprintf("label %q is missing", e.Key)
}

// InvalidNameError is returned by Render when the template renders something
// that is not a lower case DNS name.
type InvalidNameError struct {
	// Hostname is what the template rendered; when it was longer than
	// validate.MaxSubdomainLength it is cut there and ends in "...".
	Hostname string
	// Rule is the rule the name breaks.
	Rule string
}

func (e *InvalidNameError) Error() string {
	return fmt.Sprintf("rendered hostname %q is not a valid DNS name: %s", e.Hostname, e.Rule)
}

// Template is a parsed hostname template.
type Template struct {
	text string
	// fast is the template as a list of segments when it is only text and
	// {{ .Field }}, {{ name }} and {{ label "KEY" }} actions, as every
	// template in the seeds is; Render then builds the string directly
	// instead of running the reflection-based template engine, which is
	// several times slower. nil when the template needs the engine.
	fast []segment
	base *template.Template
	// pool holds clones of base whose functions are bound to a per-clone
	// binding, so that concurrent renders do not share the label source and
	// no render has to re-parse or re-clone the template.
	pool sync.Pool
}

// binding is what the functions of one clone read during one render.
type binding struct {
	tmpl *template.Template
	vars *Vars
	// stub makes label return "label" for any key (admission check).
	stub bool
}

const rootName = "hostname"

// allowedFuncs are the function names a template may use: ours, plus the
// builtins that cannot build large strings or call arbitrary code.
// print, printf and println are replaced by bounded versions (see funcs).
var allowedFuncs = map[string]bool{
	"label": true, "name": true,
	"and": true, "or": true, "not": true, "len": true, "index": true, "slice": true,
	"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true,
	"print": true, "printf": true, "println": true,
}

var errOutputTooLong = errors.New("output too long")

// Parse parses a hostname template. The error names the construct that is
// wrong or refused.
func Parse(text string) (*Template, error) {
	if text == "" {
		return nil, errors.New("cannot parse template: template is empty")
	}
	if len(text) > MaxTemplateLength {
		return nil, fmt.Errorf("cannot parse template: template is %d bytes, more than the limit of %d", len(text), MaxTemplateLength)
	}
	// The functions given here only declare the names for the parser;
	// every clone in the pool binds its own.
	unbound := (&binding{}).funcs()
	base, err := template.New(rootName).Option("missingkey=error").Funcs(unbound).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("cannot parse template: %w", err)
	}
	for _, t := range base.Templates() {
		if t.Name() != rootName {
			return nil, fmt.Errorf("cannot parse template: define and block are not allowed in hostname templates (found %q)", t.Name())
		}
	}
	if base.Tree != nil && base.Tree.Root != nil {
		if err := checkNode(base.Tree.Root); err != nil {
			return nil, fmt.Errorf("cannot parse template: %w", err)
		}
	}
	t := &Template{text: text, base: base, fast: compileFast(base.Tree)}
	t.pool.New = func() any {
		c, err := t.base.Clone()
		if err != nil {
			// Clone of a text/template that was never executed does not
			// fail; a failure here is a bug in this package.
			panic("hostname: clone template: " + err.Error())
		}
		b := &binding{tmpl: c}
		c.Funcs(b.funcs())
		return b
	}
	return t, nil
}

// segment is one piece of a template that renders without the engine.
type segment struct {
	kind  segmentKind
	text  string // the literal text, or the label key
	field func(*Vars) string
}

type segmentKind int

const (
	segmentText segmentKind = iota
	segmentField
	segmentLabel
)

var fieldGetters = map[string]func(*Vars) string{
	"Name":        func(v *Vars) string { return v.Name },
	"DisplayName": func(v *Vars) string { return v.DisplayName },
	"Namespace":   func(v *Vars) string { return v.Namespace },
	"Zone":        func(v *Vars) string { return v.Zone },
	"Mesh":        func(v *Vars) string { return v.Mesh },
}

// compileFast returns the segments of a template made only of text and
// simple actions, or nil.
func compileFast(tree *parse.Tree) []segment {
	if tree == nil || tree.Root == nil {
		return nil
	}
	segs := []segment{}
	for _, n := range tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			segs = append(segs, segment{kind: segmentText, text: string(n.Text)})
		case *parse.ActionNode:
			seg, ok := fastAction(n.Pipe)
			if !ok {
				return nil
			}
			segs = append(segs, seg)
		default:
			return nil
		}
	}
	return segs
}

func fastAction(pipe *parse.PipeNode) (segment, bool) {
	if pipe == nil || len(pipe.Decl) > 0 || len(pipe.Cmds) != 1 {
		return segment{}, false
	}
	args := pipe.Cmds[0].Args
	switch a := args[0].(type) {
	case *parse.FieldNode:
		if get, ok := fieldGetters[a.Ident[0]]; ok && len(a.Ident) == 1 && len(args) == 1 {
			return segment{kind: segmentField, field: get}, true
		}
	case *parse.IdentifierNode:
		switch {
		case a.Ident == "name" && len(args) == 1:
			return segment{kind: segmentField, field: fieldGetters["Name"]}, true
		case a.Ident == "label" && len(args) == 2:
			if key, ok := args[1].(*parse.StringNode); ok {
				return segment{kind: segmentLabel, text: key.Text}, true
			}
		}
	}
	return segment{}, false
}

// renderFast renders the segments exactly as the engine would: pieces in
// order, stopping at the first missing label or at the length limit.
//
// It measures the result first so that the string is allocated once at its
// exact size: a full computation renders every service once per generator.
func (t *Template) renderFast(v *Vars, stub bool) (string, error) {
	n := 0
	for _, seg := range t.fast {
		piece, err := seg.value(v, stub)
		if err != nil {
			return "", err
		}
		if n += len(piece); n > validate.MaxSubdomainLength {
			break // the writing below stops here too, with the length error
		}
	}
	var out limitedBuilder
	out.Grow(min(n, validate.MaxSubdomainLength))
	for _, seg := range t.fast {
		piece, _ := seg.value(v, stub)
		if _, err := out.WriteString(piece); err != nil {
			return "", tooLong(&out)
		}
	}
	return checkName(out.String())
}

// value is what one segment renders to.
func (seg *segment) value(v *Vars, stub bool) (string, error) {
	switch seg.kind {
	case segmentText:
		return seg.text, nil
	case segmentField:
		return seg.field(v), nil
	}
	switch value, ok := v.label(seg.text); {
	case stub:
		return "label", nil
	case ok:
		return value, nil
	default:
		return "", &MissingLabelError{Key: seg.text}
	}
}

// checkNode refuses the constructs that make rendering unbounded: range
// (loops, including over integers), template invocations (recursion), and
// functions outside allowedFuncs.
func checkNode(n parse.Node) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkNode(c); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return checkNode(n.Pipe)
	case *parse.IfNode:
		return checkBranch(&n.BranchNode)
	case *parse.WithNode:
		return checkBranch(&n.BranchNode)
	case *parse.RangeNode:
		return errors.New("range is not allowed in hostname templates")
	case *parse.TemplateNode:
		return errors.New("template and block are not allowed in hostname templates")
	case *parse.PipeNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Cmds {
			if err := checkNode(c); err != nil {
				return err
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			if err := checkNode(a); err != nil {
				return err
			}
		}
	case *parse.ChainNode:
		return checkNode(n.Node)
	case *parse.IdentifierNode:
		if !allowedFuncs[n.Ident] {
			return fmt.Errorf("function %q is not allowed in hostname templates", n.Ident)
		}
	}
	// Text, comments, fields, variables, dot, nil and literals are fine.
	return nil
}

func checkBranch(b *parse.BranchNode) error {
	if err := checkNode(b.Pipe); err != nil {
		return err
	}
	if err := checkNode(b.List); err != nil {
		return err
	}
	if b.ElseList != nil {
		return checkNode(b.ElseList)
	}
	return nil
}

func (b *binding) funcs() template.FuncMap {
	return template.FuncMap{
		"label": b.label,
		"name":  b.name,
		// Bounded replacements for the builtins: each result is capped so
		// that chained variables cannot grow a string without limit.
		"print":   boundedString(fmt.Sprint),
		"println": boundedString(fmt.Sprintln),
		"printf": func(format string, args ...any) (string, error) {
			return bounded(fmt.Sprintf(format, args...))
		},
	}
}

func (b *binding) label(key string) (string, error) {
	if b.stub {
		return "label", nil
	}
	if b.vars == nil {
		return "", &MissingLabelError{Key: key}
	}
	v, ok := b.vars.label(key)
	if !ok {
		return "", &MissingLabelError{Key: key}
	}
	return v, nil
}

func (b *binding) name() string {
	if b.vars == nil {
		return ""
	}
	return b.vars.Name
}

func boundedString(f func(...any) string) func(...any) (string, error) {
	return func(args ...any) (string, error) { return bounded(f(args...)) }
}

func bounded(s string) (string, error) {
	if len(s) > MaxStringLength {
		return "", fmt.Errorf("result is %d bytes, more than the limit of %d", len(s), MaxStringLength)
	}
	return s, nil
}

// String returns the template text.
func (t *Template) String() string { return t.text }

// Render renders the template for one service and checks that the result is
// a lower case DNS name. Errors are *MissingLabelError when a label is
// missing, *InvalidNameError when the result is not a valid name, and an
// error starting "cannot render template" otherwise.
func (t *Template) Render(v Vars) (string, error) {
	if v.DisplayName == "" {
		v.DisplayName = v.Name
	}
	return t.render(&v, false)
}

func (t *Template) render(v *Vars, stub bool) (string, error) {
	if t.fast != nil {
		return t.renderFast(v, stub)
	}
	return t.renderEngine(v, stub)
}

// renderEngine renders with text/template.
func (t *Template) renderEngine(v *Vars, stub bool) (string, error) {
	b := t.pool.Get().(*binding)
	b.vars, b.stub = v, stub
	var out limitedBuilder
	err := b.tmpl.Execute(&out, data{Name: v.Name, DisplayName: v.DisplayName, Namespace: v.Namespace, Zone: v.Zone, Mesh: v.Mesh})
	b.vars, b.stub = nil, false
	t.pool.Put(b)

	if errors.Is(err, errOutputTooLong) {
		return "", tooLong(&out)
	}
	if err != nil {
		var missing *MissingLabelError
		if errors.As(err, &missing) {
			return "", missing
		}
		return "", fmt.Errorf("cannot render template: %w", err)
	}
	return checkName(out.String())
}

func checkName(name string) (string, error) {
	if rule := validate.DNS1123Subdomain(name); rule != "" {
		return "", &InvalidNameError{Hostname: name, Rule: rule}
	}
	return name, nil
}

func tooLong(out *limitedBuilder) error {
	return &InvalidNameError{
		Hostname: out.String() + "...",
		Rule:     fmt.Sprintf("must be no more than %d characters", validate.MaxSubdomainLength),
	}
}

// limitedBuilder collects output up to the longest valid DNS name and fails
// the write that would go past it: a longer result is invalid anyway, and
// stopping early bounds the work.
type limitedBuilder struct {
	strings.Builder
}

func (w *limitedBuilder) Write(p []byte) (int, error) {
	room := validate.MaxSubdomainLength - w.Len()
	if len(p) > room {
		w.Builder.Write(p[:room])
		return room, errOutputTooLong
	}
	return w.Builder.Write(p)
}

func (w *limitedBuilder) WriteString(s string) (int, error) {
	room := validate.MaxSubdomainLength - w.Len()
	if len(s) > room {
		w.Builder.WriteString(s[:room])
		return room, errOutputTooLong
	}
	return w.Builder.WriteString(s)
}

// stubVars are the values Check renders with (the same stubs as Kuma, so that
// templates accepted there are accepted here).
var stubVars = Vars{Name: "name", DisplayName: "displayname", Namespace: "namespace", Zone: "zone", Mesh: "mesh"}

// Check is the admission check of a HostnameGenerator template. It returns
// "" when the template is acceptable, or a message stating what is wrong:
// the template must parse, render with stub values (every label present),
// and the stub rendering must be a valid DNS name. A template that passes can
// still fail for a particular service, for example when a label is missing.
func Check(text string) string {
	if text == "" {
		return "must not be empty"
	}
	if len(text) > MaxTemplateLength {
		return fmt.Sprintf("must be no more than %d bytes", MaxTemplateLength)
	}
	t, err := Parse(text)
	if err != nil {
		return err.Error()
	}
	v := stubVars
	_, err = t.render(&v, true)
	var invalid *InvalidNameError
	switch {
	case errors.As(err, &invalid):
		return fmt.Sprintf("template renders to %q which is not a valid DNS name: %s", invalid.Hostname, invalid.Rule)
	case err != nil:
		msg := strings.TrimPrefix(err.Error(), "cannot render template: ")
		return "cannot render template with stub values: " + msg
	}
	return ""
}
