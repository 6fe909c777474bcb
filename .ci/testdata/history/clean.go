package x

// The leader holds an advisory lock on its election session; the
// session's end frees it, and this session must not keep it. Each round
// kills the leader; the first round trip reads the row, and the first
// round's edit returns what the key held. A tenth of a second.
//
// Times as data are not history: "2026-01-02T03:04:05Z",
// "2026-01-02 03:04:05Z", meshnames-2026-11-25.tar, and a log line
// time=2026-11-25T14:25:38.480Z level=INFO msg="starting meshnames".
func TestSession_EndsWithProcess(t *testing.T) {}
