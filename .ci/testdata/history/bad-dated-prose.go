package x

// Records written before 2026-11-29 also carry service terms.
