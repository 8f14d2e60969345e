package optimtest

import (
	"context"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
)

// MustHost is NewHost for tests: it stops the test on error.
func MustHost(t testing.TB, p Problem, opts ...HostOption) *Host {
	t.Helper()
	h, err := NewHost(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// MustRun is Run for tests: it stops the test on error.
func MustRun(t testing.TB, opt optim.Optimizer, h optim.Host, steps int, opts ...RunOption) []optim.StepOutput {
	t.Helper()
	outs, err := Run(context.Background(), opt, h, steps, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return outs
}
