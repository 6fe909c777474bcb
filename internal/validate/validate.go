// Package validate holds the vocabulary every validator in meshnames speaks:
// field paths (spec.ports[0].port), a list of violations that is collected
// in full before it is returned, and the naming rules (DNS labels, label keys)
// that several kinds share.
//
// It imports only the standard library; everything else may import it.
package validate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Path is a field path such as spec.ports[0].port or labels["kuma.io/zone"].
// The zero value is the document root.
type Path string

// Field returns the path of the named child field.
func (p Path) Field(name string) Path {
	if p == "" {
		return Path(name)
	}
	return p + "." + Path(name)
}

// Index returns the path of the i-th element of a list.
func (p Path) Index(i int) Path {
	return p + Path("["+strconv.Itoa(i)+"]")
}

// Key returns the path of a map entry; the key is quoted so that keys with
// dots and slashes (kuma.io/zone) stay unambiguous.
func (p Path) Key(k string) Path {
	return p + Path("["+strconv.Quote(k)+"]")
}

func (p Path) String() string { return string(p) }

// Violation is one broken rule: the field it concerns and a message that
// states the rule.
type Violation struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Errors is a list of violations. A nil or empty list means "valid".
// It implements error so that it can travel through error returns and be
// recovered with errors.As.
type Errors []Violation

// Add records a violation at path p.
func (e *Errors) Add(p Path, msg string) {
	*e = append(*e, Violation{Field: string(p), Message: msg})
}

// Addf records a violation at path p with a formatted message.
func (e *Errors) Addf(p Path, format string, args ...any) {
	e.Add(p, fmt.Sprintf(format, args...))
}

// Append adds every violation of other.
func (e *Errors) Append(other Errors) {
	*e = append(*e, other...)
}

// Err returns the list as an error, or nil when it is empty. Use it as the
// last statement of a validator so that "no violations" is a nil error.
func (e Errors) Err() error {
	if len(e) == 0 {
		return nil
	}
	return e
}

func (e Errors) Error() string {
	var b strings.Builder
	for i, v := range e {
		if i > 0 {
			b.WriteString("; ")
		}
		if v.Field != "" {
			b.WriteString(v.Field)
			b.WriteString(": ")
		}
		b.WriteString(v.Message)
	}
	return b.String()
}

// From extracts the violations carried by err, if any.
func From(err error) (Errors, bool) {
	var e Errors
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}
