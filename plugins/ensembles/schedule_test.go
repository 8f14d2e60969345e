package ensembles

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// Reference §8 item 33: lr(T_cur = T_cycle) = 0 and lr(T_cycle/2) = α0/2.
func TestSnapshotLR(t *testing.T) {
	tests := []struct {
		name         string
		alpha0       float64
		tCur, tCycle int64
		want         float64
	}{
		{"end of cycle is 0", 0.2, 10, 10, 0},
		{"end of a long cycle is 0", 0.1, 391, 391, 0},
		{"half cycle is α0/2", 0.2, 5, 10, 0.1},
		{"half of an odd-sized last cycle", 0.2, 6, 12, 0.1},
		{"first step", 0.2, 1, 10, 0.1 * (1 + math.Cos(math.Pi/10))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SnapshotLR(tt.alpha0, tt.tCur, tt.tCycle); !near(got, tt.want, 1e-16) {
				t.Errorf("SnapshotLR(%v, %d, %d) = %.17g, want %.17g", tt.alpha0, tt.tCur, tt.tCycle, got, tt.want)
			}
		})
	}
	if got := SnapshotLR(0.2, 10, 10); got != 0 {
		t.Errorf("end of cycle: %g, want exactly 0", got)
	}
}

func TestSnapshotCycle(t *testing.T) {
	type place struct {
		cycle        int
		tCur, tCycle int64
	}
	tests := []struct {
		step, total int64
		cycles      int
		want        place
	}{
		{0, 42, 4, place{0, 1, 10}},
		{9, 42, 4, place{0, 10, 10}},
		{10, 42, 4, place{1, 1, 10}},
		{29, 42, 4, place{2, 10, 10}},
		{30, 42, 4, place{3, 1, 12}}, // the last cycle takes the remainder
		{41, 42, 4, place{3, 12, 12}},
		{0, 1, 1, place{0, 1, 1}},
		{199, 200, 1, place{0, 200, 200}},
		{1, 2, 2, place{1, 1, 1}},
	}
	for _, tt := range tests {
		c, cur, n := SnapshotCycle(tt.step, tt.total, tt.cycles)
		if got := (place{c, cur, n}); got != tt.want {
			t.Errorf("SnapshotCycle(%d, %d, %d) = %+v, want %+v", tt.step, tt.total, tt.cycles, got, tt.want)
		}
	}
}

// Reference §8 item 32: c = 4, α1 = 0.05, α2 = 1e-4 gives lr(0) = 0.05,
// lr(0.25) = 0.02505, lr(0.5) = 1e-4, then back up.
func TestFGECyclicLR(t *testing.T) {
	tests := []struct{ t, want float64 }{
		{0, 0.05},
		{0.25, 0.02505},
		{0.5, 1e-4},
		{0.75, 0.02505},
		{0.999, 0.05 - 0.002*(0.05-1e-4)},
	}
	for _, tt := range tests {
		if got := FGECyclicLR(0.05, 1e-4, tt.t); !near(got, tt.want, 1e-15) {
			t.Errorf("lr(t = %v) = %.17g, want %.17g", tt.t, got, tt.want)
		}
	}
	// Epoch k = 1 of a 4-epoch cycle, last of n iterations: just before α2.
	if got := FGEPosition(1, 99, 100, 4); !near(got, 0.4975, 1e-15) {
		t.Errorf("position %v, want 0.4975", got)
	}
	if got := FGEPosition(6, 0, 100, 4); got != 0.5 {
		t.Errorf("position of epoch 6 = %v, want 0.5", got)
	}
}

// Reference §8 item 32: snapshots at epochs 1, 5, 9, … (0-based) for c = 4.
func TestFGESnapshotEpochs(t *testing.T) {
	tests := []struct {
		cycle int
		want  []int64
	}{
		{4, []int64{1, 5, 9, 13, 17}},
		{2, []int64{0, 2, 4, 6, 8, 10, 12, 14, 16, 18}},
		{6, []int64{2, 8, 14}},
	}
	for _, tt := range tests {
		var got []int64
		for k := range int64(20) {
			if FGESnapshotEpoch(k, tt.cycle) {
				got = append(got, k)
			}
		}
		if len(got) != len(tt.want) {
			t.Fatalf("cycle %d: snapshots at %v, want %v", tt.cycle, got, tt.want)
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Fatalf("cycle %d: snapshots at %v, want %v", tt.cycle, got, tt.want)
			}
		}
		for epochs := range int64(25) {
			n := 0
			for k := range epochs {
				if FGESnapshotEpoch(k, tt.cycle) {
					n++
				}
			}
			if got := fgeSnapshots(epochs, tt.cycle); got != n {
				t.Errorf("cycle %d, %d epochs: %d snapshots planned, %d taken", tt.cycle, epochs, got, n)
			}
		}
	}
}

// train.py's learning_rate_schedule factors.
func TestFGEPretrainFactor(t *testing.T) {
	tests := []struct{ alpha, want float64 }{
		{0.005, 1}, {0.5, 1}, {0.6, 0.7525}, {0.7, 0.505}, {0.8, 0.2575}, {0.9, 0.01}, {0.95, 0.01}, {1, 0.01},
	}
	for _, tt := range tests {
		if got := FGEPretrainFactor(tt.alpha); !near(got, tt.want, 1e-15) {
			t.Errorf("factor(%v) = %.17g, want %v", tt.alpha, got, tt.want)
		}
	}
}
