package apiserver

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/validate"
)

// Error is the JSON body of every error response: a title, an optional
// detail, and for invalid resources one cause per violated rule. It carries
// Kuma's error fields too (type, details, invalid_parameters), filled in by
// writeError, because kumactl prints invalid_parameters and not causes.
type Error struct {
	// Type is Kuma's problem type, always ErrorType.
	Type   string               `json:"type"`
	Status int                  `json:"status"`
	Title  string               `json:"title"`
	Detail string               `json:"detail,omitempty"`
	Causes []validate.Violation `json:"causes,omitempty"`
	// Details repeats Detail under Kuma's older name.
	Details string `json:"details,omitempty"`
	// InvalidParameters repeats Causes in Kuma's shape.
	InvalidParameters []InvalidParameter `json:"invalid_parameters,omitempty"`
}

// ErrorType is the type of every error body (Kuma's).
const ErrorType = "/std-errors"

// InvalidParameter is one violated rule in Kuma's error shape.
type InvalidParameter struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// withKumaFields fills in Kuma's fields from the native ones.
func (e *Error) withKumaFields() *Error {
	c := *e
	c.Type = ErrorType
	c.Details = e.Detail
	c.InvalidParameters = nil
	for _, v := range e.Causes {
		c.InvalidParameters = append(c.InvalidParameters, InvalidParameter{Field: v.Field, Reason: v.Message})
	}
	return &c
}

func (e *Error) Error() string {
	if e.Detail != "" {
		return e.Title + ": " + e.Detail
	}
	return e.Title
}

func newError(status int, title, detail string) *Error {
	return &Error{Status: status, Title: title, Detail: detail}
}

func invalid(errs validate.Errors) *Error {
	return &Error{Status: http.StatusBadRequest, Title: "Invalid resource", Detail: "the resource breaks the rules listed in causes", Causes: errs}
}

// fromStore maps a store error to a response. This is the one place where
// store errors become HTTP statuses.
func fromStore(err error) *Error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return newError(http.StatusNotFound, "Not found", err.Error())
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrAlreadyExists):
		return newError(http.StatusConflict, "Conflict", err.Error())
	case errors.Is(err, store.ErrTooLarge):
		return newError(http.StatusRequestEntityTooLarge, "Resource too large", err.Error())
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrClosed):
		return newError(http.StatusServiceUnavailable, "Store unavailable", "the control plane cannot reach its store; try again later")
	}
	if errs, ok := validate.From(err); ok {
		return invalid(errs)
	}
	return newError(http.StatusInternalServerError, "Internal error", "see the control plane's log")
}

func writeError(w http.ResponseWriter, e *Error) {
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, e.withKumaFields())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"status":500,"title":"Internal error"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
