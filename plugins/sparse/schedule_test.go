package sparse

import (
	"math"
	"slices"
	"testing"
)

// The cosine death rate is FreeTickets' CosineDecay (a CosineAnnealingLR
// from p to 0.005 over the run's steps); the constant one is p.
func TestDeathRate(t *testing.T) {
	tests := []struct {
		decay    string
		s, total int64
		want     float64
	}{
		{Cosine, 0, 1000, 0.5},
		{Cosine, 500, 1000, (0.5 + 0.005) / 2},
		{Cosine, 1000, 1000, 0.005},
		{Cosine, 250, 1000, 0.005 + 0.495*(1+math.Sqrt2/2)/2},
		{Constant, 1000, 1000, 0.5},
		{Constant, 3, 1000, 0.5},
	}
	for _, tt := range tests {
		if got := DeathRate(tt.decay, 0.5, tt.s, tt.total); math.Abs(got-tt.want) > 1e-15 {
			t.Errorf("DeathRate(%s, 0.5, %d, %d) = %v, want %v", tt.decay, tt.s, tt.total, got, tt.want)
		}
	}
}

// The EDST plan is main_EDST.py's: with epochs 450, --epochs-explo 150
// and --model-num 3 (the README command), the rate drops to 0.01 after
// epoch 150, to 0.001 after 200, 300 and 400, and a large exploration
// (with the ticket before it) follows epochs 250 and 350.
func TestEDSTPlan(t *testing.T) {
	// run is n epochs of phase p.
	type run struct {
		p Phase
		n int
	}
	tests := []struct {
		name                     string
		epochs, explore, tickets int
		phases                   []run
		ends                     []int
	}{
		{"FreeTickets README", 450, 150, 3,
			[]run{{Explore, 150}, {Refine, 50}, {RefineFinal, 50}, {Refine, 50}, {RefineFinal, 50}, {Refine, 50}, {RefineFinal, 50}},
			[]int{250, 350}},
		{"table 3, M = 5", 200, 50, 5,
			[]run{{Explore, 50}, {Refine, 15}, {RefineFinal, 15}, {Refine, 15}, {RefineFinal, 15}, {Refine, 15}, {RefineFinal, 15},
				{Refine, 15}, {RefineFinal, 15}, {Refine, 15}, {RefineFinal, 15}},
			[]int{80, 110, 140, 170}},
		// Phases of 8/3 epochs: boundaries ⌈1+8k/3⌉ = 4, 7 and
		// mid-phases ⌈1+8k/3+4/3⌉ = 3, 5, 8, as the script's np.ceil.
		{"fractional phases", 9, 1, 3,
			[]run{{Explore, 1}, {Refine, 2}, {RefineFinal, 1}, {Refine, 1}, {RefineFinal, 2}, {Refine, 1}, {RefineFinal, 1}},
			[]int{4, 7}},
		{"no exploration", 4, 0, 2, []run{{Refine, 1}, {RefineFinal, 1}, {Refine, 1}, {RefineFinal, 1}}, []int{2}},
		{"smoke run, all exploration", 2, 50, 5, []run{{Explore, 2}}, nil},
		// Phases of one epoch: each is all refinement rate, and every
		// boundary still takes a ticket.
		{"one-epoch phases", 5, 2, 3, []run{{Explore, 2}, {Refine, 3}}, []int{3, 4}},
		// Phases of half an epoch: empty phases take no ticket.
		{"empty phases", 3, 1, 4, []run{{Explore, 1}, {Refine, 2}}, []int{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewEDSTPlan(tt.epochs, tt.explore, tt.tickets)
			var want []Phase
			for _, r := range tt.phases {
				for range r.n {
					want = append(want, r.p)
				}
			}
			if !slices.Equal(p.Phases, want) {
				t.Errorf("phases %v, want %v", p.Phases, want)
			}
			if !slices.Equal(p.Ends, tt.ends) {
				t.Errorf("ends %v, want %v", p.Ends, tt.ends)
			}
			if p.Tickets() != len(tt.ends)+1 {
				t.Errorf("%d tickets for %d ends", p.Tickets(), len(tt.ends))
			}
		})
	}
}
