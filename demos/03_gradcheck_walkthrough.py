"""Demo 3: checking gradients, from one number by hand to a whole attention layer.

What it shows, in four steps printed as they run:

    1. one element's gradient by central differences, written out in a few lines of NumPy, next to
       the one tinyattn's backward computes (for softmax), and why the check needs a random
       upstream gradient v
    2. `ta.gradcheck` on `nn.MultiHeadAttention` with respect to its input and every parameter
    3. a Sigmoid op whose backward is wrong on purpose: gradcheck catches it and says where
    4. the step size eps: too large and the formula is off, too small and rounding takes over

    python demos/03_gradcheck_walkthrough.py [output folder] [--quick]

It writes one picture (error against eps) when matplotlib is installed. `--quick` tries fewer step
sizes; the whole demo takes a second or two either way.

The check rests on one scalar. For a function f and a fixed random v shaped like f's output, take

    L(x) = <v, f(x)> = sum_j v_j f_j(x)

One backward sweep seeded with v (`f(x).backward(v)`) gives dL/dx. Nudging one element x_i both
ways estimates the same number without any backward rule:

    dL/dx_i  ~  (L(x + eps e_i) - L(x - eps e_i)) / (2 eps)        (error of order eps^2)
"""
import time

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.engine import Function
from tinyattn.tools.gradcheck import compare_gradients

SEED = 0
EPS = 1e-6
EPS_STEPS_FULL = [10.0 ** -k for k in range(1, 11)]     # 1e-1 ... 1e-10
EPS_STEPS_QUICK = [1e-1, 1e-2, 1e-4, 1e-6, 1e-8, 1e-10]


def central_difference(loss, x, index, eps):
    """(L(x + eps e_i) - L(x - eps e_i)) / (2 eps): x[index] nudged both ways, then put back."""
    original = x[index]
    x[index] = original + eps
    loss_plus = loss(x)
    x[index] = original - eps
    loss_minus = loss(x)
    x[index] = original
    return (loss_plus - loss_minus) / (2 * eps)


def softmax_loss(v):
    """L(x) = <v, softmax(x)>, evaluated on a NumPy array, in that array's dtype."""
    return lambda x: float(np.vdot(v, F.softmax(ta.tensor(x)).data))


def softmax_gradient(x, v):
    """dL/dx from tinyattn's backward: one sweep seeded with v."""
    x_tensor = ta.tensor(x, requires_grad=True)
    F.softmax(x_tensor).backward(v)
    return x_tensor.grad


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


def step_one_element(random):
    print("\n1. One element by hand: L(x) = <v, softmax(x)>, x and v random, shape (5,)")
    x, v = random.standard_normal(5), random.standard_normal(5)
    index = 2
    numerical = central_difference(softmax_loss(v), x, index, EPS)
    analytical = softmax_gradient(x, v)[index]
    print(f"numerical  dL/dx[{index}] = {numerical:+.12f}   (central difference, eps = {EPS:g})")
    print(f"analytical dL/dx[{index}] = {analytical:+.12f}   (softmax backward, seeded with v)")
    print(f"difference              {abs(numerical - analytical):.1e}")
    sum_gradient = softmax_gradient(x, np.ones(5))
    print("Why a random v: with v = ones, L = sum(softmax(x)) = 1 for every x, so its gradient is")
    print(f"zero (largest |dL/dx| here: {np.abs(sum_gradient).max():.1e}), and a softmax backward "
          "that returned\nzeros would pass. With a random v, every output counts.")
    return {"one_element_numerical": numerical, "one_element_analytical": float(analytical),
            "sum_of_softmax_gradient": float(np.abs(sum_gradient).max())}, (x, v, index)


def step_multi_head_attention(random):
    embed_dim, num_heads, batch, length = 8, 2, 2, 3
    print(f"\n2. ta.gradcheck on nn.MultiHeadAttention(embed_dim={embed_dim}, "
          f"num_heads={num_heads}),\n   input (B, T, E) = ({batch}, {length}, {embed_dim}), "
          "float64, every element of the input and of every parameter")
    ta.manual_seed(SEED)
    attention = nn.MultiHeadAttention(embed_dim, num_heads)
    x = ta.tensor(random.standard_normal((batch, length, embed_dim)), requires_grad=True)
    names, parameters = zip(*attention.named_parameters())
    inputs = [x, *parameters]

    def attention_output(x, *parameters):
        """The parameters are gradcheck's inputs too: it nudges their data in place."""
        return attention(x)[0]

    started = time.perf_counter()
    comparisons = compare_gradients(attention_output, inputs)
    passed = ta.gradcheck(attention_output, inputs)
    seconds = time.perf_counter() - started
    analytical = np.array([c.analytical for c in comparisons])
    numerical = np.array([c.numerical for c in comparisons])
    absolute = np.abs(analytical - numerical)
    relative = absolute / np.maximum(np.abs(numerical), 1e-3)
    rows = []
    for i, name in enumerate(("input x", *names)):
        mine = np.array([c.input == i for c in comparisons])
        rows.append([name, str(inputs[i].shape), str(mine.sum()),
                     f"{np.abs(analytical[mine]).max():.1e}", f"{absolute[mine].max():.1e}"])
    demo_tools.print_table(["checked", "shape", "numbers", "largest |grad|", "worst |diff|"], rows)
    print(f"gradcheck passed: {passed}; {len(comparisons)} numbers compared, each from two "
          f"forward passes ({seconds:.1f} s for both checks)")
    print(f"worst absolute difference {absolute.max():.1e}; worst relative difference "
          f"{relative.max():.1e} (|diff| / max(|numerical|, 1e-3))")
    key_bias = np.array([c.input == 1 + names.index("k_proj.bias") for c in comparisons])
    largest = np.abs(analytical[key_bias]).max()
    print(f"k_proj.bias gets a gradient of at most {largest:.0e}: zero up to rounding, and rightly: "
          "adding b to\nevery key adds q.b to all the scores of query q, and softmax ignores "
          "a shift shared\nby a whole row.")
    return {"mha_passed": passed, "mha_numbers_compared": len(comparisons),
            "mha_worst_abs": float(absolute.max()), "mha_worst_rel": float(relative.max())}


