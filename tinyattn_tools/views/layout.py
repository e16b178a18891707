"""Where the boxes of a graph view go: Graphviz's `dot`, or a small layered layout in Python.

Both take boxes (id, width, height, in pixels) and edges (from, to), inputs at the top, and give
each box its centre and each edge an SVG path; the page draws the boxes itself, so a view looks
the same whichever laid it out. `dot` (Graphviz, already what `draw_graph` uses) is asked for its
`plain` output: positions and spline control points, no picture. When `dot` is not installed the
Python layout below is used, and the view says so.

The Python layout is the classic layered one (Sugiyama et al., 1981), cut to its simplest form:
  1. rank: a box sits one row below the lowest of its inputs (longest path from the sources);
  2. order: within a row, boxes are sorted by the mean position of their neighbours in the row
     above, then in the row below, a few times over (the barycenter heuristic), so that edges
     cross less;
  3. place: each row is packed left to right and centred; edges are straight lines.
It does not route long edges around boxes, as `dot` does: a drawing may have an edge pass behind a
box. Good enough to read a graph when Graphviz is missing, not to replace it.
"""
import collections

import graphviz

GAP_X, GAP_Y = 18, 42           # pixels between boxes of a row, and between rows
SWEEPS = 4                      # barycenter passes, each down then up
POINTS_PER_INCH = 72            # dot measures in inches; the page in CSS pixels (1 pt = 1 px)


def lay_out(boxes, edges, engine):
    """{"boxes": {id: [x, y]} (centres), "edges": [[from, to, svg path]], "width", "height",
    "engine": "dot" or "python"}; `engine` is "dot", "python", or None (dot when installed)."""
    if engine in (None, "dot"):
        try:
            return _dot_layout(boxes, edges)
        except graphviz.ExecutableNotFound:
            if engine == "dot":
                raise
    return _python_layout(boxes, edges)


def _dot_layout(boxes, edges):
    lines = ["digraph view {", "graph [rankdir=TB nodesep=0.25 ranksep=0.45 ordering=in];",
             'node [shape=box fixedsize=true label=""];']
    lines += [f"{box} [width={w / POINTS_PER_INCH:.3f} height={h / POINTS_PER_INCH:.3f}];"
              for box, w, h in boxes]
    lines += [f"{tail} -> {head};" for tail, head in edges]
    plain = graphviz.pipe("dot", "plain", "\n".join(lines + ["}"]).encode()).decode()
    centres, paths, height = {}, [], 0.0
    for line in plain.splitlines():
        words = line.split()
        if words[0] == "graph":
            width, height = float(words[2]), float(words[3])
        elif words[0] == "node":               # node name x y width height ...: y grows upwards
            centres[words[1]] = [_px(float(words[2])), _px(height - float(words[3]))]
        elif words[0] == "edge":               # edge tail head n x1 y1 ... xn yn ...
            count = int(words[3])
            points = [(_px(float(words[4 + 2 * i])), _px(height - float(words[5 + 2 * i])))
                      for i in range(count)]
            paths.append([words[1], words[2], _spline(points)])
    return {"boxes": centres, "edges": paths, "width": _px(width), "height": _px(height),
            "engine": "dot"}


def _px(inches):
    return round(inches * POINTS_PER_INCH, 1)


def _spline(points):
    """dot's B-spline control points (a start, then three points per cubic piece) as SVG."""
    start, rest = points[0], points[1:]
    pieces = [" ".join(f"{x},{y}" for x, y in rest[i:i + 3]) for i in range(0, len(rest), 3)]
    return f"M{start[0]},{start[1]} " + " ".join(f"C{piece}" for piece in pieces)


def _python_layout(boxes, edges):
    size = {box: (w, h) for box, w, h in boxes}
    inputs = {box: [] for box in size}
    users = {box: [] for box in size}
    for tail, head in edges:
        inputs[head].append(tail)
        users[tail].append(head)

    # 1. rank, in a topological order (Kahn's algorithm: a box once all its inputs are placed)
    rank, waiting = {}, {box: len(inputs[box]) for box in size}
    ready = collections.deque(box for box in size if waiting[box] == 0)
    while ready:
        box = ready.popleft()
        rank[box] = max((rank[tail] + 1 for tail in inputs[box]), default=0)
        for head in users[box]:
            waiting[head] -= 1
            if waiting[head] == 0:
                ready.append(head)
    rows = [[] for _ in range(max(rank.values(), default=-1) + 1)]
    for box in size:                           # in the order given: oldest first
        rows[rank[box]].append(box)

    # 2. order within rows by the barycenter of the neighbours in the row before
    def reorder(row_list, neighbours):
        position = {box: i for row in rows for i, box in enumerate(row)}
        for row in row_list:
            row.sort(key=lambda box: sum(position[n] for n in neighbours[box])
                     / len(neighbours[box]) if neighbours[box] else position[box])
            position.update({box: i for i, box in enumerate(row)})

    for _ in range(SWEEPS):
        reorder(rows[1:], inputs)
        reorder(rows[-2::-1], users)

    # 3. place: rows packed and centred, one below the other
    widths = [sum(size[box][0] for box in row) + GAP_X * (len(row) - 1) for row in rows]
    width = max(widths, default=0) + 2 * GAP_X
    centres, top = {}, GAP_Y / 2
    for row, row_width in zip(rows, widths):
        row_height = max(size[box][1] for box in row)
        x = (width - row_width) / 2
        for box in row:
            centres[box] = [round(x + size[box][0] / 2, 1), round(top + row_height / 2, 1)]
            x += size[box][0] + GAP_X
        top += row_height + GAP_Y
    paths = [[tail, head, f"M{centres[tail][0]},{centres[tail][1] + size[tail][1] / 2} "
                          f"L{centres[head][0]},{centres[head][1] - size[head][1] / 2}"]
             for tail, head in edges]
    return {"boxes": centres, "edges": paths, "width": round(width, 1),
            "height": round(top - GAP_Y / 2, 1), "engine": "python"}
