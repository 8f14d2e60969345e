// Package pluginpb holds the Go code generated from
// proto/optlab/plugin/v1/plugin.proto: the messages and the Optimizer and
// Host gRPC services of the optlab plugin protocol. Plugin authors never
// import it; they use sdk/optim, and sdk/internal/wire converts between the two.
//
// Regenerate with `go generate ./internal/pluginpb` in sdk/ (needs protoc,
// protoc-gen-go and protoc-gen-go-grpc on PATH).
package pluginpb

//go:generate protoc -I ../../proto --go_out=. --go_opt=module=github.com/optlab/optlab/sdk/internal/pluginpb --go-grpc_out=. --go-grpc_opt=module=github.com/optlab/optlab/sdk/internal/pluginpb optlab/plugin/v1/plugin.proto
