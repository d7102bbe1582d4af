"""Writes each "canonical:" JSON of `qgemmc explain` output (argv[1]) to
argv[2]<i>.json, i from 1, so that each can be explained again."""
import sys

points, current = [], None
for line in open(sys.argv[1]):
    if line.startswith("canonical: "):
        current = [line[len("canonical: "):]]
        points.append(current)
    elif current is not None and line[:1] in (" ", "}"):
        current.append(line)
    else:
        current = None
for i, text in enumerate(points, 1):
    with open("%s%d.json" % (sys.argv[2], i), "w") as f:
        f.write("".join(text))
print(len(points))
