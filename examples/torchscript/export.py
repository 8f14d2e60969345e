#!/usr/bin/env python3
"""Your own model and data in optlab: a torchvision-style ResNet as a
TorchScript file and the UCI digits as NumPy arrays.

    /usr/bin/python3 examples/torchscript/export.py --out examples/torchscript/out
    bin/host run experiments/torchscript-resnet.toml

writes OUT/resnet.pt (torch.jit.script(model).save) and OUT/digits.npz
(np.savez with x_train, y_train, x_test, y_test), which the experiment
names as model.archs = ["torchscript:…/resnet.pt"] and data.path. The two
lines that matter for your own network and data are the last two of
export().

    /usr/bin/python3 examples/torchscript/export.py --check CKPT --out OUT

loads an optlab checkpoint of the model (checkpoints/<run>.safetensors)
into the PyTorch module with load_state_dict(strict=True) and prints its
test accuracy on OUT/digits.npz (eval mode), to compare with the run's.

The ResNet has torchvision's module names and structure (conv1, bn1,
layer1…layer4 of BasicBlocks with a conv/BN "downsample", fc), with the
usual small-image stem (a 3×3 convolution and no max-pool) and a width
option; the digits are 8×8 images with values 0…16, scaled to [0, 1].
"""

import argparse
import gzip
import os
import sys

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
DIGITS = os.path.join(HERE, "..", "..", "data", "uci-digits", "digits.csv.gz")


def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(cin, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, layers=(2, 2, 2, 2), classes=10, in_channels=3, width=64):
        super().__init__()
        self.inplanes = width
        self.conv1 = conv3x3(in_channels, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(width, layers[0])
        self.layer2 = self._make_layer(2 * width, layers[1], stride=2)
        self.layer3 = self._make_layer(4 * width, layers[2], stride=2)
        self.layer4 = self._make_layer(8 * width, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8 * width, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def digits(test_every=5):
    """The UCI digits as (x_train, y_train, x_test, y_test): float32 images
    1×8×8 in [0, 1]; every test_every-th sample is a test sample."""
    with gzip.open(DIGITS, "rt") as f:
        rows = np.loadtxt(f, delimiter=",", dtype=np.int64)
    x = (rows[:, :64].astype(np.float32) / 16).reshape(-1, 1, 8, 8)
    y = rows[:, 64]
    test = np.arange(len(y)) % test_every == 0
    return x[~test], y[~test], x[test], y[test]


def build(args):
    return ResNet(tuple(int(b) for b in args.blocks.split(",")), 10, 1, args.width)


def export(args):
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    model = build(args)
    x_train, y_train, x_test, y_test = digits()
    torch.jit.script(model).save(os.path.join(args.out, "resnet.pt"))
    np.savez(os.path.join(args.out, "digits.npz"), x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)


def check(args):
    sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
    from torch_models import load_optlab  # reads safetensors without the package

    model = build(args)
    load_optlab(model, args.check)
    model.eval()
    data = np.load(os.path.join(args.out, "digits.npz"))
    with torch.no_grad():
        logits = model(torch.from_numpy(data["x_test"]))
    acc = float((logits.argmax(1).numpy() == data["y_test"]).mean())
    print("acc %.9f" % acc)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "out"), help="folder of resnet.pt and digits.npz")
    ap.add_argument("--blocks", default="2,2,2,2", help="BasicBlocks per stage (torchvision's resnet18: 2,2,2,2)")
    ap.add_argument("--width", type=int, default=64, help="channels of the first stage (torchvision: 64)")
    ap.add_argument("--seed", type=int, default=0, help="torch seed of the initial weights")
    ap.add_argument("--check", metavar="CKPT", help="load an optlab checkpoint into the module and print its test accuracy")
    args = ap.parse_args(argv)
    if args.check:
        check(args)
    else:
        export(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
