package kubeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Sentinel errors; test them with errors.Is on what the client returns.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	// ErrConflict: a write named a resourceVersion that is no longer current.
	ErrConflict = errors.New("conflict")
	// ErrGone: a watch or list asked for a resourceVersion the API server
	// no longer keeps (410 Gone / Expired); list again.
	ErrGone = errors.New("resource version too old")
	// ErrInvalid: the API server rejected the object (422), such as a
	// violation of a CRD's schema.
	ErrInvalid = errors.New("invalid")
	// ErrForbidden: the credentials may not do this (401, 403).
	ErrForbidden = errors.New("forbidden")
	// ErrUnavailable: the API server could not be reached or answered 5xx
	// or 429; the call may succeed later.
	ErrUnavailable = errors.New("kubernetes API unavailable")
)

// StatusError is the API server's answer to a failed call.
type StatusError struct {
	Code    int
	Reason  string
	Message string
	// Causes are the field errors of an Invalid answer.
	Causes []Cause
}

// Cause is one field error of a StatusError.
type Cause struct {
	Type    string `json:"reason"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

func (e *StatusError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("%s (%d %s)", e.Message, e.Code, e.Reason)
	}
	return fmt.Sprintf("%d %s", e.Code, e.Reason)
}

// Is maps the status to the sentinel errors.
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Code == http.StatusNotFound
	case ErrAlreadyExists:
		return e.Code == http.StatusConflict && e.Reason == "AlreadyExists"
	case ErrConflict:
		return e.Code == http.StatusConflict && e.Reason != "AlreadyExists"
	case ErrGone:
		return e.Code == http.StatusGone || e.Reason == "Expired" || e.Reason == "Gone"
	case ErrInvalid:
		return e.Code == http.StatusUnprocessableEntity || (e.Code == http.StatusBadRequest && e.Reason == "BadRequest")
	case ErrForbidden:
		return e.Code == http.StatusForbidden || e.Code == http.StatusUnauthorized
	case ErrUnavailable:
		return e.Code >= 500 || e.Code == http.StatusTooManyRequests
	}
	return false
}

// status is the wire form of a Status object.
type status struct {
	Kind    string `json:"kind"`
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Details *struct {
		Causes []Cause `json:"causes"`
	} `json:"details"`
}

func statusError(code int, body []byte) error {
	var s status
	if err := json.Unmarshal(body, &s); err != nil || s.Kind != "Status" {
		msg := string(body)
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		return &StatusError{Code: code, Reason: http.StatusText(code), Message: msg}
	}
	if s.Code == 0 {
		s.Code = code
	}
	e := &StatusError{Code: s.Code, Reason: s.Reason, Message: s.Message}
	if s.Details != nil {
		e.Causes = s.Details.Causes
	}
	return e
}
