"""`python -m tinyattn view graph|attention`: write a view of a small model and print its path.

    python -m tinyattn view graph [--out PATH] [--layout dot|python]
        the backward sweep of one TransformerBlock (width 16, 2 heads) over 4 tokens, its modules
        folded, every op's backward checked against finite differences
    python -m tinyattn view attention [FOLDER] [--text TEXT] [--out PATH] [--max-tokens N]
        GPT-2's attention on TEXT, per layer and head, with dL/dA of its next-token loss: FOLDER
        is a GPT-2 checkpoint in Hugging Face's layout (default: where `python -m tinyattn
        download gpt2` puts GPT-2 small; the tests use tests/fixtures/gpt2-tiny)
"""
import argparse
import os

import numpy as np

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn_tools.download import default_folder
from tinyattn_tools.views.attention import MAX_TOKENS, attention_view
from tinyattn_tools.views.graph import graph_view
from tinyattn_tools.views.records import recording

TEXT = "The cat sat on the mat because it was tired."


def main(argv):
    parser = argparse.ArgumentParser(prog="python -m tinyattn view", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    kinds = parser.add_subparsers(dest="kind", required=True)
    graph = kinds.add_parser("graph", help="the backward sweep of a small TransformerBlock",
                             description="an interactive page stepping through the backward "
                                         "sweep of a TransformerBlock (width 16, 2 heads) over 4 "
                                         "tokens, every op's backward checked")
    graph.add_argument("--out", default="tinyattn-views/graph_view.html", metavar="PATH",
                       help="where the page is written (default %(default)s)")
    graph.add_argument("--layout", choices=("dot", "python"), default=None,
                       help="who lays the graph out (default: dot when installed)")
    attention = kinds.add_parser("attention", help="GPT-2's attention on a text, with dL/dA",
                                 description="an interactive page of GPT-2's attention on a text, "
                                             "per layer and head, with dL/dA of its next-token "
                                             "loss")
    attention.add_argument("folder", nargs="?", default=default_folder(), metavar="FOLDER",
                           help="a GPT-2 checkpoint in Hugging Face's layout (default %(default)s, "
                                "where `python -m tinyattn download gpt2` puts GPT-2 small)")
    attention.add_argument("--text", default=TEXT,
                           help="the text GPT-2 reads (default %(default)r)")
    attention.add_argument("--out", default="tinyattn-views/attention_view.html", metavar="PATH",
                           help="where the page is written (default %(default)s)")
    attention.add_argument("--max-tokens", type=int, default=MAX_TOKENS, metavar="N",
                           help="the text is cut to this many tokens (default %(default)s)")
    args = parser.parse_args(argv)
    if args.kind == "graph":
        view = block_graph_view(args.layout)
    else:
        if not os.path.isfile(os.path.join(args.folder, "model.safetensors")):
            parser.error(f"no GPT-2 checkpoint in {args.folder}: run `python -m tinyattn download "
                         "gpt2`, or name a folder (such as tests/fixtures/gpt2-tiny)")
        view = gpt2_attention_view(args.folder, args.text, args.max_tokens)
    print(view.save(args.out).resolve())
    return 0


def block_graph_view(layout_engine=None):
    """One TransformerBlock(16, 2) over 4 tokens, loss mean(y^2): its graph, folded by module."""
    ta.manual_seed(0)
    block = nn.TransformerBlock(16, 2)
    x = ta.tensor(np.random.default_rng(0).standard_normal((1, 4, 16)), requires_grad=True)
    x.name = "x (tokens)"
    with recording(block):
        y = block(x)                              # (B, T, E)
        loss = (y * y).mean()
    return graph_view(loss, check=True, layout_engine=layout_engine,
                      title="TransformerBlock(16, 2): backward of mean(y^2)")


def gpt2_attention_view(folder, text, max_tokens=MAX_TOKENS):
    """GPT-2's weights on `text`, and dL/dA of the mean next-token cross-entropy."""
    from tinyattn.tokenizer import GPT2Tokenizer
    tokenizer = GPT2Tokenizer.from_pretrained(folder)
    model = nn.CausalTransformer.from_pretrained(folder).eval()
    ids = np.array([tokenizer.encode(text)])                          # (1, T)
    logits, weights = model(ids, return_weights=True)                 # [(1, H, T, T)]
    for layer_weights in weights:
        layer_weights.retain_grad()
    F.cross_entropy(logits[0, :-1], ids[0, 1:]).backward()            # predict the next token
    tokens = [tokenizer.decode([token]) for token in ids[0].tolist()]
    return attention_view(tokens, weights, grads=[w.grad for w in weights],
                          max_tokens=max_tokens, title=f"GPT-2 ({folder}): {text[:60]}")
