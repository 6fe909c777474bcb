// Package backend holds what the store backends share that does not depend
// on how they store: the checks of every operation (names, kinds, sizes,
// lease and record rules, Op.DependsOn), the JSON encoding of labels, spec
// and status, the rules of a resource write over the stored row (Row,
// Next: existence, versions, status patches, size), the queue of Apply
// calls that one writer goroutine takes up in groups (Queue), the
// in-memory tail of the change feed (Recent) and the lock of an embedded
// data directory. Keeping them here is what makes the backends
// (store/sqlstore with its SQLite and PostgreSQL dialects, store/pebble,
// store/kube) refuse and accept the same things with the same messages.
//
// It imports store and resource only; it must not import the backends nor
// anything above store. Its functions are pure and safe for concurrent use;
// Queue and Recent guard themselves with a mutex.
package backend
