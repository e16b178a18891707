"""Demo 1: one gradient, three ways.

What it shows: the gradient of a small expression, computed by tinyattn's backward pass, by the
chain rule written out by hand, and by central finite differences -- and that all three agree.

    python demos/01_first_gradient.py

It prints dL/dx and the first row of dL/dW from each of the three, and the largest difference
between tinyattn and the other two. It draws no picture and writes no file (like every demo it
accepts an output folder and `--quick`, which change nothing here). Its full run's time, as
`dev/regenerate.py` measured it, ends its entry on docs/demos.md.

The expression, for a vector x and a matrix W:

    h = tanh(W @ x)             the hidden layer
    L = sum(h * h) / 2          a loss

By hand (the chain rule, from the loss back to the inputs):

    dL/dh = h
    dL/dz = dL/dh * (1 - h^2)   with z = W @ x, since tanh'(z) = 1 - tanh(z)^2
    dL/dW = outer(dL/dz, x)     the matmul adjoint: dL/dW = dL/dz @ x^T
    dL/dx = W^T @ dL/dz
"""
import numpy as np

import demo_tools
import tinyattn as ta
from tinyattn.gradient_check import central_difference, unit

# %% [markdown]
# This demo's entry on docs/demos.md, which `dev/regenerate.py` fills with the number `main`
# returns.

# %%
PAGE_ENTRY = """\
1. [`01_first_gradient.py`](../demos/01_first_gradient.py) — one gradient computed three ways: by
   tinyattn's backward, by the chain rule written out by hand, and by finite differences; they
   agree to {worst_difference:.0e}. (Text only.)"""


# %% [markdown]
# The loss in NumPy alone, and its gradient by the chain rule, line by line as derived above.

# %%
def loss_numpy(W, x):
    h = np.tanh(W @ x)
    return float((h * h).sum() / 2)


def by_hand(W, x):
    h = np.tanh(W @ x)
    grad_z = h * (1 - h * h)
    return np.outer(grad_z, x), W.T @ grad_z


# %% [markdown]
# Finite differences need no rule at all: each element of W and x is nudged both ways, and the
# slope of the loss between the two is its derivative (`central_difference`, the one
# `ta.gradcheck` uses).

# %%
def by_finite_differences(W, x, eps=1e-6):
    grads = []
    for array in (W, x):
        grad = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            grad[index] = central_difference(lambda: loss_numpy(W, x), array,
                                             unit(array.shape, index), eps)
        grads.append(grad)
    return grads


# %% [markdown]
# tinyattn: the same expression on tensors that require grad, then one backward sweep from the
# loss.

# %%
def by_tinyattn(W, x):
    W_t, x_t = ta.tensor(W, requires_grad=True), ta.tensor(x, requires_grad=True)
    h = (W_t @ x_t).tanh()
    loss = (h * h).sum() / 2
    loss.backward()
    return W_t.grad, x_t.grad


# %% [markdown]
# `main` computes the gradients the three ways on one random W and x, prints them side by side, and
# returns the largest difference between tinyattn and the other two.

# %%
def main(argv=None):
    demo_tools.parse(__doc__, argv)
    random = np.random.default_rng(0)
    W, x = random.standard_normal((3, 4)), random.standard_normal(4)
    results = {"tinyattn": by_tinyattn(W, x), "by hand": by_hand(W, x),
               "finite differences": by_finite_differences(W, x)}
    for name, pick in (("dL/dx", lambda grads: grads[1]),
                       ("dL/dW, first row", lambda grads: grads[0][0])):
        print(name)
        for method, grads in results.items():
            print(f"  {method:<20}", np.array2string(pick(grads), precision=8, floatmode="fixed"))
    worst = max(np.abs(results["tinyattn"][i] - results[other][i]).max()
                for other in ("by hand", "finite differences") for i in (0, 1))
    print(f"\nlargest difference between tinyattn and the other two: {worst:.1e}: "
          + ("they agree, to the accuracy finite differences allow" if worst < 1e-8 else
             "they DISAGREE, so one of the three is wrong"))
    return {"worst_difference": float(worst)}


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
