package hparams_test

import (
	"fmt"

	"github.com/optlab/optlab/sdk/hparams"
)

// Config is a method's hyperparameters: the tags are its schema, the
// values given to Specs its defaults.
type Config struct {
	Rho   float64 `hp:"rho" range:"[0,)" doc:"neighbourhood radius ρ"`
	Scope string  `hp:"scope" enum:"all|weights" doc:"which tensors the ascent scales"`
	M     int     `hp:"m" range:"[1,batch]" doc:"sub-batches perturbed separately"`
}

// A hyperparameter schema from struct tags: Specs lists it for the
// plugin's Info (the host validates an experiment against it before any
// training), ApplyIn fills a struct from the values the host sends, with
// the same checks and messages on both sides; "batch" is a bound that the
// host resolves to the run's batch size.
func Example() {
	for _, s := range hparams.MustSpecs(Config{Rho: 0.05, Scope: "all", M: 1}) {
		fmt.Printf("%s %s = %v %s%v: %s\n", s.Name, s.Type, s.Default, s.Range, s.Enum, s.Doc)
	}
	c := Config{Rho: 0.05, Scope: "all", M: 1}
	batch := hparams.Bounds{"batch": 128}
	fmt.Println(hparams.ApplyIn(&c, map[string]any{"rho": 0.1, "m": int64(4)}, batch), c)
	fmt.Println(hparams.ApplyIn(&c, map[string]any{"m": int64(256)}, batch))
	fmt.Println(hparams.ApplyIn(&c, map[string]any{"scope": "bias"}, batch))
	// Output:
	// rho float = 0.05 [0,)[]: neighbourhood radius ρ
	// scope string = all [all weights]: which tensors the ascent scales
	// m int = 1 [1,batch][]: sub-batches perturbed separately
	// <nil> {0.1 all 4}
	// hparams: "m": 256 is out of range [1,batch]: want ≥ 1 and ≤ 128, the batch size
	// hparams: "scope": "bias" is not one of "all", "weights"
}
