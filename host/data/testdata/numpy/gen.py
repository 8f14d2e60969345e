# Writes tiny.npz and tinyc.npz, the NumPy-made fixtures of numpy_test.go
# (NumPy 1.24: np.savez writes stored zip64 members, np.savez_compressed
# deflated ones). The tests need no Python; run this only to remake them:
#
#	/usr/bin/python3 gen.py
import numpy as np

x_tr = np.arange(6 * 2 * 3 * 3, dtype=np.uint8).reshape(6, 2, 3, 3)
y_tr = np.array([0, 1, 2, 0, 1, 2], dtype=np.int64)
x_te = np.arange(3 * 2 * 3 * 3, dtype=np.uint8).reshape(3, 2, 3, 3)[::-1].copy()
y_te = np.array([2, 1, 0], dtype=np.int32)
np.savez("tiny.npz", x_train=x_tr, y_train=y_tr, x_test=x_te, y_test=y_te)

xf = np.linspace(-1, 1, 4 * 5, dtype=np.float32).reshape(4, 5)
np.savez_compressed("tinyc.npz", x_train=xf, y_train=np.array([0, 1, 1, 0]),
                    x_test=xf[:2].astype(np.float64), y_test=np.array([1.0, 0.0]),
                    x_val=xf[2:], y_val=np.array([0, 1], dtype=np.uint8))
