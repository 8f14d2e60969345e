// Package protocol is the host's side of the optlab plugin protocol, in
// plain Go types: it dispenses a plugin's Optimizer service as a Conn whose
// methods take and return sdk/optim values, and serves an optim.Host back to
// the plugin over go-plugin's broker. The generated protobuf code and the
// conversions stay inside the SDK (sdk/internal), so a host never imports
// them; host/plugin adds process launch, deadlines and error reports on top.
//
// Plugin authors do not need this package: they use sdk/optim and sdk/serve.
package protocol

import (
	"strings"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
	"github.com/optlab/optlab/sdk/internal/wire"
	"github.com/optlab/optlab/sdk/optim"
)

// PluginName is the key of the optimizer in the go-plugin plugin set.
const PluginName = wire.PluginName

// MaxMessageSize is the largest gRPC message either side accepts.
const MaxMessageSize = wire.MaxMessageSize

// HostPIDEnv is the environment variable through which the host tells a
// plugin its process ID (the plugin exits when that process is gone).
const HostPIDEnv = wire.HostPIDEnv

// Handshake returns the go-plugin handshake of the optlab protocol.
func Handshake() plugin.HandshakeConfig { return wire.Handshake() }

// Code returns the gRPC code that err maps to (see sdk/internal/wire).
func Code(err error) codes.Code { return wire.Code(err) }

// IsOptimizerMethod reports whether a full gRPC method name belongs to the
// plugin's Optimizer service (host→plugin calls), for interceptors that
// count traffic.
func IsOptimizerMethod(method string) bool {
	return strings.HasPrefix(method, "/"+pb.Optimizer_ServiceDesc.ServiceName+"/")
}

// ProgramSize returns the encoded size of p in an Exec request, the bytes
// a program costs on the wire.
func ProgramSize(p *optim.Program) (int, error) {
	req, err := wire.ExecRequestToProto(p)
	if err != nil {
		return 0, err
	}
	return proto.Size(req), nil
}

// MessageSize returns the encoded size of a protocol message, or 0 for a
// value that is not one.
func MessageSize(m any) int64 {
	if pm, ok := m.(proto.Message); ok && pm != nil {
		return int64(proto.Size(pm))
	}
	return 0
}
