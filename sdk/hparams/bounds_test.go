package hparams

import (
	"testing"

	"github.com/optlab/optlab/sdk/optim"
)

// A range may name the batch size ("[1,batch]"): Check, which does not know
// it, leaves that bound open; CheckIn resolves it (issue 26, case 13).
func TestCheckInNamedBound(t *testing.T) {
	m := optim.ParamSpec{Name: "m", Type: optim.Int, Range: "[1,batch]"}
	b := Bounds{"batch": 64}
	for _, tt := range []struct {
		v    int64
		b    Bounds
		want string
	}{
		{100, nil, ""},
		{64, b, ""},
		{1, b, ""},
		{100, b, "100 is out of range [1,batch]: want ≥ 1 and ≤ 64, the batch size"},
		{9223372036854775807, b, "9223372036854775807 is out of range [1,batch]: want ≥ 1 and ≤ 64, the batch size"},
		{0, nil, "0 is out of range [1,batch]: want ≥ 1"},
	} {
		err := CheckIn(m, tt.v, tt.b)
		if got := errString(err); got != tt.want {
			t.Errorf("CheckIn(%d, %v) = %q, want %q", tt.v, tt.b, got, tt.want)
		}
	}
	for _, bad := range []string{"[1,bacth]", "[batch,batch]", "[1,batch", "[x,2]"} {
		if err := Check(optim.ParamSpec{Name: "m", Type: optim.Int, Range: bad}, int64(1)); err == nil {
			t.Errorf("range %q accepted", bad)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// ApplyIn checks a named bound, as a plugin's Configure does with the batch
// size of the host's Layout; Apply leaves it open (issue 26, case 14).
func TestApplyInNamedBound(t *testing.T) {
	type config struct {
		M int `hp:"m" range:"[1,batch]"`
	}
	c := config{M: 1}
	if err := Apply(&c, map[string]any{"m": 100}); err != nil || c.M != 100 {
		t.Errorf("Apply: %v, m = %d", err, c.M)
	}
	err := ApplyIn(&c, map[string]any{"m": int64(9223372036854775807)}, Bounds{"batch": 64})
	if want := `hparams: "m": 9223372036854775807 is out of range [1,batch]: want ≥ 1 and ≤ 64, the batch size`; errString(err) != want || c.M != 100 {
		t.Errorf("ApplyIn = %v (m = %d), want %q", err, c.M, want)
	}
}
