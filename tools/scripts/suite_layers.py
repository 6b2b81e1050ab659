"""The layers of suite files (JSON Lines, one descriptor with a "name" each), re-expressed in a layout: the
one reading of them that the timing scripts here share."""
import json
import os


def read(paths):
    """(file name, layer name, descriptor without "name") for every layer of the files, in order."""
    for path in paths:
        for line in open(path):
            if line.strip():
                r = json.loads(line)
                name = r.pop("name")
                yield os.path.basename(path), name, r


def in_layout(r, layout):
    """A copy of descriptor r with its data in `layout` (NCX or NXC), the channel axis moved to match."""
    r = dict(r)
    s, was = r["src"], r.get("data_format", "NCX")
    if was == "NCX" and layout == "NXC":
        r["src"] = [s[0]] + s[2:] + [s[1]]
    elif was == "NXC" and layout == "NCX":
        r["src"] = [s[0], s[-1]] + s[1:-1]
    r["data_format"] = layout
    return r
