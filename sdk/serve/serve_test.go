package serve

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
	"github.com/optlab/optlab/sdk/internal/wire"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/protocoltest"
)

// wired is the host end of an in-process plugin connection.
type wired struct {
	opt    pb.OptimizerClient
	broker *goplugin.GRPCBroker
	host   *hostService // of the latest serveHost
}

// testPlugin pairs the plugin side of PluginMap with a minimal host side,
// so that plugin.TestPluginGRPCConn can wire both in one process.
type testPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	server goplugin.GRPCPlugin
}

func (p testPlugin) GRPCServer(b *goplugin.GRPCBroker, s *grpc.Server) error {
	return p.server.GRPCServer(b, s)
}

func (p testPlugin) GRPCClient(_ context.Context, b *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &wired{opt: pb.NewOptimizerClient(c), broker: b}, nil
}

// wire connects the optimizer newOpt returns over in-process gRPC.
func wireUp(t *testing.T, newOpt func() optim.Optimizer) *wired {
	t.Helper()
	set := PluginMap(newOpt)
	ps := map[string]goplugin.Plugin{wire.PluginName: testPlugin{server: set[wire.PluginName].(goplugin.GRPCPlugin)}}
	client, server := goplugin.TestPluginGRPCConn(t, false, ps)
	// Close asks the server to stop (go-plugin controller Shutdown).
	t.Cleanup(func() { _ = client.Close(); <-server.DoneCh })
	raw, err := client.Dispense(wire.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(*wired)
}

// serveHost serves h on a new broker ID, as host/plugin does; w.host is
// its service.
func (w *wired) serveHost(h optim.Host) uint32 {
	id := w.broker.NextId()
	w.host = &hostService{h: h}
	go w.broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(opts...)
		pb.RegisterHostServer(s, w.host)
		return s
	})
	return id
}

// hostService is a minimal Host service for these tests. It keeps the
// call id that each Exec named ("" for none).
type hostService struct {
	pb.UnimplementedHostServer
	h optim.Host

	mu    sync.Mutex
	calls []string
}

// callIDs returns the call id each Exec named so far.
func (s *hostService) callIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *hostService) Layout(ctx context.Context, _ *pb.LayoutRequest) (*pb.LayoutResponse, error) {
	l, err := s.h.Layout(ctx)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.LayoutResponse{Layout: wire.LayoutToProto(l)}, nil
}

func (s *hostService) Exec(ctx context.Context, req *pb.ExecRequest) (*pb.ExecResponse, error) {
	id := ""
	if v := metadata.ValueFromIncomingContext(ctx, wire.CallIDKey); len(v) > 0 {
		id = v[0]
	}
	s.mu.Lock()
	s.calls = append(s.calls, id)
	s.mu.Unlock()
	p, err := wire.ExecRequestFromProto(req)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	r, err := s.h.Exec(ctx, p)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.ExecResponse{Result: wire.ResultToProto(r)}, nil
}

