#!/usr/bin/env python3
"""ctest Layering.TheDocumentedGraphIsTheBuilds: the table of layers in docs/ARCHITECTURE.md
("| layer | links (directly) | holds |") lists exactly the layers of core/CMakeLists.txt
(PTDP_LAYERS) with exactly their PTDP_LAYER_DEPS_*, and the floors picture names every layer."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
cmake = open(os.path.join(ROOT, "core", "CMakeLists.txt")).read()
doc = open(os.path.join(ROOT, "docs", "ARCHITECTURE.md")).read()

layers = re.search(r"^set\(PTDP_LAYERS ([^)]*)\)", cmake, re.M).group(1).split()
built = {}
for layer in layers:
    m = re.search(rf"^set\(PTDP_LAYER_DEPS_{layer}\b([^)]*)\)", cmake, re.M)
    if not m:
        sys.exit(f"FAIL: core/CMakeLists.txt has no PTDP_LAYER_DEPS_{layer}")
    built[layer] = set(m.group(1).split())

section = doc[doc.index("## Layers"):]
section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
documented = {}
for m in re.finditer(r"^\| (\w+) \| ([^|]*) \| [^|]* \|$", section, re.M):
    name, links = m.group(1), m.group(2)
    if name == "layer":
        continue
    documented[name] = set() if links.strip().startswith("(") else {x.strip() for x in links.split(",")}
errors = []
for layer in layers:
    if layer not in documented:
        errors.append(f"layer {layer} is built but not in the table")
    elif documented[layer] != built[layer]:
        errors.append(f"layer {layer}: the table says it links {sorted(documented[layer])}, the build {sorted(built[layer])}")
    if f"ptdp_{layer}" not in section:
        errors.append(f"layer {layer} is not in the floors picture (ptdp_{layer})")
for layer in documented:
    if layer not in built:
        errors.append(f"layer {layer} is in the table but not built")
if errors:
    print("FAIL: docs/ARCHITECTURE.md and core/CMakeLists.txt disagree:\n  " + "\n  ".join(errors))
    sys.exit(1)
print(f"PASS: layer doc ({len(layers)} layers)")
