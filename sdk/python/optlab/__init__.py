"""optlab: write optlab optimizer plugins in Python.

The Python twin of the Go SDK (sdk/optim, sdk/hparams, sdk/serve): an
optimizer sends the host short programs of ops over vector handles and
registers, and reads back only the registers it asks for; the host
(libtorch) does all tensor math. A plugin is a
script:

    import optlab

    class SGD(optlab.Optimizer):
        def info(self):
            return optlab.Info(name="sgd-py", version="0.1.0", features=optlab.Features(members=True, base_step=True))

        def configure(self, host, config):
            self.host, self.hs = host, config.namespace("sgd")
            self.g = self.hs.per_member("g", config.members)
            p = self.hs.prog()
            for m, g in enumerate(self.g):
                p.alloc(g, m)
            host.exec(p)

        def step(self, inp):
            p = self.hs.prog()
            evs = []
            for m, g in enumerate(self.g):
                evs.append(p.grad(g, optlab.params_of(m)))
                p.base_step(optlab.params_of(m), g)
            p.report_metrics(*p.mean(evs))  # the step's metrics, from the device
            self.host.exec(p)
            return {}

    if __name__ == "__main__":
        optlab.serve(SGD)

See docs/PLUGINS.md, "Writing a plugin in Python", and
examples/python-sam/sam.py.
"""

from .errors import Code, Error, OpError, VecError, name_handles, wrap_errors
from .hparams import apply, param, specs
from .optimizer import (BOOL, FEATURES, FLOAT, INT, PROTOCOL_MAJOR, PROTOCOL_MINOR, STRING, Config, Features, Host,
                        Info, Layout, Matrix, MemberLayout, Optimizer, ParamSpec, Predictive, PredictiveKind,
                        StepInput, Tensor, Tile, VecLayout, features_of)
from .program import *  # noqa: F401,F403 - the op set and the builder
from .program import __all__ as _program_all
from .serve import serve
from .trace import Trace

__version__ = "0.1.0"

__all__ = [
    "Code", "Error", "OpError", "VecError", "name_handles", "wrap_errors", "apply", "param", "specs",
    "BOOL", "FEATURES", "Features", "features_of", "FLOAT", "INT", "PROTOCOL_MAJOR",
    "PROTOCOL_MINOR", "STRING", "Config", "Host", "Info", "Layout", "MemberLayout", "Optimizer", "ParamSpec",
    "Predictive", "PredictiveKind", "StepInput", "Tensor", "Matrix", "Tile", "VecLayout", "serve", "Trace",
] + list(_program_all)