func (w *wired) configure(t *testing.T, h optim.Host, params map[string]any) error {
	t.Helper()
	cfg, err := wire.ConfigToProto(optim.Config{Params: params, Members: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.opt.Configure(context.Background(), &pb.ConfigureRequest{HostBrokerId: w.serveHost(h), Config: cfg})
	return err
}

func TestInfo(t *testing.T) {
	tests := []struct {
		name      string
		newOpt    func() optim.Optimizer
		predictor bool
		stateful  bool
		finalizer bool
	}{
		{"toy", protocoltest.New, true, true, true},
		{"plain", protocoltest.NewPlain, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := wireUp(t, tt.newOpt)
			resp, err := w.opt.Info(context.Background(), &pb.InfoRequest{})
			if err != nil {
				t.Fatal(err)
			}
			info, err := wire.InfoFromProto(resp.GetInfo())
			if err != nil || info.Name != tt.name {
				t.Fatalf("Info = %+v, %v", info, err)
			}
			if resp.GetPredictor() != tt.predictor || resp.GetStateful() != tt.stateful {
				t.Fatalf("predictor, stateful = %v, %v; want %v, %v", resp.GetPredictor(), resp.GetStateful(), tt.predictor, tt.stateful)
			}
			if resp.GetFinalizer() != tt.finalizer {
				t.Fatalf("finalizer = %v, want %v", resp.GetFinalizer(), tt.finalizer)
			}
		})
	}
}

func TestStepThroughHost(t *testing.T) {
	w := wireUp(t, protocoltest.New)
	host := protocoltest.NewFakeHost(100)
	if err := w.configure(t, host, nil); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := w.opt.Step(ctx, &pb.StepRequest{Input: &pb.StepInput{Step: 0, Lr: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	// The fake host's problem is ½‖θ‖² from θ = 1 (100 parameters): loss
	// 50, ‖∇‖ = 10, and a quadratic has no accuracy.
	if got := resp.GetOutput().GetMetrics(); got["loss"] != 50 || got["gnorm"] != 10 || !math.IsNaN(got["acc"]) || len(got) != 3 {
		t.Fatalf("metrics = %v", got)
	}
	if n := len(host.Programs()); n != 3 {
		t.Fatalf("host saw %d programs, want 3", n)
	}
	// The Step deadline reached the host through the plugin.
	for i, left := range host.Deadlines()[1:] {
		if left <= 0 || left > 30*time.Second {
			t.Errorf("Exec %d had %v left, want the Step deadline", i+1, left)
		}
	}
}

// caller is protocoltest's optimizer whose Step also sends an Exec with a
// context of its own, from a goroutine it waits for.
type caller struct {
	optim.Optimizer
	h optim.Host
}

func (c *caller) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	c.h = h
	return c.Optimizer.Configure(ctx, h, cfg)
}

func (c *caller) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	out, err := c.Optimizer.Step(ctx, in)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p := optim.Prog()
		p.Norm(optim.Params)
		_, _ = c.h.Exec(context.Background(), p)
	}()
	<-done
	return out, err
}

// Each Exec names the host's call whose context it was sent with (the
// call id of that call's metadata, protocol minor 11), so the host can
// refuse one that outlived its call; one sent with a context that
// derives from no call names none (hardening4/08).
func TestExecNamesItsCall(t *testing.T) {
	w := wireUp(t, func() optim.Optimizer { return &caller{Optimizer: protocoltest.New()} })
	host := protocoltest.NewFakeHost(10)
	cfg, err := wire.ConfigToProto(optim.Config{Members: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), wire.CallIDKey, "41")
	if _, err := w.opt.Configure(ctx, &pb.ConfigureRequest{HostBrokerId: w.serveHost(host), Config: cfg}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	ctx = metadata.AppendToOutgoingContext(context.Background(), wire.CallIDKey, "42")
	if _, err := w.opt.Step(ctx, &pb.StepRequest{Input: &pb.StepInput{Lr: 0.1}}); err != nil {
		t.Fatalf("Step: %v", err)
	}
	if _, err := w.opt.Step(context.Background(), &pb.StepRequest{Input: &pb.StepInput{Lr: 0.1}}); err != nil {
		t.Fatalf("Step of a host without call ids: %v", err)
	}
	if got, want := w.host.callIDs(), []string{"41", "42", "42", "", "", "", ""}; !slices.Equal(got, want) {
		t.Errorf("call ids of the Execs = %q, want %q", got, want)
	}
}

// TestFinalizeThroughHost: Finalize reaches the optimizer, whose program
// reaches the host.
func TestFinalizeThroughHost(t *testing.T) {
	w := wireUp(t, protocoltest.New)
	host := protocoltest.NewFakeHost(4)
	if err := w.configure(t, host, nil); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	if _, err := w.opt.Finalize(context.Background(), &pb.FinalizeRequest{}); err != nil {
		t.Fatal(err)
	}
	ps := host.Programs()
	last := ps[len(ps)-1]
	if len(last.Ops) != 1 || last.Ops[0] != (optim.UpdateBN{X: optim.Params}) {
		t.Fatalf("last program = %v, want one UpdateBN of the live parameters", last.Ops)
	}
	if n := host.Stats(0).BNRecomputed; n != 1 {
		t.Fatalf("BNRecomputed = %d, want 1", n)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name   string
		newOpt func() optim.Optimizer
		call   func(*testing.T, *wired) error
		code   codes.Code
		want   string
	}{
		{
			"step before configure", protocoltest.New,
			func(t *testing.T, w *wired) error {
				_, err := w.opt.Step(context.Background(), &pb.StepRequest{})
				return err
			},
			codes.FailedPrecondition, "before Configure",
		},
		{
			"panic in step", protocoltest.New,
			func(t *testing.T, w *wired) error {
				if err := w.configure(t, protocoltest.NewFakeHost(1), map[string]any{"mode": protocoltest.ModePanic}); err != nil {
					t.Fatal(err)
				}
				_, err := w.opt.Step(context.Background(), &pb.StepRequest{Input: &pb.StepInput{Step: 3}})
				return err
			},
			codes.Internal, "panic in Step: toy optimizer exploded at step 3",
		},
		{
			"host error keeps its op index", protocoltest.New,
			func(t *testing.T, w *wired) error {
				return w.configure(t, &badLayoutHost{*protocoltest.NewFakeHost(1)}, nil)
			},
			codes.Unknown, "op 0 (Alloc): unknown vector handle 1",
		},
		{
			"predictive unimplemented", protocoltest.NewPlain,
			func(t *testing.T, w *wired) error {
				_, err := w.opt.Predictive(context.Background(), &pb.PredictiveRequest{})
				return err
			},
			codes.Unimplemented, `"predictive" feature`,
		},
		{
			"save state unimplemented", protocoltest.NewPlain,
			func(t *testing.T, w *wired) error {
				_, err := w.opt.SaveState(context.Background(), &pb.SaveStateRequest{})
				return err
			},
			codes.Unimplemented, `"state" feature`,
		},
		{
			"finalize unimplemented", protocoltest.NewPlain,
			func(t *testing.T, w *wired) error {
				_, err := w.opt.Finalize(context.Background(), &pb.FinalizeRequest{})
				return err
			},
			codes.Unimplemented, `"finalize" feature`,
		},
		{
			"load state unimplemented", protocoltest.NewPlain,
			func(t *testing.T, w *wired) error {
				_, err := w.opt.LoadState(context.Background(), &pb.LoadStateRequest{})
				return err
			},
			codes.Unimplemented, `"state" feature`,
		},
		{
			"invalid info", func() optim.Optimizer { return badInfo{protocoltest.New()} },
			func(t *testing.T, w *wired) error {
				_, err := w.opt.Info(context.Background(), &pb.InfoRequest{})
				return err
			},
			codes.Internal, `invalid Info: info of "bad": hyperparameter "x": unknown type "complex"`,
		},
		{
			"bad broker id", protocoltest.New,
			func(t *testing.T, w *wired) error {
				_, err := w.opt.Configure(context.Background(), &pb.ConfigureRequest{HostBrokerId: 9999})
				return err
			},
			codes.Unavailable, "dial host broker ID 9999",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := wireUp(t, tt.newOpt)
			err := tt.call(t, w)
			st := status.Convert(err)
			if st.Code() != tt.code || !strings.Contains(st.Message(), tt.want) {
				t.Fatalf("err = %v, want %v containing %q", err, tt.code, tt.want)
			}
		})
	}
}

// badLayoutHost fails the toy's Alloc program as if handle 1 were unknown.
type badLayoutHost struct{ protocoltest.FakeHost }

func (h *badLayoutHost) Exec(context.Context, *optim.Program) (optim.Result, error) {
	return optim.Result{}, &optim.OpError{Index: 0, Op: "Alloc", Err: errors.New("unknown vector handle 1")}
}

type badInfo struct{ optim.Optimizer }

func (b badInfo) Info() optim.Info {
	return optim.Info{Name: "bad", Params: []optim.ParamSpec{{Name: "x", Type: "complex"}}}
}

func TestHostErrorsReachTheOptimizer(t *testing.T) {
	// The op index and code of a host error survive host → plugin (as the
	// optimizer sees it) and plugin → host (as the Step error).
	w := wireUp(t, protocoltest.New)
	err := w.configure(t, &badLayoutHost{*protocoltest.NewFakeHost(1)}, nil)
	back := wire.FromStatus(err)
	var oe *optim.OpError
	if !errors.As(back, &oe) || oe.Index != 0 || !strings.Contains(back.Error(), "toy: alloc: op 0") {
		t.Fatalf("Configure error = %#v", back)
	}
}

func TestNilConstructor(t *testing.T) {
	set := PluginMap(func() optim.Optimizer { return nil })
	err := set[wire.PluginName].(goplugin.GRPCPlugin).GRPCServer(nil, grpc.NewServer())
	if err == nil || !strings.Contains(err.Error(), "nil optimizer") {
		t.Fatalf("GRPCServer with a nil optimizer: %v", err)
	}
	set = PluginMap(func() optim.Optimizer { panic("cannot build") })
	err = set[wire.PluginName].(goplugin.GRPCPlugin).GRPCServer(nil, grpc.NewServer())
	if err == nil || !strings.Contains(err.Error(), "panic in constructor: cannot build") {
		t.Fatalf("GRPCServer with a panicking constructor: %v", err)
	}
}

func TestGRPCServerLimits(t *testing.T) {
	lis, err := net.Listen("unix", filepath.Join(t.TempDir(), "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	s := NewGRPCServer(nil)
	srv := &server{opt: protocoltest.New(), log: hclog.NewNullLogger()}
	pb.RegisterOptimizerServer(s, srv)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient("unix://"+lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(wire.MaxMessageSize), grpc.MaxCallSendMsgSize(wire.MaxMessageSize)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := pb.NewOptimizerClient(conn)
	blob := bytes.Repeat([]byte{7}, 8<<20)
	if _, err := c.LoadState(context.Background(), &pb.LoadStateRequest{Blob: blob}); err != nil {
		t.Fatalf("LoadState(8 MiB): %v", err)
	}
	resp, err := c.SaveState(context.Background(), &pb.SaveStateRequest{})
	if err != nil || !bytes.Equal(resp.GetBlob(), blob) {
		t.Fatalf("SaveState: %d bytes, %v", len(resp.GetBlob()), err)
	}
}

func TestWatchParent(t *testing.T) {
	sockets := filepath.Join(t.TempDir(), "plugin-dir1")
	if err := os.Mkdir(sockets, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv(goplugin.EnvUnixSocketDir, sockets)
	var code atomic.Int32
	done := make(chan struct{})
	go watchParent(hclog.NewNullLogger(), -1, 0, time.Millisecond, func(c int) {
		code.Store(int32(c))
		close(done)
	})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("watchParent did not notice the parent change")
	}
	if code.Load() != 3 {
		t.Fatalf("exit code = %d, want 3", code.Load())
	}
	if _, err := os.Stat(sockets); !os.IsNotExist(err) {
		t.Fatalf("socket dir not removed: %v", err)
	}
}

// TestHostGone: with the host's PID given, the plugin watches that process,
// not its parent (a wrapper script between them outlives the host).
func TestHostGone(t *testing.T) {
	if gone, _ := hostGone(os.Getppid(), os.Getpid()); gone {
		t.Fatal("a live host counts as gone")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	// The parent is unchanged, but the named host process has exited.
	if gone, _ := hostGone(os.Getppid(), cmd.Process.Pid); !gone {
		t.Fatal("a dead host counts as alive")
	}
	if gone, _ := hostGone(os.Getppid(), 0); gone {
		t.Fatal("without a host PID, an unchanged parent counts as gone")
	}
}

func TestServeInProcessCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rc, stopped, err := ServeInProcess(ctx, protocoltest.New)
	if err != nil || rc == nil || rc.Protocol != goplugin.ProtocolGRPC || rc.ProtocolVersion != optim.ProtocolMajor {
		t.Fatalf("ServeInProcess = %+v, %v", rc, err)
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("in-process server did not stop")
	}
}

func TestTraceEnv(t *testing.T) {
	h := protocoltest.NewFakeHost(1)
	if traced(h) != optim.Host(h) {
		t.Error("traced without OPTLAB_TRACE")
	}
	t.Setenv(optim.TraceEnv, "1")
	if traced(h) == optim.Host(h) {
		t.Error("OPTLAB_TRACE=1 did not trace")
	}
}
