// Package wire converts between the author-facing types of sdk/optim and
// the generated protobuf messages of internal/pluginpb, and holds the pieces
// of the plugin protocol that both sides share: the go-plugin handshake, the
// plugin-set key, the message size limit and the mapping of errors to gRPC
// status codes.
//
// Conversions to protobuf validate what the sender controls (hyperparameter
// types, nil and pointer ops, foreign registers); conversions from protobuf
// validate what a receiver must not trust (op kinds, fields and enum values
// from a newer protocol minor version). An op the receiver does not know
// yields an *Error with code Unimplemented and the failing op's index.
package wire

import (
	"github.com/hashicorp/go-plugin"

	"github.com/optlab/optlab/sdk/optim"
)

// PluginName is the key of the optimizer in the go-plugin plugin set, on
// both sides.
const PluginName = "optimizer"

// MaxMessageSize is the largest gRPC message either side accepts (256 MiB).
// Programs and results are small; the limit matters for state blobs.
const MaxMessageSize = 256 << 20

// Magic cookie of the go-plugin handshake. It is a UX check (a plugin run by
// hand says it is a plugin), not a security measure.
const (
	MagicCookieKey   = "OPTLAB_OPTIMIZER_PLUGIN"
	MagicCookieValue = "7b1c2f0e-optlab-optimizer"
)

// HostPIDEnv is the environment variable through which the host tells a
// plugin its process ID, so that the plugin exits when the host is gone
// even when it is not the host's direct child (a wrapper script that starts
// it without exec).
const HostPIDEnv = "OPTLAB_HOST_PID"

// Handshake returns the go-plugin handshake of the optlab protocol. Its
// ProtocolVersion is optim.ProtocolMajor.
func Handshake() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  optim.ProtocolMajor,
		MagicCookieKey:   MagicCookieKey,
		MagicCookieValue: MagicCookieValue,
	}
}
