"""Demo 2: drawing the graph that backward walks.

What it shows: every op a forward pass runs leaves a node behind, and `tinyattn.viz.draw_graph`
draws those nodes -- the op, its output shape and, after backward, the norm of its gradient. Three
graphs: a small MLP with its loss, one attention head written out by hand, and one
`nn.MultiHeadAttention` forward pass with its parts boxed.

    python demos/02_draw_graph.py [output folder]

It prints how many op nodes and leaves each graph has, and the norm of the key bias's gradient.
The pictures (SVG, and a PNG of the attention head) need Graphviz's `dot` program; without it the
demo writes the `.dot` sources and says how to install `dot`. The head's graph is also written as
`attention_head.html`, a page (`tinyattn.viz.graph_view`) to open in a browser and step through
backward node by node. `--quick` changes nothing here.
Its full run's time, as `dev/regenerate.py` measured it, ends its entry on docs/demos.md.

One attention head, in the notation of "Attention Is All You Need":

    q, k, v = x W_q^T + b_q, x W_k^T + b_k, x W_v^T + b_v      three projections of the tokens
    scores  = q k^T / sqrt(d)                                  how well each query matches each key
    weights = softmax(scores)                                  each row sums to 1
    output  = weights v                                        a weighted average of the values

In the drawing, `k^T` is a `transpose` node, `/ sqrt(d)` a `mul` by a constant, and the two
products are `matmul` nodes. Constants -- numbers, masks, the MLP's input batch, anything that needs
no gradient -- have no node, so they are not drawn.

Look at the gradient of `key.bias` in the head's drawing: about 1e-16, zero up to rounding. Adding
the same vector b to every key adds q . b to all of one query's scores, and softmax ignores a
constant added to a whole row, so the loss cannot depend on the key bias.
"""
import contextlib

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.viz import draw_graph, graph_view, nodes, record_calls, recording, render

# %% [markdown]
# The sizes of the models drawn, and this demo's entry on docs/demos.md, which `dev/regenerate.py`
# fills with the numbers `main` returns.

# %%
TOKENS, EMBED_DIM, HEAD_DIM, NUM_HEADS = 4, 8, 4, 2

PAGE_ENTRY = """\
2. [`02_draw_graph.py`](../demos/02_draw_graph.py) — the graph a forward pass leaves behind, drawn
   with `tinyattn.viz.draw_graph`: a small MLP, one attention head (below; note the key bias's
   gradient of {key_bias_grad:.0e} — softmax ignores a shift shared by a whole row), and one
   multi-head attention layer with its parts boxed.

   ![the graph of one attention head](pictures/attention_head.png)"""


# %% [markdown]
# Two small models to draw: an MLP, and one attention head, three projections then `F.attention`.

# %%
class MLP(nn.Module):
    """Linear -> relu -> Linear."""

    def __init__(self, in_features, hidden, out_features):
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, out_features)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


class AttentionHead(nn.Module):
    """One head: project the tokens to queries, keys and values, then attend."""

    def __init__(self, embed_dim, head_dim):
        self.query = nn.Linear(embed_dim, head_dim)
        self.key = nn.Linear(embed_dim, head_dim)
        self.value = nn.Linear(embed_dim, head_dim)

    def forward(self, x):
        q, k, v = self.query(x), self.key(x), self.value(x)   # (T, D) each
        output, _ = F.attention(q, k, v)                      # (T, D)
        return output, (q, k, v)


# %% [markdown]
# The MLP's graph, drawn after backward: inside `ta.retain_grads()` every op's output keeps its
# gradient, whose norm the drawing shows.

# %%
def mlp_graph():
    """A batch of 5 examples with 4 features, 3 classes: (loss after backward, model, graph)."""
    model = MLP(4, 8, 3)
    x = ta.tensor(np.random.default_rng(0).standard_normal((5, 4)))
    targets = np.array([0, 2, 1, 1, 0])
    with ta.retain_grads():                   # every op output keeps its gradient, to be drawn
        loss = F.cross_entropy(model(x), targets)
    loss.backward()
    return loss, model, draw_graph(loss, params=model,
                                   title="MLP: cross_entropy(fc2(relu(fc1(x))))")


# %% [markdown]
# The head's graph, its three projections and its attention boxed; the loss `|output|^2` is any
# scalar, there to give gradients to show.

