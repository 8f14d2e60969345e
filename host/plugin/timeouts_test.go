package plugin

import (
	"strings"
	"testing"
	"time"
)

// The deadlines of plugin calls are settings (hardening 26, also seen: a
// Python plugin's start failed at a fixed 15 s under load).
func TestParseTimeouts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Timeouts
		err  string
	}{
		{in: "", want: Timeouts{}},
		{in: "start=2m, configure=20m", want: Timeouts{Start: 2 * time.Minute, Configure: 20 * time.Minute}},
		{in: "step=90s,info=5s,predictive=3m,state=1h", want: Timeouts{Step: 90 * time.Second, Info: 5 * time.Second, Predictive: 3 * time.Minute, State: time.Hour}},
		{in: "startup=1m", err: `timeouts "startup=1m": want name=duration, e.g. configure=20m, with name one of start, info, configure, step, predictive, state`},
		{in: "start", err: "want name=duration"},
		{in: "start=0s", err: `timeouts "start=0s": want a positive duration`},
		{in: "step=ten", err: "want a positive duration"},
	} {
		got, err := ParseTimeouts(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	d := DefaultTimeouts()
	if d.Start < 30*time.Second {
		t.Errorf("default start timeout %v: a Python plugin needs more under load", d.Start)
	}
	if got, err := ParseTimeouts(d.String()); err != nil || got != d {
		t.Errorf("ParseTimeouts(%q) = %+v, %v; want the defaults back", d.String(), got, err)
	}
	if got := (Timeouts{Configure: time.Hour}).withDefaults(); got.Configure != time.Hour || got.Start != d.Start || got.State != d.State {
		t.Errorf("withDefaults: %+v", got)
	}
}
