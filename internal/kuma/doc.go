// Package kuma is meshnames' Kuma wire adapter: it serves, under /kuma on the
// API port, the resources of the native API in Kuma 3.x's wire shapes, so
// that an unmodified kumactl (and scripts written for Kuma's REST API) can
// list, read, write and delete them.
//
// It owns the translation both ways (ToKuma, FromKuma, KumaPath) and an HTTP
// handler that is only a translator: every request becomes a request to the
// native handler, carrying the caller's headers, so reads, writes,
// admission, validation and authorization are the native API's own. It
// keeps no state and no second store. What one model can say and the other
// cannot is refused by name (400), never dropped: a Kuma field meshnames has
// no place for is refused on write, and a native field Kuma's shape has no
// place for is listed in the document's meshnames.omitted on read, and a
// write that would remove it is refused.
//
// It imports api, decode, resource and validate only; nothing imports it
// but server, which mounts it. Its handler is safe for concurrent use.
package kuma
