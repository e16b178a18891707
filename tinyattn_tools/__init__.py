"""tinyattn's toolkit: what stands beside the book, to check it, measure it, see it and practise it.

The book is the package `tinyattn` (the chapters); this package imports it, and the book imports
nothing of this one, beyond its two entry points: `tinyattn/viz.py` (`import tinyattn.viz as viz`
gives the drawing and the views) and `tinyattn/__main__.py` (`python -m tinyattn` runs cli.py).

    checklist/     every op and layer of the book, gradient-checked: `python -m tinyattn check`
    bench/         what the engine costs over NumPy (and PyTorch): `python -m tinyattn bench`
    drawing.py     drawing the graph backward walks (`tinyattn.viz.draw_graph`)
    views/         offline interactive pages: the backward sweep stepped through, attention per
                   head (`tinyattn.viz.graph_view`, `attention_view`; `python -m tinyattn view`)
    download.py    a model's files from the Hugging Face hub: `python -m tinyattn download gpt2`
    exercises/     the book's own functions to write again, graded by the checklist's checks:
                   `python -m tinyattn exercises`
    cli.py         the command line, `python -m tinyattn`

The maintainer's scripts, which rewrite docs/ (the demos' results, the exercises' transcript and
mutant record), are not part of it: they are in the repository's dev/ folder.
"""
