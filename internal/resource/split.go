package resource

import (
	"bytes"
)

// Document is one document of a multi-document YAML stream.
type Document struct {
	// Line is the 1-based line of the stream where the document starts.
	Line int
	Data []byte
}

// SplitYAML splits a YAML stream on "---" separator lines. Documents that
// hold only comments and blank lines are dropped.
func SplitYAML(data []byte) []Document {
	var docs []Document
	var cur bytes.Buffer
	start, line := 1, 0
	flush := func() {
		if hasContent(cur.Bytes()) {
			docs = append(docs, Document{Line: start, Data: bytes.Clone(cur.Bytes())})
		}
		cur.Reset()
	}
	for len(data) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i+1], data[i+1:]
		} else {
			l, data = data, nil
		}
		if isSeparator(l) {
			flush()
			start = line + 1
			continue
		}
		if cur.Len() == 0 && !hasContent(l) {
			start = line + 1
			continue
		}
		cur.Write(l)
	}
	flush()
	return docs
}

func isSeparator(l []byte) bool {
	l = bytes.TrimRight(l, "\r\n")
	if !bytes.HasPrefix(l, []byte("---")) {
		return false
	}
	rest := bytes.TrimSpace(l[3:])
	return len(rest) == 0 || rest[0] == '#'
}

func hasContent(b []byte) bool {
	for _, l := range bytes.Split(b, []byte("\n")) {
		t := bytes.TrimSpace(l)
		if len(t) > 0 && t[0] != '#' {
			return true
		}
	}
	return false
}