def step_wrong_op(random):
    print("\n3. A Sigmoid whose backward forgets the factor (1 - s): grad * s, "
          "not grad * s * (1 - s)")
    x = ta.tensor(random.standard_normal((2, 3)), requires_grad=True)
    try:
        ta.gradcheck(WrongSigmoid.apply, [x])
    except ta.GradcheckError as error:
        message = str(error)
    else:
        message = None
    print(f"WrongSigmoid: {'caught' if message else 'NOT caught'}, with the message\n  {message}")
    comparisons = compare_gradients(WrongSigmoid.apply, [x])
    ratios = [c.numerical / c.analytical for c in comparisons]
    print("numerical / analytical, element by element:",
          np.array2string(np.array(ratios), precision=4))
    print("1 - s, element by element:                 ",
          np.array2string(1 - Sigmoid.apply(x).data.ravel(), precision=4))
    if np.allclose(ratios, 1 - Sigmoid.apply(x).data.ravel(), rtol=1e-4):
        print("The ratio is the missing factor (they agree to 4 digits): a wrong rule usually "
              "leaves\na pattern like this.")
    right_passed = ta.gradcheck(Sigmoid.apply, [x])
    print(f"Sigmoid, backward grad * s * (1 - s): gradcheck passed: {right_passed}")
    return {"wrong_op_caught": message is not None, "wrong_op_message": message,
            "wrong_op_ratios": ratios, "right_op_passed": right_passed}


def step_eps(example, steps):
    x, v, index = example
    print(f"\n4. The step eps: error of the central difference for dL/dx[{index}] of step 1,")
    print("   against the float64 backward. Large eps: the eps^2 term the formula neglects;")
    print("   small eps: L(x + eps) and L(x - eps) agree in almost every digit, and rounding")
    print("   is what is left of their difference.")
    truth = softmax_gradient(x, v)[index]
    errors = {}
    for dtype in (np.float64, np.float32):
        loss = softmax_loss(v.astype(dtype))
        errors[np.dtype(dtype).name] = [
            abs(central_difference(loss, x.astype(dtype), index, eps) - truth) for eps in steps]
    rows = [[f"{eps:.0e}", f"{errors['float64'][k]:.1e}", f"{errors['float32'][k]:.1e}"]
            for k, eps in enumerate(steps)]
    demo_tools.print_table(["eps", "error float64", "error float32"], rows)
    best = {name: int(np.argmin(values)) for name, values in errors.items()}
    for name, k in best.items():
        print(f"best eps in {name}: {steps[k]:.0e}, error {errors[name][k]:.1e}")
    ratio = errors["float32"][best["float32"]] / errors["float64"][best["float64"]]
    print(f"float32 at its best is about 10^{round(np.log10(ratio))} times less accurate than "
          "float64 at its best.")
    luckier = [eps for eps, e32, e64 in zip(steps, errors["float32"], errors["float64"])
               if e32 < e64 / 2]
    if luckier:
        print(f"(At eps={luckier[0]:.0e} float32 happens to land closer: its rounding error "
              "partly cancels the eps^2 error.\n One lucky number, not a better method.)")
    x32, smallest = np.float32(x[index]), np.float32(steps[-1])
    if x32 + smallest == x32:
        print(f"At eps={steps[-1]:.0e}, float32's x + eps rounds back to x: the step is lost "
              "entirely.\nThat is why gradcheck wants float64.")
    return {"eps_steps": steps, "eps_errors": errors}


def draw_eps(eps_results, folder):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    figure, axes = plt.subplots(figsize=(5.5, 4))
    for name, values in eps_results["eps_errors"].items():     # a log axis cannot show 0
        axes.loglog(eps_results["eps_steps"], np.maximum(values, 1e-17), marker="o", label=name)
    axes.set_xlabel("eps")
    axes.set_ylabel("|numerical - analytical|")
    axes.set_title("Central differences: the eps trade-off")
    axes.legend()
    path = folder / "gradcheck_eps.png"
    print(f"picture: {path}")
    return demo_tools.save_figure(figure, path, dpi=120, bbox_inches="tight")


def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    folder = args.output
    random = np.random.default_rng(SEED)
    print("\n\n".join(__doc__.split("\n\n")[-4:]))
    results, example = step_one_element(random)
    results.update(step_multi_head_attention(random))
    results.update(step_wrong_op(random))
    eps_results = step_eps(example, EPS_STEPS_QUICK if args.quick else EPS_STEPS_FULL)
    results.update(eps_results)
    results["picture"] = draw_eps(eps_results, folder)
    return results


if __name__ == "__main__":
    main()
