"""Each op's backward rule, checked on its own against finite differences, on the very inputs the
forward pass gave it.

For an op `out = f(x_1, ..., x_n)`, a random upstream gradient `g` (shaped like out) and, for each
input i that wants a gradient, a random direction `v` (shaped like x_i):

    analytic  = <backward(g)_i, v>
    numeric   = (<g, f(.., x_i + eps v, ..)> - <g, f(.., x_i - eps v, ..)>) / (2 eps)

Both are the derivative of <g, f> along v, so they agree up to ~eps**2 when the rule is right
(HIPS autograd checks its rules along random directions in the same way). A gradient the backward
returns larger than its input (the input was broadcast) is summed against v by NumPy's own
broadcasting in `<backward(g)_i, v>`, which is what the sweep's un-broadcasting sums.

The op runs again in float64 on copies of its recorded inputs, in a fresh node of its class, so
the user's graph is not touched. A rule that is wrong shows as a large error on its own node, even
when every other node is right: the graph view colours it red.
"""
import numpy as np

EPS = 1e-6
GOOD, DOUBTFUL = 1e-6, 1e-3      # error thresholds of the colours: green, amber, red above


@np.errstate(all="ignore")      # a wrong rule may overflow or divide by zero: that is the finding
def check_op(node, record, random):
    """[{"input": i, "analytic": ..., "numeric": ..., "error": ...}] for each input of `node`
    that wants a gradient, from its OpRecord; error = |analytic - numeric| / max(1, |both|),
    relative for large derivatives and absolute for small ones."""
    op = type(node)
    arrays = [np.array(a, dtype=np.float64) if np.asarray(a).dtype.kind == "f" else a
              for a in record.arrays]

    def run(inputs):
        fresh = op()
        fresh.parents = node.parents              # which inputs want a gradient
        return fresh, np.asarray(fresh.forward(*inputs, **record.params))

    fresh, out = run(arrays)
    upstream = random.standard_normal(out.shape)
    grads = fresh.backward(upstream)
    results = []
    for i, (array, parent) in enumerate(zip(arrays, node.parents)):
        if parent is None or grads[i] is None:       # a constant: no rule to check
            continue
        direction = random.standard_normal(np.shape(array))
        analytic = float(np.sum(grads[i] * direction))

        def along(step):
            moved = list(arrays)
            moved[i] = array + step * EPS * direction
            return float(np.sum(upstream * run(moved)[1]))

        numeric = (along(1) - along(-1)) / (2 * EPS)
        error = abs(analytic - numeric) / max(1.0, abs(analytic), abs(numeric))
        results.append({"input": i, "analytic": f"{analytic:.6g}", "numeric": f"{numeric:.6g}",
                        # a NaN or an infinity (a rule that divides by zero, say) is no number
                        # a page can compare: None, and the node is marked wrong
                        "error": float(f"{error:.2g}") if np.isfinite(error) else None})
    return results


def verdict(results):
    """"good", "doubtful" or "wrong", by the largest error of a node's checks (None: none)."""
    if not results:
        return None
    errors = [result["error"] for result in results]
    if None in errors:
        return "wrong"
    return "good" if max(errors) <= GOOD else "doubtful" if max(errors) <= DOUBTFUL else "wrong"
