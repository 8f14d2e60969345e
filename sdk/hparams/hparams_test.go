package hparams

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
)

type cfg struct {
	Rho      float64 `hp:"rho" doc:"radius"`
	Steps    int     `hp:"steps"`
	Seed     int64   `hp:"seed"`
	Adaptive bool    `hp:"adaptive" doc:"ASAM"`
	Order    string  `hp:"order"`
	Skipped  float64 `hp:"-"`
	Internal int
}

func TestSpecs(t *testing.T) {
	want := []optim.ParamSpec{
		{Name: "rho", Type: optim.Float, Default: 0.05, Doc: "radius"},
		{Name: "steps", Type: optim.Int, Default: int64(3)},
		{Name: "seed", Type: optim.Int, Default: int64(-7)},
		{Name: "adaptive", Type: optim.Bool, Default: true, Doc: "ASAM"},
		{Name: "order", Type: optim.String, Default: "code"},
	}
	c := cfg{Rho: 0.05, Steps: 3, Seed: -7, Adaptive: true, Order: "code", Skipped: 1, Internal: 2}
	for _, v := range []any{c, &c} {
		got, err := Specs(v)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Specs(%T) = %#v, want %#v", v, got, want)
		}
	}
}

func TestSpecsErrors(t *testing.T) {
	type unexported struct {
		//lint:ignore U1000 the test is that an unexported tagged field is refused
		x float64 `hp:"x"`
	}
	type badType struct {
		X float32 `hp:"x"`
	}
	type dup struct {
		A float64 `hp:"a"`
		B float64 `hp:"a"`
	}
	type empty struct {
		A float64 `hp:""`
	}
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"not a struct", 3, "not a struct"},
		{"nil pointer", (*cfg)(nil), "nil pointer"},
		{"nil", nil, "nil value"},
		{"unexported", unexported{}, "unexported"},
		{"bad type", badType{}, "unsupported type float32"},
		{"duplicate", dup{}, "duplicate"},
		{"empty name", empty{}, "invalid hp name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Specs(tt.v)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want containing %q", err, tt.want)
			}
		})
	}
}

func TestApply(t *testing.T) {
	base := cfg{Rho: 0.05, Steps: 3, Seed: 1, Order: "code"}
	tests := []struct {
		name    string
		params  map[string]any
		want    cfg
		wantErr string
		unknown bool
	}{
		{name: "empty keeps defaults", params: nil, want: base},
		{name: "all fields", params: map[string]any{"rho": 0.5, "steps": int64(9), "seed": 4, "adaptive": true, "order": "paper"},
			want: cfg{Rho: 0.5, Steps: 9, Seed: 4, Adaptive: true, Order: "paper"}},
		{name: "int for float", params: map[string]any{"rho": int64(2)}, want: cfg{Rho: 2, Steps: 3, Seed: 1, Order: "code"}},
		{name: "integral float for int", params: map[string]any{"steps": 7.0}, want: cfg{Rho: 0.05, Steps: 7, Seed: 1, Order: "code"}},
		{name: "fractional float for int", params: map[string]any{"steps": 7.5}, wantErr: "not an integer"},
		{name: "unknown key", params: map[string]any{"rh0": 1.0}, wantErr: "unknown hyperparameter", unknown: true},
		{name: "untagged field is unknown", params: map[string]any{"Internal": 1}, wantErr: "unknown", unknown: true},
		{name: "string for bool", params: map[string]any{"adaptive": "true"}, wantErr: "not a valid bool"},
		{name: "bool for float", params: map[string]any{"rho": true}, wantErr: "not a valid float"},
		{name: "partial update not applied on error", params: map[string]any{"rho": 9.0, "zzz": 1}, wantErr: "unknown", unknown: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := base
			err := Apply(&got, tt.params)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				if errors.Is(err, ErrUnknown) != tt.unknown {
					t.Errorf("errors.Is(err, ErrUnknown) = %v, want %v", !tt.unknown, tt.unknown)
				}
				if got != base {
					t.Errorf("dst modified on error: %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestApplyBadDst(t *testing.T) {
	for _, dst := range []any{cfg{}, (*cfg)(nil), new(int)} {
		if err := Apply(dst, nil); err == nil {
			t.Errorf("Apply(%T) succeeded", dst)
		}
	}
}

func TestResolve(t *testing.T) {
	specs := MustSpecs(cfg{Rho: 0.05, Steps: 3, Order: "code"})
	tests := []struct {
		name    string
		given   map[string]any
		want    map[string]any
		wantErr string
	}{
		{name: "defaults", want: map[string]any{"rho": 0.05, "steps": int64(3), "seed": int64(0), "adaptive": false, "order": "code"}},
		{name: "override and convert", given: map[string]any{"rho": 1, "steps": 4.0},
			want: map[string]any{"rho": 1.0, "steps": int64(4), "seed": int64(0), "adaptive": false, "order": "code"}},
		{name: "unknown", given: map[string]any{"nope": 1}, wantErr: "unknown hyperparameter"},
		{name: "wrong type", given: map[string]any{"order": 3}, wantErr: "not a valid string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(specs, tt.given)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
			// The resolved map must apply cleanly back onto the struct.
			var c cfg
			if err := Apply(&c, got); err != nil {
				t.Fatalf("Apply(Resolve(...)): %v", err)
			}
		})
	}
}

func TestResolveBadSchema(t *testing.T) {
	dup := []optim.ParamSpec{{Name: "a", Type: optim.Float, Default: 1.0}, {Name: "a", Type: optim.Float, Default: 1.0}}
	if _, err := Resolve(dup, nil); err == nil {
		t.Error("duplicate schema accepted")
	}
	bad := []optim.ParamSpec{{Name: "a", Type: optim.Int, Default: "x"}}
	if _, err := Resolve(bad, nil); err == nil {
		t.Error("ill-typed default accepted")
	}
}

func TestApplyOverflow(t *testing.T) {
	type small struct {
		N int `hp:"n"`
	}
	// int is 64-bit on every platform this project targets; just check the
	// conversion path accepts the maximum exactly representable float.
	var s small
	if err := Apply(&s, map[string]any{"n": float64(1 << 53)}); err != nil {
		t.Fatal(err)
	}
	if s.N != 1<<53 {
		t.Errorf("N = %d", s.N)
	}
	if err := Apply(&s, map[string]any{"n": 1e300}); err == nil {
		t.Error("huge float accepted for int")
	}
}
