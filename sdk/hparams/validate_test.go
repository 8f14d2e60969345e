package hparams

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	type Inner struct {
		Mode string `hp:"mode" enum:"paper|reference"`
	}
	type config struct {
		Inner
		Rho float64 `hp:"rho" range:"[0,)"`
		K   int     `hp:"k" range:"[1,)"`
		Tag string  `hp:"tag"`
	}
	ok := config{Inner: Inner{Mode: "paper"}, Rho: 0.1, K: 1}
	tests := []struct {
		name string
		v    any
		want string // "" for valid
	}{
		{"valid", ok, ""},
		{"valid pointer", &ok, ""},
		{"enum in an embedded struct", config{Inner: Inner{Mode: "x"}, K: 1}, `hparams: "mode": "x" is not one of "paper", "reference"`},
		{"float range", config{Inner: Inner{Mode: "paper"}, Rho: -1, K: 1}, `hparams: "rho": -1 is out of range [0,): want ≥ 0`},
		{"int range", config{Inner: Inner{Mode: "paper"}}, `hparams: "k": 0 is out of range [1,): want ≥ 1`},
		{"nil pointer", (*config)(nil), "nil pointer"},
		{"not a struct", 3, "not a struct"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.v)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
