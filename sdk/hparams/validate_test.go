package hparams

import (
	"reflect"
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

func TestChanged(t *testing.T) {
	type Inner struct {
		Mode  string `hp:"mode"`
		Split string `hp:"split"`
	}
	type config struct {
		Inner
		Rho1   float64 `hp:"rho1"`
		Rho2   float64 `hp:"rho2"`
		K      int     `hp:"k"`
		Merge  bool    `hp:"merge"`
		hidden int
	}
	given := config{Inner: Inner{Mode: "paper"}, Rho1: 0.05, Rho2: -1, K: -1, hidden: 1}
	resolved := given
	resolved.Rho2, resolved.K, resolved.Split, resolved.Merge, resolved.hidden = 0.1, 3, "random", true, 2
	want := map[string]any{"rho2": 0.1, "k": int64(3), "split": "random", "merge": true}
	if got := Changed(given, &resolved); !reflect.DeepEqual(got, want) {
		t.Errorf("Changed = %#v, want %#v", got, want)
	}
	if got := Changed(given, given); got != nil {
		t.Errorf("Changed of equal values = %#v, want nil", got)
	}
	for _, bad := range [][2]any{{given, Inner{}}, {3, 3}, {(*config)(nil), given}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Changed(%T, %T) did not panic", bad[0], bad[1])
				}
			}()
			Changed(bad[0], bad[1])
		}()
	}
}
