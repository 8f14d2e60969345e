package wire

import (
	"context"
	"strconv"

	"google.golang.org/grpc/metadata"
)

// CallIDKey is the gRPC metadata key that ties a plugin's Exec to one of
// the host's calls into the plugin (protocol minor 10, docs/PROTOCOL.md
// §3): the host sends every Optimizer call with a fresh id under it, and the
// plugin sends each Exec with the id of the call it is serving. The host
// refuses an Exec whose id is not that of a call in flight.
const CallIDKey = "optlab-call-id"

// WithOutgoingCall returns ctx with id as the call id of its outgoing
// calls, replacing any id ctx carried.
func WithOutgoingCall(ctx context.Context, id uint64) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	md.Set(CallIDKey, strconv.FormatUint(id, 10))
	return metadata.NewOutgoingContext(ctx, md)
}

// IncomingCall returns the call id that the call ctx serves carried: ok is
// false when it carried none. A value that is not a positive decimal number
// is returned as id 0 with ok true (it names no call).
func IncomingCall(ctx context.Context) (id uint64, ok bool) {
	vs := metadata.ValueFromIncomingContext(ctx, CallIDKey)
	if len(vs) == 0 {
		return 0, false
	}
	id, err := strconv.ParseUint(vs[0], 10, 64)
	if err != nil {
		return 0, true
	}
	return id, true
}
