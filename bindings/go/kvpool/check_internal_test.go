package kvpool

import (
	"errors"
	"strings"
	"testing"
)

// A broken invariant cannot be produced through the public API, so the
// wrapping of a failed check is tested on a made-up error.
func TestCheckErrorCarriesTheReport(t *testing.T) {
	report := "page 7 is free and held by the allocator\n"
	err := checkError(&Error{Code: ErrCheckFailed, Msg: "kvpool_check: 1 problem(s):"}, report)
	var kerr *Error
	if !errors.As(err, &kerr) || kerr.Code != ErrCheckFailed || !strings.Contains(kerr.Msg, report) {
		t.Fatalf("checkError = %v", err)
	}
	// A message that already has the report is left alone.
	msg := "kvpool_check: 1 problem(s):\n" + report
	err = checkError(&Error{Code: ErrCheckFailed, Msg: msg}, report)
	if !errors.As(err, &kerr) || kerr.Msg != msg {
		t.Errorf("checkError changed %q to %v", msg, err)
	}
	// Other errors pass through.
	other := &Error{Code: ErrInvalidArgument, Msg: "x"}
	if checkError(other, report) != other || other.Msg != "x" {
		t.Errorf("checkError changed %v", other)
	}
	if got := cText([]byte("ok\x00junk")); got != "ok" {
		t.Errorf("cText = %q", got)
	}
}