# %%
def head_graph():
    """One attention head over 4 tokens of width 8, boxed: three projections, then attention.
    Returns (output after backward of |output|^2, the head, graph)."""
    head = AttentionHead(EMBED_DIM, HEAD_DIM)
    x = ta.tensor(np.random.default_rng(1).standard_normal((TOKENS, EMBED_DIM)),
                  requires_grad=True)
    x.name = "x (tokens)"
    with ta.retain_grads():
        output, (q, k, v) = head(x)           # (T, D)
    (output * output).sum().backward()        # any scalar loss: here |output|^2
    clusters = {"query projection": (q, x), "key projection": (k, x),
                "value projection": (v, x), "attention": (output, [q, k, v])}
    return output, head, draw_graph(output, params=head, clusters=clusters,
                                    title="one attention head: softmax(q k^T / sqrt(d)) v")


# %% [markdown]
# The same head as a page to step through: `recording` keeps each op's values and inputs (the
# graph keeps neither), so the page shows them and checks each op's backward on its own.

# %%
def head_view():
    """The head's graph as an interactive page, backward not yet run (the page runs it)."""
    head = AttentionHead(EMBED_DIM, HEAD_DIM)
    x = ta.tensor(np.random.default_rng(1).standard_normal((TOKENS, EMBED_DIM)),
                  requires_grad=True)
    x.name = "x (tokens)"
    with recording(head):
        output, _ = head(x)                   # (T, D)
        loss = (output * output).sum()
    return graph_view(loss, check=True, title="one attention head: |softmax(q k^T / sqrt(d)) v|^2")


# %% [markdown]
# `nn.MultiHeadAttention`'s graph: `record_calls` notes what goes into and out of the layer and
# each of its projections, and those tensors bound the boxes.

# %%
def multi_head_graph():
    """One nn.MultiHeadAttention forward pass (batch 1, 4 tokens, width 8, 2 heads), its
    projections and its attention core boxed; the core runs both heads at once. Returns
    (output, layer, graph)."""
    attention = nn.MultiHeadAttention(EMBED_DIM, NUM_HEADS)
    x = ta.tensor(np.random.default_rng(2).standard_normal((1, TOKENS, EMBED_DIM)),
                  requires_grad=True)
    x.name = "x (tokens)"
    with contextlib.ExitStack() as stack:        # record what goes in and out of each layer
        whole = stack.enter_context(record_calls(attention))
        parts = {name: stack.enter_context(record_calls(getattr(attention, name)))
                 for name in ("q_proj", "k_proj", "v_proj", "out_proj")}
        output, _ = attention(x)              # (B, T, E)
    clusters = {"MultiHeadAttention": whole[0]}
    clusters.update((name, calls[0]) for name, calls in parts.items())   # (outputs, inputs)
    projected = [tensor for name in ("q_proj", "k_proj", "v_proj") for tensor in clusters[name][0]]
    merged_heads = clusters["out_proj"][1]
    clusters["split heads, attend, merge heads"] = (merged_heads, projected)
    return output, attention, draw_graph(output, params=attention, clusters=clusters,
                                         title=f"nn.MultiHeadAttention({EMBED_DIM}, {NUM_HEADS})")


# %% [markdown]
# `main` draws the three graphs to files, counts their op nodes and leaves, and prints the key
# bias's gradient.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    ta.manual_seed(0)
    results, rows = {}, []
    for name, build in (("mlp", mlp_graph), ("attention_head", head_graph),
                        ("multi_head_attention", multi_head_graph)):
        output, model, graph = build()
        graph_nodes = nodes(output)
        leaves = sum(node.name == "leaf" for node in graph_nodes)
        suffixes = (".svg", ".png") if name == "attention_head" else (".svg",)
        paths = [render(graph, args.output / (name + suffix)) for suffix in suffixes]
        results.update({f"{name}_ops": len(graph_nodes) - leaves, f"{name}_leaves": leaves})
        rows.append([name, str(len(graph_nodes) - leaves), str(leaves),
                     ", ".join(dict.fromkeys(path.name for path in paths))])   # no .dot twice
        if name == "attention_head":
            results["key_bias_grad"] = float(np.linalg.norm(model.key.bias.grad))
    page = head_view().save(args.output / "attention_head.html")
    demo_tools.print_table(["graph", "op nodes", "leaves", "files"], rows)
    print(f"\nthe head's key bias gets a gradient of norm {results['key_bias_grad']:.1e}")
    print(f"written to {args.output.resolve()}")
    print(f"the head's backward, to step through in a browser: {page.resolve()}")
    print("Each rounded box is an op (name, output shape, |grad| once backward has run); square "
          "boxes are leaves:\nblue for parameters, yellow for other leaves; the output is orange.")
    return results


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
