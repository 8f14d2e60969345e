package plugin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/protocol"
	"github.com/optlab/optlab/sdk/protocoltest"
)

// strayOpt is the toy optimizer whose Step also sends an Exec that
// belongs to no call of the host: during the Step from a goroutine with a
// context of its own (during), or with the Step's context (its values,
// without its cancellation) once told to, after the Step returned.
type strayOpt struct {
	optim.Optimizer
	h      optim.Host
	during bool
	start  chan struct{}
	late   chan error
}

func (s *strayOpt) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	s.h = h
	return s.Optimizer.Configure(ctx, h, cfg)
}

func (s *strayOpt) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	out, err := s.Optimizer.Step(ctx, in)
	zero := optim.Prog().Fill(optim.Params, optim.K(0))
	if s.during {
		// The Step waits for the goroutine: its Exec comes while the
		// host's call is in flight, from outside it.
		done := make(chan error, 1)
		go func() {
			_, e := s.h.Exec(context.Background(), zero)
			done <- e
		}()
		s.late <- <-done
		return out, err
	}
	// The Step's ctx is cancelled once the call returns (an Exec with it
	// fails in the plugin); its values, the call id included, outlive it.
	kept := context.WithoutCancel(ctx)
	go func() {
		<-s.start
		_, e := s.h.Exec(kept, zero)
		s.late <- e
	}()
	return out, err
}

// An Exec that belongs to none of the host's calls in flight is refused,
// whenever it comes, the plugin's next call and Refused fail naming it,
// and the host runs nothing of it (hardening4/08: a thread left running
// after the last Step zeroed the parameters before evaluation). The
// refusal does not depend on timing: the Exec names its call (protocol
// minor 11), or names none.
func TestExecOutsideACallRefused(t *testing.T) {
	tests := []struct {
		name   string
		during bool
		want   string
	}{
		{"goroutine of its own during Step", true, "it carries no call id"},
		{"Step's context kept after Step returned", false, "which had returned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			opt := &strayOpt{Optimizer: protocoltest.New(), during: tt.during, start: make(chan struct{}), late: make(chan error, 1)}
			c, err := Launch(ctx, LaunchSpec{Name: "stray", InProcess: func() optim.Optimizer { return opt }, Logger: quietLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			host := protocoltest.NewFakeHost(10)
			if err := c.Configure(ctx, host, optim.Config{}); err != nil {
				t.Fatal(err)
			}
			// The Step's own Execs (protocoltest's optimizer sends two per
			// Step) are served.
			before := len(host.Programs())
			if _, err := c.Step(ctx, optim.StepInput{LR: 0.1}); err != nil {
				t.Fatal(err)
			}
			if got := len(host.Programs()); got != before+2 {
				t.Fatalf("Step ran %d programs, want its own 2", got-before)
			}
			before = len(host.Programs())
			if !tt.during {
				close(opt.start) // Step has returned: the host's call is over
			}
			var late error
			select {
			case late = <-opt.late:
			case <-time.After(10 * time.Second):
				t.Fatal("stray Exec did not return")
			}
			if late == nil || !strings.Contains(late.Error(), tt.want) || !strings.Contains(late.Error(), "refused") {
				t.Errorf("stray Exec: err = %v, want it refused (%q)", late, tt.want)
			}
			if n := len(host.Programs()); n != before {
				t.Errorf("the host ran the stray program (%d programs, %d before)", n, before)
			}
			if err := c.Refused(); !errors.Is(err, protocol.ErrStrayExec) || !strings.Contains(err.Error(), "plugin stray") {
				t.Errorf("Refused() = %v, want the refusal naming the plugin", err)
			}
			if _, err := c.Step(ctx, optim.StepInput{LR: 0.1}); !errors.Is(err, protocol.ErrStrayExec) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("next Step: err = %v, want it to fail naming the stray Exec", err)
			}
		})
	}
}
