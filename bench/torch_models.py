#!/usr/bin/env python3
"""PyTorch definitions of optlab's model zoo (host/model/*.go).

Every architecture here has exactly the parameter and buffer names, shapes
and order of its Go counterpart, so a state dict written by optlab (one
tensor per name, e.g. a safetensors file) loads with
``model.load_state_dict(..., strict=True)``; optlab's checkpoints carry a
num_batches_tracked scalar per BatchNorm for that reason (the number of
passes that updated its statistics, as PyTorch counts them). Initialization
follows optlab's InitParams in distribution (not in draws): convolutions
Kaiming normal with the fan the Go code names, BatchNorm gamma=1 beta=0,
linear layers PyTorch's default unless optlab zero-initializes them.

Usage (Debian's PyTorch; the python3 on PATH may have no torch):

    /usr/bin/python3 bench/torch_models.py --count   # parameters, 10 and 100 classes
    /usr/bin/python3 bench/torch_models.py --check   # forward+backward of each arch
    /usr/bin/python3 bench/torch_models.py --compare CKPT --arch resnet10 --io IO
        # load an optlab checkpoint, run the eval-mode forward on the "input"
        # tensor of the safetensors file IO and print the largest difference
        # from its "logits" tensor (the host's logits)
    /usr/bin/python3 bench/torch_models.py --update-bn CKPT --arch cnn --io IO --batch 8
        # run torch.optim.swa_utils.update_bn over IO's "train" inputs at the
        # checkpoint's parameters and print the largest difference from the
        # BatchNorm statistics in CKPT (the host's UpdateBN), and from IO's
        # "probs" (the host's eval-mode probabilities on "input"), and count
        # the BatchNorms whose num_batches_tracked differs from CKPT's
    /usr/bin/python3 bench/torch_models.py --bn-passes START --after END --arch cnn --io IO
        # from the checkpoint START, pass IO's "batches" (K x N x C x H x W)
        # forward in train mode and compare the BatchNorm statistics and
        # num_batches_tracked with END's (the host's after the same passes)
    /usr/bin/python3 bench/torch_models.py --script OUT.pt --arch cnn \
        --classes 10 --in-shape 1,8,8 [--init CKPT]
        # save the architecture as TorchScript (torch.jit.script), with the
        # parameters of an optlab checkpoint when --init is given, for
        # model.archs = ["torchscript:OUT.pt"] (every arch but densenet121 and
        # efficientnet-b0, whose forward TorchScript cannot compile)

From Python: ``build(arch, classes=10, in_shape=(3, 32, 32))``,
``read_safetensors(path)`` and ``load_optlab(model, path)`` (no safetensors
package needed).
"""

import argparse
import json
import math
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- initialization ---------------------------------------------------------


def init_like_optlab(model, conv_fan="fan_in", conv_bias_zero=False, linear_zero=False):
    """Re-initializes model the way optlab's InitParams does.

    conv_fan: "fan_in" or "fan_out" for N(0, 2/fan) convolution weights.
    conv_bias_zero: zero convolution biases (else PyTorch's default).
    linear_zero: zero the linear layers' weights and biases (else default).
    """
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode=conv_fan, nonlinearity="relu")
            if m.bias is not None and conv_bias_zero:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            if linear_zero:
                nn.init.zeros_(m.weight)
                nn.init.zeros_(m.bias)
            else:
                m.reset_parameters()
    return model


def conv(cin, cout, k, stride=1, groups=1, bias=False):
    """A k x k convolution with 'same' padding for odd k."""
    return nn.Conv2d(cin, cout, k, stride=stride, padding=(k - 1) // 2, groups=groups, bias=bias)


def global_pool(x):
    """Global average pooling to (N, C)."""
    return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)


# ---- mlp, cnn (host/model/small.go) -------------------------------------------


class MLP(nn.Module):
    """Two hidden layers of 256 ReLU units on the flattened input."""

    def __init__(self, in_features, classes):
        super().__init__()
        self.fc1 = nn.Linear(in_features, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, classes)

    def forward(self, x):
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class ConvBN(nn.Module):
    """conv then BN, named conv and bn."""

    def __init__(self, cin, cout, k, stride=1, groups=1):
        super().__init__()
        self.conv = conv(cin, cout, k, stride, groups)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return self.bn(self.conv(x))


