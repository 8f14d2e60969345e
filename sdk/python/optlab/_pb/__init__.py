"""Generated protobuf code (`make proto-python`); do not edit.

plugin_pb2 is sdk/proto/optlab/plugin/v1/plugin.proto, runtime_pb2 is
sdk/python/proto/optlab/python/v1/runtime.proto."""
