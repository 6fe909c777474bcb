package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/meshnames/meshnames/internal/admission"
	"github.com/meshnames/meshnames/internal/api"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/validate"
)

// Error is the JSON body of every error response (shared with the Kuma
// adapter, which answers in the same shape).
type Error = api.Error

// ErrorType is the type of every error body (Kuma's).
const ErrorType = api.ErrorType

func newError(status int, title, detail string) *Error {
	return &Error{Status: status, Title: title, Detail: detail}
}

// asError returns err as an *Error, or a 500 when it is not one.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return newError(http.StatusInternalServerError, "Internal error", "see the control plane's log")
}

func invalid(errs validate.Errors) *Error {
	return &Error{Status: http.StatusBadRequest, Title: "Invalid resource", Detail: "the resource breaks the rules listed in causes", Causes: errs}
}

// StatusClientClosedRequest is the status of a request whose client went
// away before it was answered (nginx's 499): no client reads it, but the
// audit log and the metrics tell it apart from a failure of the server.
const StatusClientClosedRequest = 499

// fromError maps an error of the store or of admission to a response.
// This is the one place where they become HTTP statuses.
func fromError(err error) *Error {
	var ae *admission.Error
	switch {
	case errors.Is(err, context.Canceled):
		// the request's context: its client closed the connection
		return newError(StatusClientClosedRequest, "Client closed request",
			"the client went away before the write was acknowledged; read the resource to see whether it was applied")
	case errors.As(err, &ae) && errors.Is(err, store.ErrNotFound):
		return newError(http.StatusNotFound, "Not found", ae.Msg)
	case errors.As(err, &ae) && (errors.Is(err, store.ErrConflict) || errors.Is(err, admission.ErrReadOnly) || errors.Is(err, admission.ErrMeshNotEmpty)):
		return newError(http.StatusConflict, "Conflict", ae.Msg)
	case errors.Is(err, store.ErrNotFound):
		return newError(http.StatusNotFound, "Not found", err.Error())
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrAlreadyExists):
		return newError(http.StatusConflict, "Conflict", err.Error())
	case errors.Is(err, store.ErrTooLarge):
		return newError(http.StatusRequestEntityTooLarge, "Resource too large", err.Error())
	case errors.Is(err, store.ErrDiskFull):
		return newError(http.StatusInsufficientStorage, "Store disk full",
			"the disk of the control plane's store is full: writes are refused until it has room again, then resume by themselves; reads and DNS go on")
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrClosed):
		return newError(http.StatusServiceUnavailable, "Store unavailable", "the control plane cannot reach its store; try again later")
	}
	if errs, ok := validate.From(err); ok {
		return invalid(errs)
	}
	return newError(http.StatusInternalServerError, "Internal error", "see the control plane's log")
}

func writeError(w http.ResponseWriter, e *Error) {
	switch e.Status {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	case http.StatusInsufficientStorage:
		w.Header().Set("Retry-After", "5")
	}
	writeJSON(w, e.Status, e.WithKumaFields())
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
