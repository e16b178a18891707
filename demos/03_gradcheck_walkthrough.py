"""Demo 3: checking gradients, from one number by hand to a whole attention layer.

What it shows, in four steps printed as they run:

    1. one element's gradient by central differences, written out in a few lines of NumPy, next to
       the one tinyattn's backward computes (for softmax), and why the check needs a random
       upstream gradient v
    2. `ta.gradcheck` on `nn.MultiHeadAttention` with respect to its input and every parameter
    3. a Sigmoid op whose backward is wrong on purpose: gradcheck catches it and says where
    4. the step size eps: too large and the formula is off, too small and rounding takes over

    python demos/03_gradcheck_walkthrough.py [output folder] [--quick]

It draws `gradcheck_eps.png` (error against eps) when matplotlib is installed. `--quick` tries
fewer step sizes. Its full run's time, as `dev/regenerate.py` measured it, ends its entry in
docs/demos.md.

The check rests on one scalar. For a function f and a fixed random v shaped like f's output, take

    L(x) = <v, f(x)> = sum_j v_j f_j(x)

One backward sweep seeded with v (`f(x).backward(v)`) gives dL/dx. Nudging one element x_i both
ways estimates the same number without any backward rule:

    dL/dx_i  ~  (L(x + eps e_i) - L(x - eps e_i)) / (2 eps)        (error of order eps^2)

With v = ones and f = softmax, L = sum(softmax(x)) = 1 for every x: its gradient is zero, and a
softmax backward that returned zeros would pass. A random v makes every output count.

Step 2 finds the key projection's bias with a gradient of zero up to rounding, and rightly: adding
b to every key adds q.b to all the scores of query q, and softmax ignores a shift shared by a
whole row. In step 3 the ratio numerical / analytical is, element by element, the factor the wrong
backward forgot: a wrong rule usually leaves a pattern like this.

Step 4. For large eps the error is the eps^2 term the formula neglects; for small eps, L(x + eps)
and L(x - eps) agree in almost every digit and rounding is what is left of their difference. One
element's error curve is jagged: at some eps the rounding error happens to cancel part of the
eps^2 error, and float32 can even land closer than float64 there. That is luck, not a better
method, so the demo compares the two precisions by the median error over many elements (random
x and v, every element of x). At the smallest eps, float32's x + eps rounds back to x and the
step is lost entirely: that is why gradcheck wants float64.
"""
import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.engine import Function
from tinyattn.gradient_check import central_difference, compare_gradients, unit

# %% [markdown]
# The settings (step 4's values of eps, in the full and the quick run), and the entry on docs/demos.md for
# this demo, which `dev/regenerate.py` fills with the numbers `main` returns.

# %%
SEED = 0
EPS = 1e-6
EPS_STEPS_FULL = [10.0 ** -k for k in range(1, 11)]     # 1e-1 ... 1e-10
EPS_STEPS_QUICK = [1e-1, 1e-2, 1e-4, 1e-6, 1e-8, 1e-10]
EPS_DRAWS = 20                    # random (x, v) pairs of size 5: 100 elements for the medians

PAGE_ENTRY = """\
3. [`03_gradcheck_walkthrough.py`](../demos/03_gradcheck_walkthrough.py) — one numerical and one
   analytical gradient side by side; `ta.gradcheck` on multi-head attention
   ({mha_numbers_compared} numbers, worst difference {mha_worst_abs:.1e}); a Sigmoid with a wrong
   backward, caught and located; and how the step eps trades truncation against rounding: over
   {eps_elements} elements, the median error is smallest at eps = {best_eps_float64:.0e} in
   float64 ({best_median_float64:.0e}) and at eps = {best_eps_float32:.0e} in float32
   ({best_median_float32:.0e}, {float32_over_float64:.0e} times larger).

   ![error of central differences against eps](pictures/gradcheck_eps.png)"""


# %% [markdown]
# The tools of step 1: `L(x) = <v, softmax(x)>`, and its gradient from one backward sweep seeded
# with v. (The central difference is the library's own, `central_difference` in
# tinyattn/gradient_check.py.)

# %%
def softmax_loss(x, v):
    """L(x) = <v, softmax(x)>, read from the NumPy array x at each call, in x's dtype."""
    return lambda: float(np.vdot(v, F.softmax(ta.tensor(x)).data))


def softmax_gradient(x, v):
    """dL/dx from tinyattn's backward: one sweep seeded with v."""
    x_tensor = ta.tensor(x, requires_grad=True)
    F.softmax(x_tensor).backward(v)
    return x_tensor.grad


# %% [markdown]
# For step 3, an op written as a `Function`: Sigmoid, and a copy whose backward forgets a factor on
# purpose.

