package decode

import (
	"strconv"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"

	"github.com/meshnames/meshnames/internal/validate"
)

// Lines finds where the fields of one YAML (or JSON) document are, so that
// a problem is reported at its field's own line rather than the document's
// first. Decoding goes through yaml.v2 (see YAMLGeneric), which keeps no
// positions; Lines parses the document again with yaml.v3's node tree, so
// it costs a second parse and is meant for the error path only.
type Lines struct {
	root *yaml3.Node // the document's top node; nil when data did not parse
	last int         // the document's last line
}

// YAMLLines parses data for Lines. It never fails: a document yaml.v3
// cannot parse (or an empty one) has no lines, and Line returns 0.
func YAMLLines(data []byte) Lines {
	var doc yaml3.Node
	if err := yaml3.Unmarshal(data, &doc); err != nil || doc.Kind != yaml3.DocumentNode || len(doc.Content) == 0 {
		return Lines{}
	}
	return Lines{root: doc.Content[0], last: lineCount(string(data))}
}

// lineCount is the number of lines of data as YAML counts them: \r\n is
// one break, and \n, \r, NEL, LS and PS are one each.
func lineCount(data string) int {
	n := 1
	for i, r := range data {
		switch r {
		case '\n':
			if i == 0 || data[i-1] != '\r' {
				n++
			}
		case '\r', '\u0085', '\u2028', '\u2029':
			n++
		}
	}
	return n
}

// Line returns the 1-based line of the field at p: the line of its key for
// a field or map entry, of the element itself for a list element. For a
// path the document does not hold (a required field left out, a path
// spelled differently from the document), it returns the line of the
// deepest part of p that the document holds, down to the document's first
// line for the root. It returns 0 when the document did not parse or p is
// not a path (see validate.Path).
func (l Lines) Line(p validate.Path) int {
	line, _ := l.Find(p)
	return line
}

// Find is Line, and reports whether the document holds the whole of p.
// The parser places an empty node after the last line break on the line
// after it ("---" alone is a document whose node is on line 2): such a
// line is the document's last.
func (l Lines) Find(p validate.Path) (line int, whole bool) {
	if l.root == nil {
		return 0, false
	}
	defer func() { line = min(line, l.last) }()
	steps, ok := parsePath(string(p))
	if !ok {
		return 0, false
	}
	line = l.root.Line
	n := l.root
	for _, s := range steps {
		n = deref(n)
		var next, at *yaml3.Node
		switch {
		case s.index >= 0 && n.Kind == yaml3.SequenceNode && s.index < len(n.Content):
			next = n.Content[s.index]
			at = next
		case s.index < 0 && n.Kind == yaml3.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if k := n.Content[i]; k.Kind == yaml3.ScalarNode && k.Value == s.key {
					at, next = k, n.Content[i+1]
				}
			}
		}
		if next == nil {
			return line, false
		}
		line, n = at.Line, next
	}
	return line, true
}

// deref follows an alias (*name) to the node it names.
func deref(n *yaml3.Node) *yaml3.Node {
	for i := 0; n.Kind == yaml3.AliasNode && n.Alias != nil && i < MaxDepth; i++ {
		n = n.Alias
	}
	return n
}

// step is one part of a path: a field or map key, or a list index (>= 0).
type step struct {
	key   string
	index int
}

// parsePath splits a validate.Path - fields separated by dots, [N] list
// indexes, ["key"] quoted map keys - into steps. The root is "".
func parsePath(p string) ([]step, bool) {
	var steps []step
	for p != "" {
		switch p[0] {
		case '.':
			if len(steps) == 0 {
				return nil, false
			}
			p = p[1:]
			fallthrough
		default:
			if len(steps) > 0 && p == "" {
				return nil, false
			}
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			if end == 0 {
				return nil, false
			}
			steps = append(steps, step{key: p[:end], index: -1})
			p = p[end:]
		case '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return nil, false
			}
			if p[1] == '"' {
				// A quoted key may hold ']': find the end of the quote.
				q, err := strconv.QuotedPrefix(p[1:])
				if err != nil || len(p) < 2+len(q) || p[1+len(q)] != ']' {
					return nil, false
				}
				k, _ := strconv.Unquote(q) // QuotedPrefix checked it
				steps = append(steps, step{key: k, index: -1})
				p = p[2+len(q):]
				continue
			}
			i, err := strconv.Atoi(p[1:end])
			if err != nil || i < 0 {
				return nil, false
			}
			steps = append(steps, step{index: i})
			p = p[end+1:]
		}
		if len(p) > 0 && p[0] != '.' && p[0] != '[' {
			return nil, false
		}
	}
	return steps, true
}
