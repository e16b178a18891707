"""Tools around the library, not part of the model code:

    gradcheck.py   the engine's gradients against finite differences (`ta.gradcheck`)
    checklist/     every op and layer, gradient-checked: `python -m tinyattn check`
    bench/         what the engine costs over NumPy (and PyTorch): `python -m tinyattn bench`
    drawing.py     drawing the graph backward walks (`tinyattn.viz.draw_graph`)
    views/         offline interactive pages: the backward sweep stepped through, attention per
                   head (`tinyattn.viz.graph_view`, `attention_view`; `python -m tinyattn view`)
    exercises/     tinyattn's own functions to write again, graded by the checks above:
                   `python -m tinyattn exercises`
    cli.py         the command line, `python -m tinyattn`
"""