# %%
class Sigmoid(Function):
    """s = 1 / (1 + exp(-x)).    dL/dx = grad * s * (1 - s)"""

    def forward(self, x):
        s = 1 / (1 + np.exp(-x))
        self.saved = (s,)
        return s

    def backward(self, grad):
        s, = self.saved
        return (grad * s * (1 - s),)


class WrongSigmoid(Sigmoid):
    """Sigmoid with a backward that is WRONG ON PURPOSE, for gradcheck to catch: it forgets the
    factor (1 - s) and returns grad * s. The forward is the right one."""

    def backward(self, grad):
        s, = self.saved
        return (grad * s,)


# %% [markdown]
# Step 1: one element's gradient both ways, then the largest gradient with v = ones, which should
# be zero.

# %%
def step_one_element(x, v, index):
    print(f"1. One element by hand: L(x) = <v, softmax(x)>, x and v random, shape {x.shape}")
    numerical = central_difference(softmax_loss(x, v), x, unit(x.shape, index), EPS)
    analytical = float(softmax_gradient(x, v)[index])
    sum_gradient = float(np.abs(softmax_gradient(x, np.ones_like(v))).max())
    print(f"numerical  dL/dx[{index}] = {numerical:+.12f}   (central difference, eps = {EPS:g})")
    print(f"analytical dL/dx[{index}] = {analytical:+.12f}   (softmax backward, seeded with v)")
    print(f"difference {abs(numerical - analytical):.1e}; with v = ones instead, the largest "
          f"|dL/dx| is {sum_gradient:.1e}")
    return {"one_element_numerical": numerical, "one_element_analytical": analytical,
            "sum_of_softmax_gradient": sum_gradient}


# %% [markdown]
# Step 2: `ta.gradcheck` on a multi-head attention layer, with respect to its input and every
# parameter; `compare_gradients` gives the numbers it compares, for the table.

# %%
def step_multi_head_attention(random):
    embed_dim, num_heads, batch, length = 8, 2, 2, 3
    print(f"\n2. ta.gradcheck on nn.MultiHeadAttention({embed_dim}, {num_heads}), input (B, T, E) "
          f"= ({batch}, {length}, {embed_dim}), float64, every element of every input")
    ta.manual_seed(SEED)
    attention = nn.MultiHeadAttention(embed_dim, num_heads)
    x = ta.tensor(random.standard_normal((batch, length, embed_dim)), requires_grad=True)
    names, parameters = zip(*attention.named_parameters())
    inputs = [x, *parameters]

    def attention_output(x, *parameters):
        """The parameters are gradcheck's inputs too: it nudges their data in place."""
        return attention(x)[0]

    comparisons = compare_gradients(attention_output, inputs)     # what gradcheck compares
    passed = ta.gradcheck(attention_output, inputs)
    analytical = np.array([c.analytical for c in comparisons])
    absolute = np.abs(analytical - np.array([c.numerical for c in comparisons]))
    owner = np.array([c.input for c in comparisons])             # which input each number is of
    demo_tools.print_table(
        ["checked", "shape", "numbers", "largest |grad|", "worst |diff|"],
        [[name, str(inputs[i].shape), str((owner == i).sum()),
          f"{np.abs(analytical[owner == i]).max():.1e}", f"{absolute[owner == i].max():.1e}"]
         for i, name in enumerate(("input x", *names))])
    print(f"gradcheck passed: {passed}; {len(comparisons)} numbers compared, worst absolute "
          f"difference {absolute.max():.1e}")
    key_bias = owner == 1 + names.index("k_proj.bias")
    return {"mha_passed": passed, "mha_numbers_compared": len(comparisons),
            "mha_worst_abs": float(absolute.max()),
            "key_bias_grad": float(np.abs(analytical[key_bias]).max())}


# %% [markdown]
# Step 3: gradcheck on the wrong Sigmoid, its message, and the ratio numerical / analytical next to
# the factor the backward forgot.

# %%
def step_wrong_op(random):
    print("\n3. A Sigmoid whose backward forgets the factor (1 - s): grad * s, "
          "not grad * s * (1 - s)")
    x = ta.tensor(random.standard_normal((2, 3)), requires_grad=True)
    try:
        ta.gradcheck(WrongSigmoid.apply, [x])
        message = None
    except ta.GradcheckError as error:
        message = str(error)
    print(f"WrongSigmoid: {'caught' if message else 'NOT caught'}: {message}")
    ratios = np.array([c.numerical / c.analytical
                       for c in compare_gradients(WrongSigmoid.apply, [x])])
    missing_factor = 1 - Sigmoid.apply(x).data.ravel()
    print("numerical / analytical:", np.array2string(ratios, precision=4))
    print("1 - s:                 ", np.array2string(missing_factor, precision=4))
    right_passed = ta.gradcheck(Sigmoid.apply, [x])
    print(f"the right Sigmoid passes gradcheck: {right_passed}")
    return {"wrong_op_caught": message is not None, "wrong_op_message": message,
            "wrong_op_ratio_error": float(np.abs(ratios - missing_factor).max()),
            "right_op_passed": right_passed}