class CNN(nn.Module):
    """Three conv3x3-BN-ReLU blocks (32/64/128; cnn-small 16/32/64),
    max-pool after the first two."""

    def __init__(self, classes, cin=3, widths=(32, 64, 128)):
        super().__init__()
        widths = list(widths)
        self.features = nn.ModuleList(ConvBN(c, w, 3) for c, w in zip([cin] + widths, widths))
        self.fc = nn.Linear(widths[-1], classes)
        init_like_optlab(self, "fan_in")

    def forward(self, x):
        for i, blk in enumerate(self.features):
            x = F.relu(blk(x))
            if i < 2:
                x = F.max_pool2d(x, 2, 2)
        return self.fc(global_pool(x))


class LeNet5(nn.Module):
    """LeNet-5 with ReLU and max-pooling (host/model/small.go NewLeNet5):
    conv 5x5 to 6 (padding 2), pool, conv 5x5 to 16, pool, 120-84-classes;
    PyTorch's default initialization."""

    def __init__(self, classes, in_shape):
        super().__init__()
        side = lambda s: (s // 2 - 4) // 2  # noqa: E731
        self.conv1 = nn.Conv2d(in_shape[0], 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * side(in_shape[1]) * side(in_shape[2]), 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


# ---- resnet10/18 (host/model/resnet.go) ----------------------------------------


class BasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN plus (projected) input, then ReLU."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = conv(cin, cout, 3, stride)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = conv(cout, cout, 3)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(conv(cin, cout, 1, stride), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """kuangliu's CIFAR ResNet: 3x3 stem, stages 64/128/256/512."""

    def __init__(self, blocks, classes, cin=3):
        super().__init__()
        self.conv1 = conv(cin, 64, 3)
        self.bn1 = nn.BatchNorm2d(64)
        c = 64
        for stage, nb in enumerate(blocks):
            planes = 64 << stage
            layers = []
            for i in range(nb):
                layers.append(BasicBlock(c, planes, 2 if i == 0 and stage > 0 else 1))
                c = planes
            setattr(self, "layer%d" % (stage + 1), nn.Sequential(*layers))
        self.nstages = len(blocks)
        self.linear = nn.Linear(c, classes)
        init_like_optlab(self, "fan_in")

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))  # TorchScript: no getattr by a computed name
        return self.linear(global_pool(x))


# ---- wrn28-10, wrn28-10-ref (host/model/wrn.go) --------------------------------


