package protocol_test

import (
	"context"
	"sync"
	"testing"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
	"github.com/optlab/optlab/sdk/protocol"
	"github.com/optlab/optlab/sdk/serve"
)

// The exact host passes the conformance suite across the wire: the suite
// drives the host a plugin's optimizer gets (sdk/serve's client of the Host
// service), which this package's Host service answers from the exact host,
// so every op, register, result and error crosses the protocol both ways.
func TestHostConformanceOverTheWire(t *testing.T) {
	mlp := func() optimtest.Problem {
		return optimtest.NewMLP(optimtest.MLPConfig{Hidden: 3, Samples: 48, Seed: 2})
	}
	hosts := []struct {
		name string
		new  func(t *testing.T) optim.Host
	}{
		{"mlp", func(t *testing.T) optim.Host {
			return optimtest.MustHost(t, mlp(), optimtest.WithMembers(2), optimtest.WithBatchSize(16))
		}},
		{"variational", func(t *testing.T) optim.Host {
			return optimtest.MustHost(t, mlp(), optimtest.WithMembers(2), optimtest.WithBatchSize(16),
				optimtest.WithVariational(1, nil, 0.5, 1, optimtest.KLqp))
		}},
	}
	for _, h := range hosts {
		t.Run(h.name, func(t *testing.T) {
			at := &switchHost{}
			remote := pluginHost(t, at)
			optimtest.TestHost(t, func(t *testing.T) optim.Host {
				at.set(h.new(t))
				return remote
			}, optimtest.HostTestOptions{BaseSGD: true})
		})
	}
}

// switchHost is the host behind the wire: each case of the suite sets a
// fresh one (cases run one at a time).
type switchHost struct {
	mu sync.Mutex
	h  optim.Host
}

func (s *switchHost) set(h optim.Host) { s.mu.Lock(); s.h = h; s.mu.Unlock() }

func (s *switchHost) cur() optim.Host { s.mu.Lock(); defer s.mu.Unlock(); return s.h }

// Layout implements optim.Host.
func (s *switchHost) Layout(ctx context.Context) (optim.Layout, error) { return s.cur().Layout(ctx) }

// Exec implements optim.Host.
func (s *switchHost) Exec(ctx context.Context, p *optim.Program) (optim.Result, error) {
	return s.cur().Exec(ctx, p)
}

// pluginHost connects an in-process plugin whose optimizer keeps the host
// it is configured with, serves h to it, and returns that host: h as a
// plugin sees it, each Exec sent from within a Step of the host's, as the
// protocol wants (docs/PROTOCOL.md §3).
func pluginHost(t *testing.T, h optim.Host) optim.Host {
	t.Helper()
	k := &keeper{jobs: make(chan func(context.Context), 1)}
	conn := dispense(t, func() optim.Optimizer { return k })
	if _, err := conn.Configure(context.Background(), h, optim.Config{Members: 1}, protocol.HostOptions{}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return &inStep{conn: conn, k: k}
}

// inStep is the host a plugin's optimizer sees, each of whose Execs the
// optimizer sends while serving a Step that inStep makes for it.
type inStep struct {
	mu   sync.Mutex // one Step at a time
	conn *protocol.Conn
	k    *keeper
}

// Layout implements optim.Host.
func (s *inStep) Layout(ctx context.Context) (optim.Layout, error) { return s.k.h.Layout(ctx) }

// Exec implements optim.Host.
func (s *inStep) Exec(ctx context.Context, p *optim.Program) (optim.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	type result struct {
		r   optim.Result
		err error
	}
	done := make(chan result, 1)
	s.k.jobs <- func(ctx context.Context) {
		r, err := s.k.h.Exec(ctx, p)
		done <- result{r, err}
	}
	if _, err := s.conn.Step(ctx, optim.StepInput{}); err != nil {
		select {
		case <-s.k.jobs: // the Step never ran it
		default:
		}
		return optim.Result{}, protocol.RemoteError(err)
	}
	res := <-done
	return res.r, res.err
}

// dispense connects the optimizer newOpt returns, served by sdk/serve, over
// in-process gRPC and returns the host's Conn to it.
func dispense(t *testing.T, newOpt func() optim.Optimizer) *protocol.Conn {
	t.Helper()
	side := serve.PluginMap(newOpt)[protocol.PluginName].(goplugin.GRPCPlugin)
	client, server := goplugin.TestPluginGRPCConn(t, false, map[string]goplugin.Plugin{
		protocol.PluginName: bothSides{server: side},
	})
	t.Cleanup(func() { _ = client.Close(); <-server.DoneCh })
	raw, err := client.Dispense(protocol.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(*protocol.Conn)
}

// bothSides is the plugin side of sdk/serve and the host side of this
// package in one go-plugin Plugin, for plugin.TestPluginGRPCConn.
type bothSides struct {
	protocol.HostPlugin
	server goplugin.GRPCPlugin
}

func (b bothSides) GRPCServer(br *goplugin.GRPCBroker, s *grpc.Server) error {
	return b.server.GRPCServer(br, s)
}

// keeper is an optimizer that keeps the host of its Configure and runs
// one job of jobs per Step, with the Step's context.
type keeper struct {
	optim.Defaults
	h    optim.Host
	jobs chan func(context.Context)
}

func (k *keeper) Info() optim.Info { return optim.Info{Name: "keeper"} }

func (k *keeper) Configure(_ context.Context, h optim.Host, _ optim.Config) error {
	k.h = h
	return nil
}

func (k *keeper) Step(ctx context.Context, _ optim.StepInput) (optim.StepOutput, error) {
	(<-k.jobs)(ctx)
	return optim.StepOutput{}, nil
}