# %% [markdown]
# Step 4: the error of the central difference at each eps, in float64 and in float32, for one
# element and as a median over many.

# %%
def eps_errors(x, v, index, steps):
    """{dtype: errors of the central difference at each eps}, against the float64 backward."""
    truth = softmax_gradient(x, v)[index]
    errors = {}
    for dtype in (np.float64, np.float32):
        x_, v_ = x.astype(dtype), v.astype(dtype)
        errors[np.dtype(dtype).name] = np.array([
            abs(central_difference(softmax_loss(x_, v_), x_, unit(x.shape, index), eps) - truth)
            for eps in steps])
    return errors


def step_eps(random, one_element, steps):
    x, v, index = one_element
    print(f"\n4. The step eps: error of the central difference, against the float64 backward, for "
          f"dL/dx[{index}] of step 1\n   and the median over {EPS_DRAWS * x.size} elements")
    one = eps_errors(x, v, index, steps)
    many = [eps_errors(random.standard_normal(x.size), random.standard_normal(x.size), i, steps)
            for _ in range(EPS_DRAWS) for i in range(x.size)]
    median = {dtype: np.median([errors[dtype] for errors in many], axis=0) for dtype in one}
    demo_tools.print_table(
        ["eps", "one float64", "one float32", "median float64", "median float32"],
        [[f"{eps:.0e}", f"{one['float64'][k]:.1e}", f"{one['float32'][k]:.1e}",
          f"{median['float64'][k]:.1e}", f"{median['float32'][k]:.1e}"]
         for k, eps in enumerate(steps)])
    results = {"eps_elements": len(many)}
    for dtype, errors in median.items():
        best = int(np.argmin(errors))
        results.update({f"best_eps_{dtype}": steps[best],
                        f"best_median_{dtype}": float(errors[best])})
    results["float32_over_float64"] = (results["best_median_float32"]
                                       / results["best_median_float64"])
    results["float32_step_lost"] = bool(np.float32(x[index]) + np.float32(steps[-1])
                                        == np.float32(x[index]))
    print(f"smallest median error: float64 {results['best_median_float64']:.1e} at eps "
          f"{results['best_eps_float64']:.0e}, float32 {results['best_median_float32']:.1e} at "
          f"eps {results['best_eps_float32']:.0e} ({results['float32_over_float64']:.0e} times "
          f"larger)\nat eps {steps[-1]:.0e}, float32's x + eps rounds back to x: "
          f"{results['float32_step_lost']}")
    return results, {"steps": steps, "one": one, "median": median, "elements": len(many)}


# %% [markdown]
# Step 4's picture: both errors against eps, on log axes.

# %%
def draw_eps(curves, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    figure, axes = plt.subplots(figsize=(6, 4.2))
    for dtype, color in (("float64", "tab:blue"), ("float32", "tab:orange")):
        axes.loglog(curves["steps"], np.maximum(curves["one"][dtype], 1e-17), ":", color=color,
                    marker=".", label=f"{dtype}, one element")     # a log axis cannot show 0
        axes.loglog(curves["steps"], curves["median"][dtype], "-", color=color, marker="o",
                    label=f"{dtype}, median of {curves['elements']} elements")
    axes.set(xlabel="eps", ylabel="|numerical - analytical|",
             title="Central differences: the eps trade-off")
    axes.legend(fontsize=8)
    return demo_tools.save_figure(figure, path, dpi=120, bbox_inches="tight")


# %% [markdown]
# `main` runs the four steps with one random generator and returns what each measured.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    random = np.random.default_rng(SEED)
    one_element = (random.standard_normal(5), random.standard_normal(5), 2)    # x, v, index
    results = step_one_element(*one_element)
    results.update(step_multi_head_attention(random))
    results.update(step_wrong_op(random))
    steps = EPS_STEPS_QUICK if args.quick else EPS_STEPS_FULL
    eps_results, curves = step_eps(random, one_element, steps)
    results.update(eps_results)
    picture = draw_eps(curves, args.output / "gradcheck_eps.png")
    if picture is not None:
        print(f"picture: {picture}")
    return results


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