class WRNUnit(nn.Module):
    """Pre-activation unit; the 1x1 shortcut sees the pre-activated input."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = conv(cin, cout, 3, stride)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = conv(cout, cout, 3)
        self.shortcut = conv(cin, cout, 1, stride) if cin != cout or stride != 1 else None

    def forward(self, x):
        a = F.relu(self.bn1(x))
        out = self.conv2(F.relu(self.bn2(self.conv1(a))))
        return out + (self.shortcut(a) if self.shortcut is not None else x)


class WRNStage(nn.Module):
    """Holds the units as .layer (names blockN.layer.i)."""

    def __init__(self, units):
        super().__init__()
        self.layer = nn.Sequential(*units)

    def forward(self, x):
        return self.layer(x)


class WRN(nn.Module):
    """Wide ResNet; ref adds one unit per stage and zero-inits fc (see wrn.go)."""

    def __init__(self, depth, k, ref, classes, cin=3):
        super().__init__()
        per = (depth - 4) // 6 + (1 if ref else 0)
        widths = [16, 16 * k, 32 * k, 64 * k]
        self.conv1 = conv(cin, widths[0], 3)
        c = widths[0]
        for stage in range(3):
            units = []
            for i in range(per):
                units.append(WRNUnit(c, widths[stage + 1], 2 if i == 0 and stage > 0 else 1))
                c = widths[stage + 1]
            setattr(self, "block%d" % (stage + 1), WRNStage(units))
        self.bn = nn.BatchNorm2d(c)
        self.fc = nn.Linear(c, classes)
        init_like_optlab(self, "fan_in", linear_zero=ref)

    def forward(self, x):
        x = self.block3(self.block2(self.block1(self.conv1(x))))
        return self.fc(global_pool(F.relu(self.bn(x))))


# ---- pyramidnet101 (host/model/pyramidnet.go) ----------------------------------


class PyramidBottleneck(nn.Module):
    """BN-conv1x1-BN-ReLU-conv3x3-BN-ReLU-conv1x1(4x)-BN plus zero-padded input."""

    def __init__(self, cin, planes, stride):
        super().__init__()
        self.stride = stride
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = conv(cin, planes, 1)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = conv(planes, planes, 3, stride)
        self.bn3 = nn.BatchNorm2d(planes)
        self.conv3 = conv(planes, 4 * planes, 1)
        self.bn4 = nn.BatchNorm2d(4 * planes)

    def forward(self, x):
        out = self.conv1(self.bn1(x))
        out = self.conv2(F.relu(self.bn2(out)))
        out = self.bn4(self.conv3(F.relu(self.bn3(out))))
        short = F.avg_pool2d(x, 2, 2, ceil_mode=True) if self.stride != 1 else x
        extra = out.shape[1] - short.shape[1]
        if extra > 0:
            short = F.pad(short, (0, 0, 0, 0, 0, extra))
        return out + short


class PyramidNet(nn.Module):
    """dyhan's CIFAR PyramidNet with bottlenecks (depth 9n+2), no ShakeDrop."""

    def __init__(self, depth, alpha, classes, cin=3):
        super().__init__()
        n = (depth - 2) // 9
        add = alpha / (3 * n)
        self.conv1 = conv(cin, 16, 3)
        self.bn1 = nn.BatchNorm2d(16)
        width, c = 16.0, 16
        for stage in range(3):
            units = []
            for i in range(n):
                width += add
                planes = int(round(width))  # half to even, as the reference
                units.append(PyramidBottleneck(c, planes, 2 if i == 0 and stage > 0 else 1))
                c = 4 * planes
            setattr(self, "layer%d" % (stage + 1), nn.Sequential(*units))
        self.bn_final = nn.BatchNorm2d(c)
        self.fc = nn.Linear(c, classes)
        init_like_optlab(self, "fan_out")

    def forward(self, x):
        x = self.bn1(self.conv1(x))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(global_pool(F.relu(self.bn_final(x))))


# ---- densenet121 (host/model/densenet.go) --------------------------------------


class DenseLayer(nn.Module):
    """BN-ReLU-conv1x1(4g)-BN-ReLU-conv3x3(g); new channels first."""

    def __init__(self, cin, growth):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = conv(cin, 4 * growth, 1)
        self.bn2 = nn.BatchNorm2d(4 * growth)
        self.conv2 = conv(4 * growth, growth, 3)

    def forward(self, x):
        out = self.conv1(F.relu(self.bn1(x)))
        out = self.conv2(F.relu(self.bn2(out)))
        return torch.cat([out, x], 1)


class Transition(nn.Module):
    """BN-ReLU-conv1x1 then 2x2 average pooling."""

    def __init__(self, cin, cout):
        super().__init__()
        self.bn = nn.BatchNorm2d(cin)
        self.conv = conv(cin, cout, 1)

    def forward(self, x):
        return F.avg_pool2d(self.conv(F.relu(self.bn(x))), 2)


class DenseNet(nn.Module):
    """kuangliu's CIFAR DenseNet-BC (3x3 stem with 2g channels)."""

    def __init__(self, blocks, growth, reduction, classes, cin=3):
        super().__init__()
        self.nstages = len(blocks)
        c = 2 * growth
        self.conv1 = conv(cin, c, 3)
        for stage, nb in enumerate(blocks):
            layers = []
            for _ in range(nb):
                layers.append(DenseLayer(c, growth))
                c += growth
            setattr(self, "dense%d" % (stage + 1), nn.Sequential(*layers))
            if stage < len(blocks) - 1:
                out = int(math.floor(c * reduction))
                setattr(self, "trans%d" % (stage + 1), Transition(c, out))
                c = out
        self.bn = nn.BatchNorm2d(c)
        self.linear = nn.Linear(c, classes)
        init_like_optlab(self, "fan_in")

    def forward(self, x):
        x = self.conv1(x)
        for stage in range(self.nstages):
            x = getattr(self, "dense%d" % (stage + 1))(x)
            if stage < self.nstages - 1:
                x = getattr(self, "trans%d" % (stage + 1))(x)
        return self.linear(global_pool(F.relu(self.bn(x))))


