package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/protocoltest"
)

// strayOpt is the toy optimizer whose Step leaves a goroutine behind that
// sends an Exec once told to, after Step returned.
type strayOpt struct {
	optim.Optimizer
	h     optim.Host
	start chan struct{}
	late  chan error
}

func (s *strayOpt) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	s.h = h
	return s.Optimizer.Configure(ctx, h, cfg)
}

func (s *strayOpt) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	out, err := s.Optimizer.Step(ctx, in)
	go func() {
		<-s.start
		_, e := s.h.Exec(context.Background(), optim.Prog().Fill(1, optim.K(0)))
		s.late <- e
	}()
	return out, err
}

// An Exec that arrives while none of the host's calls is in flight is
// refused, and the plugin's next call fails naming it (hardening4/08: a
// thread left running zeroed the parameters before evaluation).
func TestExecOutsideACallRefused(t *testing.T) {
	ctx := context.Background()
	opt := &strayOpt{Optimizer: protocoltest.New(), start: make(chan struct{}), late: make(chan error, 1)}
	c, err := Launch(ctx, LaunchSpec{Name: "stray", InProcess: func() optim.Optimizer { return opt }, Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	host := protocoltest.NewFakeHost(10)
	if err := c.Configure(ctx, host, optim.Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(ctx, optim.StepInput{LR: 0.1}); err != nil {
		t.Fatal(err)
	}
	before := len(host.Programs())
	close(opt.start) // Step has returned: the host's call is over
	select {
	case err := <-opt.late:
		if err == nil || !strings.Contains(err.Error(), "none of the host's calls into it was in flight") {
			t.Errorf("late Exec: err = %v, want it refused", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("late Exec did not return")
	}
	if n := len(host.Programs()); n != before {
		t.Errorf("the host ran the late program (%d programs, %d before)", n, before)
	}
	if _, err := c.Step(ctx, optim.StepInput{LR: 0.1}); err == nil || !strings.Contains(err.Error(), "sent an Exec while none") {
		t.Errorf("next Step: err = %v, want it to fail naming the stray Exec", err)
	}
}