# ---- mobilenet (MobileNetV2; host/model/mobilenet.go) --------------------------


class InvertedResidual(nn.Module):
    """Expand-depthwise-project with ReLU; residual only at stride 1."""

    def __init__(self, cin, cout, expansion, stride):
        super().__init__()
        self.stride = stride
        planes = expansion * cin
        self.conv1 = conv(cin, planes, 1)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv(planes, planes, 3, stride, groups=planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv(planes, cout, 1)
        self.bn3 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride == 1 and cin != cout:
            self.shortcut = nn.Sequential(conv(cin, cout, 1), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return out + self.shortcut(x) if self.stride == 1 else out


class MobileNetV2(nn.Module):
    """kuangliu's CIFAR MobileNetV2 (stride 1 stem and second stage)."""

    # (expansion, out channels, blocks, stride)
    cfg = [(1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2),
           (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, classes, cin=3):
        super().__init__()
        self.conv1 = conv(cin, 32, 3)
        self.bn1 = nn.BatchNorm2d(32)
        layers, c = [], 32
        for expansion, out, nb, stride in self.cfg:
            for i in range(nb):
                layers.append(InvertedResidual(c, out, expansion, stride if i == 0 else 1))
                c = out
        self.layers = nn.Sequential(*layers)
        self.conv2 = conv(c, 1280, 1)
        self.bn2 = nn.BatchNorm2d(1280)
        self.linear = nn.Linear(1280, classes)
        init_like_optlab(self, "fan_out")

    def forward(self, x):
        x = self.layers(F.relu(self.bn1(self.conv1(x))))
        return self.linear(global_pool(F.relu(self.bn2(self.conv2(x)))))


# ---- efficientnet-b0 (host/model/efficientnet.go) ------------------------------


class SE(nn.Module):
    """Squeeze-excitation gate with swish, convolutions named se1 and se2."""

    def __init__(self, channels, squeezed):
        super().__init__()
        self.se1 = nn.Conv2d(channels, squeezed, 1)
        self.se2 = nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        w = F.silu(self.se1(F.adaptive_avg_pool2d(x, 1)))
        return x * torch.sigmoid(self.se2(w))


class MBConv(nn.Module):
    """[conv1x1-BN-swish] depthwise-BN-swish SE conv1x1-BN [+ input]."""

    def __init__(self, cin, cout, k, stride, expansion):
        super().__init__()
        planes = expansion * cin
        if expansion != 1:  # kuangliu registers these unused when expansion == 1
            self.conv1 = conv(cin, planes, 1)
            self.bn1 = nn.BatchNorm2d(planes)
        self.expand = expansion != 1
        self.conv2 = conv(planes, planes, k, stride, groups=planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.se = SE(planes, cin // 4)
        self.conv3 = conv(planes, cout, 1)
        self.bn3 = nn.BatchNorm2d(cout)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        out = F.silu(self.bn1(self.conv1(x))) if self.expand else x
        out = self.se(F.silu(self.bn2(self.conv2(out))))
        out = self.bn3(self.conv3(out))
        return out + x if self.residual else out


class EfficientNetB0(nn.Module):
    """kuangliu's CIFAR EfficientNet-B0, without drop-connect and dropout."""

    # (expansion, out channels, blocks, kernel, stride)
    cfg = [(1, 16, 1, 3, 1), (6, 24, 2, 3, 2), (6, 40, 2, 5, 2), (6, 80, 3, 3, 2),
           (6, 112, 3, 5, 1), (6, 192, 4, 5, 2), (6, 320, 1, 3, 1)]

    def __init__(self, classes, cin=3):
        super().__init__()
        self.conv1 = conv(cin, 32, 3)
        self.bn1 = nn.BatchNorm2d(32)
        layers, c = [], 32
        for expansion, out, nb, k, stride in self.cfg:
            for i in range(nb):
                layers.append(MBConv(c, out, k, stride if i == 0 else 1, expansion))
                c = out
        self.layers = nn.Sequential(*layers)
        self.linear = nn.Linear(c, classes)
        init_like_optlab(self, "fan_out", conv_bias_zero=True)

    def forward(self, x):
        x = self.layers(F.silu(self.bn1(self.conv1(x))))
        return self.linear(global_pool(x))


# ---- registry ------------------------------------------------------------------

ZOO = {
    "mlp": lambda c, s: MLP(math.prod(s), c),
    "cnn": lambda c, s: CNN(c, s[0]),
    "cnn-small": lambda c, s: CNN(c, s[0], widths=(16, 32, 64)),
    "lenet5": LeNet5,
    "resnet10": lambda c, s: ResNet([1, 1, 1, 1], c, s[0]),
    "resnet18": lambda c, s: ResNet([2, 2, 2, 2], c, s[0]),
    "wrn28-10": lambda c, s: WRN(28, 10, False, c, s[0]),
    "wrn28-10-ref": lambda c, s: WRN(28, 10, True, c, s[0]),
    "pyramidnet101": lambda c, s: PyramidNet(101, 64, c, s[0]),
    "densenet121": lambda c, s: DenseNet([6, 12, 24, 16], 32, 0.5, c, s[0]),
    "mobilenet": lambda c, s: MobileNetV2(c, s[0]),
    "efficientnet-b0": lambda c, s: EfficientNetB0(c, s[0]),
}


def build(arch, classes=10, in_shape=(3, 32, 32)):
    """Returns optlab's architecture arch as a torch.nn.Module."""
    if arch not in ZOO:
        raise KeyError("unknown model %r (known: %s)" % (arch, ", ".join(sorted(ZOO))))
    return ZOO[arch](classes, tuple(in_shape))


SAFETENSORS_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


def read_safetensors(path):
    """Reads a safetensors file without the safetensors package.

    Returns (tensors, metadata): a dict of name -> tensor (CPU, owning its
    memory) and the header's "__metadata__" dict (empty when absent).
    """
    if sys.byteorder != "little":
        raise RuntimeError("read_safetensors assumes a little-endian machine")
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("%s: truncated (%d bytes)" % (path, len(data)))
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError("%s: header of %d bytes but the file has %d" % (path, n, len(data)))
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", None) or {}
    body = memoryview(data)[8 + n:]
    tensors = {}
    for name, e in header.items():
        dtype = SAFETENSORS_DTYPES.get(e["dtype"])
        if dtype is None:
            raise ValueError("%s: tensor %r has unsupported dtype %s" % (path, name, e["dtype"]))
        begin, end = e["data_offsets"]
        shape = e["shape"]
        if end > len(body) or begin > end:
            raise ValueError("%s: tensor %r: data_offsets [%d, %d] outside %d data bytes" % (path, name, begin, end, len(body)))
        if math.prod(shape) == 0:
            tensors[name] = torch.empty(shape, dtype=dtype)
            continue
        flat = torch.frombuffer(bytearray(body[begin:end]), dtype=dtype)
        if flat.numel() != math.prod(shape):
            raise ValueError("%s: tensor %r: %d bytes for shape %s" % (path, name, end - begin, shape))
        tensors[name] = flat.reshape(shape)
    return tensors, meta


def load_optlab(model, path, prefix=""):
    """Loads an optlab safetensors checkpoint into model (strict).

    prefix selects one member of a checkpoint of several ("members.<m>.").
    """
    tensors, _ = read_safetensors(path)
    if prefix:
        tensors = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
    return model.load_state_dict(tensors, strict=True)


def compare(ckpt, arch, io_path, prefix=""):
    """Eval-mode logits of the checkpoint on io_path's "input" vs its "logits".

    Returns (max abs difference, max abs logit).
    """
    io, _ = read_safetensors(io_path)
    x, want = io["input"].float(), io["logits"].double()
    model = build(arch, want.shape[1], tuple(x.shape[1:]))
    load_optlab(model, ckpt, prefix)
    model.eval()
    with torch.no_grad():
        got = model(x).double()
    if got.shape != want.shape:
        raise ValueError("logits of shape %s, the host's are %s" % (tuple(got.shape), tuple(want.shape)))
    return float((got - want).abs().max()), float(want.abs().max())


def update_bn_compare(ckpt, arch, io_path, batch):
    """torch.optim.swa_utils.update_bn at the checkpoint's parameters vs the
    host's UpdateBN.

    The checkpoint holds parameters and the BatchNorm statistics the host's
    UpdateBN computed over io_path's "train" inputs in batches of batch, in
    order; io_path's "input" and "probs" are a batch and the host's
    eval-mode probabilities there. Returns (max abs difference of the
    statistics, max abs statistic, max abs difference of the probabilities,
    number of BatchNorms whose num_batches_tracked after update_bn differs
    from the checkpoint's).
    """
    io, _ = read_safetensors(io_path)
    train, x, want = io["train"].float(), io["input"].float(), io["probs"].double()
    model = build(arch, want.shape[1], tuple(x.shape[1:]))
    load_optlab(model, ckpt)
    host = {k: v.clone() for k, v in model.state_dict().items() if k.endswith(("running_mean", "running_var"))}
    loader = torch.utils.data.DataLoader(train, batch_size=batch, shuffle=False)
    with torch.no_grad():
        torch.optim.swa_utils.update_bn(loader, model)
    mine = model.state_dict()
    diff = max(float((mine[k].double() - v.double()).abs().max()) for k, v in host.items())
    scale = max(float(v.abs().max()) for v in host.values())
    mismatches = tracked_mismatches(model, read_safetensors(ckpt)[0])
    model.eval()
    with torch.no_grad():
        probs = torch.softmax(model(x), dim=1).double()
    return diff, scale, float((probs - want).abs().max()), mismatches


def tracked_mismatches(model, ckpt_tensors):
    """Number of BatchNorms whose num_batches_tracked in model differs from
    the one in ckpt_tensors (a state dict read from an optlab file)."""
    return sum(1 for k, v in model.state_dict().items()
               if k.endswith("num_batches_tracked") and int(v) != int(ckpt_tensors[k]))


def bn_passes_compare(start, end, arch, io_path):
    """Train-mode forward passes from the start checkpoint vs the host's.

    start is an optlab checkpoint; io_path's "batches" (K x N x C x H x W)
    are the batches the host passed forward in train mode from it, updating
    the BatchNorm running statistics, before it saved end. The twin loads
    start (its num_batches_tracked included), passes the same batches
    forward in train mode and compares its statistics and
    num_batches_tracked with end's. Returns (max abs difference of the
    statistics, max abs statistic, number of BatchNorms whose
    num_batches_tracked differs, the twin's first num_batches_tracked).
    """
    io, _ = read_safetensors(io_path)
    batches = io["batches"].float()
    model = build(arch, 10, tuple(batches.shape[2:]))
    load_optlab(model, start)
    model.train()
    with torch.no_grad():
        for x in batches:
            model(x)
    host, _ = read_safetensors(end)
    mine = model.state_dict()
    stats = [k for k in mine if k.endswith(("running_mean", "running_var"))]
    diff = max(float((mine[k].double() - host[k].double()).abs().max()) for k in stats)
    scale = max(float(host[k].abs().max()) for k in stats)
    first = next(int(v) for k, v in mine.items() if k.endswith("num_batches_tracked"))
    return diff, scale, tracked_mismatches(model, host), first


def count(model):
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters())


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", action="store_true", help="print parameter counts for 10 and 100 classes")
    ap.add_argument("--check", action="store_true", help="forward+backward on 2x3x32x32 and 2x3x16x16")
    ap.add_argument("--compare", metavar="CKPT", help="optlab checkpoint (safetensors) to compare with the host's logits")
    ap.add_argument("--arch", help="architecture of the --compare checkpoint")
    ap.add_argument("--io", metavar="FILE", help="safetensors file with the \"input\" batch and the host's \"logits\"")
    ap.add_argument("--prefix", default="", help="names' prefix of one member in CKPT, e.g. members.0.")
    ap.add_argument("--update-bn", metavar="CKPT", help="optlab checkpoint whose BatchNorm statistics the host's "
                    "UpdateBN computed, to compare with torch.optim.swa_utils.update_bn (needs --arch, --io, --batch)")
    ap.add_argument("--batch", type=int, default=0, help="batch size of --update-bn's pass")
    ap.add_argument("--bn-passes", metavar="CKPT", help="optlab checkpoint from which the host passed --io's \"batches\" "
                    "forward in train mode before it saved --after: compare the BatchNorm statistics and "
                    "num_batches_tracked (needs --arch, --io, --after)")
    ap.add_argument("--after", metavar="CKPT", help="the host's checkpoint after --bn-passes' batches")
    ap.add_argument("--script", metavar="OUT", help="save --arch as TorchScript to OUT (torch.jit.script)")
    ap.add_argument("--classes", type=int, default=10, help="classes of --script's model")
    ap.add_argument("--in-shape", default="3,32,32", help="per-sample input shape of --script's model, e.g. 1,28,28")
    ap.add_argument("--init", metavar="CKPT", help="optlab checkpoint whose parameters --script's model starts from")
    ap.add_argument("--bn-momentum", type=float, default=0.1, help="momentum of --script's BatchNorms (PyTorch's default 0.1)")
    ap.add_argument("archs", nargs="*", help="architectures (default: all)")
    args = ap.parse_args(argv)
    archs = args.archs or list(ZOO)
    if args.compare:
        if not (args.arch and args.io):
            ap.error("--compare needs --arch and --io")
        diff, scale = compare(args.compare, args.arch, args.io, args.prefix)
        print("max_abs_diff %.9g max_abs_logit %.9g" % (diff, scale))
        return 0
    if args.update_bn:
        if not (args.arch and args.io and args.batch > 0):
            ap.error("--update-bn needs --arch, --io and --batch")
        diff, scale, pdiff, mism = update_bn_compare(args.update_bn, args.arch, args.io, args.batch)
        print("max_abs_diff %.9g max_abs_stat %.9g max_abs_prob_diff %.9g tracked_mismatches %d" % (diff, scale, pdiff, mism))
        return 0
    if args.bn_passes:
        if not (args.arch and args.io and args.after):
            ap.error("--bn-passes needs --arch, --io and --after")
        diff, scale, mism, first = bn_passes_compare(args.bn_passes, args.after, args.arch, args.io)
        print("max_abs_diff %.9g max_abs_stat %.9g tracked_mismatches %d tracked %d" % (diff, scale, mism, first))
        return 0
    if args.script:
        if not args.arch:
            ap.error("--script needs --arch")
        model = build(args.arch, args.classes, tuple(int(d) for d in args.in_shape.split(",")))
        if args.init:
            load_optlab(model, args.init)
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.momentum = args.bn_momentum
        torch.jit.script(model).save(args.script)
        return 0
    if not (args.count or args.check):
        ap.error("nothing to do: give --count, --check, --compare, --update-bn, --bn-passes or --script")
    if args.count:
        print("%-16s %14s %14s" % ("arch", "10 classes", "100 classes"))
        for arch in archs:
            print("%-16s %14s %14s" % (arch, "{:,}".format(count(build(arch, 10))),
                                       "{:,}".format(count(build(arch, 100)))))
    if args.check:
        torch.manual_seed(0)
        for arch in archs:
            for side in (32, 16):
                m = build(arch, 10, (3, side, side)).train()
                x = torch.randn(2, 3, side, side)
                loss = F.cross_entropy(m(x), torch.tensor([3, 7]))
                loss.backward()
                g = math.sqrt(sum(float(p.grad.square().sum()) for p in m.parameters() if p.grad is not None))
                print("%-16s %2dx%-2d loss %.4f grad norm %.4f" % (arch, side, side, loss.item(), g))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
