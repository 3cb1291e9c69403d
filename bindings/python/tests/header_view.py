"""The C compiler's view of include/gpuflow.h: every struct's layout, every GF_API function's and
every function-pointer type's parameters, as sizes, offsets and classes.

The system C compiler ($CC, else cc) preprocesses the header, so no comment or macro is left to
mislead the reading, and compiles a generated probe against it that prints sizeof, alignment,
offsetof and __builtin_classify_type for every field, parameter and result. Which fields and
parameters there are is read from the preprocessed text with small regular expressions, because
C cannot enumerate a struct's fields or a function's parameters. The compiler then vouches for
every name read (a misread one does not compile), and each struct's fields must tile it exactly,
so a field the reading missed is an error too, never a silent gap.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

HEADER = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "include",
                                      "gpuflow.h"))

# Classes of C types, as the probe reports them (__builtin_classify_type's numbers, which gcc
# and clang share) and as messages name them.
KIND_NAMES = {"i": "integer", "f": "floating", "p": "pointer", "s": "struct", "u": "union",
              "a": "array", "v": "void"}
_CLASSIFY = {1: "i", 2: "i", 3: "i", 4: "i", 5: "p", 8: "f", 12: "s", 13: "u"}

# With GPUFLOW_BUILDING_LIBRARY, GF_API expands to this attribute: what marks an exported function
# in the preprocessed text.
_API = r'__attribute__\(\(visibility\("default"\)\)\)'
_STRUCT = re.compile(r"typedef struct (gf_\w+) ?\{(.*?)\} ?\1 ?;")
_FUNCTION = re.compile(_API + r" ?([^;]*?)\b(gf_\w+) ?\(([^;]*)\) ?;")
_CALLBACK = re.compile(r"typedef ([^;()]*?)\( ?\* ?(gf_\w+) ?\) ?\(([^;]*)\) ?;")
_FNPTR_DECL = re.compile(r"^(.*?)\( ?\* ?(\w+) ?\) ?\((.*)\)$")
_PLAIN_DECL = re.compile(r"^(.*?)\b(\w+) ?((?:\[[^\]]*\] ?)*)$")


class HeaderUnavailable(Exception):
    """No C compiler to ask (the caller skips, saying so)."""


class ProbeError(Exception):
    """The header could not be read as expected: the message says where."""


@dataclass
class CType:
    text: str   # the declaration as the header writes it, for messages
    size: int
    align: int
    kind: str   # a key of KIND_NAMES


@dataclass
class Field:
    name: str
    offset: int
    type: CType


@dataclass
class Struct:
    name: str
    size: int
    align: int
    fields: list[Field]

    def prefix_size(self, count: int) -> int:
        """sizeof a struct holding only the first `count` fields: an older published layout."""
        head = self.fields[:count]
        end = head[-1].offset + head[-1].type.size
        return _align_up(end, max(f.type.align for f in head))


@dataclass
class Signature:
    name: str
    result: CType | None            # None: void
    params: list[tuple[str, CType]]  # (name, type), in order


@dataclass
class Header:
    structs: dict[str, Struct]
    functions: dict[str, Signature]  # GF_API functions
    callbacks: dict[str, Signature]  # function-pointer typedefs, and fields as "struct.field"


def _align_up(n: int, align: int) -> int:
    return (n + align - 1) // align * align


def _compiler() -> list[str]:
    cc = shlex.split(os.environ.get("CC") or "cc")
    if not cc or shutil.which(cc[0]) is None:
        raise HeaderUnavailable(f"no C compiler ({' '.join(cc) or 'cc'}) to probe gpuflow.h with")
    return cc


def _split_params(text: str) -> list[str]:
    """A parameter list split at its top-level commas; [] for (void) and ()."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [] if parts in (["void"], [""]) else parts


def _declared_name(decl: str, where: str) -> str:
    """The name a declaration (a field, a parameter) declares."""
    m = _FNPTR_DECL.match(decl) or _PLAIN_DECL.match(decl)
    if not m or not m.group(1).strip() or "," in decl and not _FNPTR_DECL.match(decl):
        raise ProbeError(f"{where}: cannot read the declaration '{decl}' (one named field or "
                         "parameter per declaration is what the probe understands)")
    return m.group(2)


class _Probe:
    """The generated C program, and the records it prints, keyed by what each one measures."""

    def __init__(self):
        self.lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "gpuflow.h"',
                      "#define GF_PROBE(key, e) printf(\"%s %zu %zu %d\\n\", key, sizeof(e), "
                      "(size_t)__alignof__(e), __builtin_classify_type(e))",
                      "int main(void) {"]

    def measure(self, key: str, expr: str):
        self.lines.append(f'  GF_PROBE("{key}", {expr});')

    def offset(self, key: str, struct: str, field: str):
        self.lines.append(f'  printf("%s %zu 0 0\\n", "{key}", offsetof({struct}, {field}));')

    def run(self) -> dict[str, tuple[int, int, int]]:
        cc = _compiler()
        self.lines += ["  return 0;", "}", ""]
        with tempfile.TemporaryDirectory(prefix="gpuflow-header-probe-") as tmp:
            source, program = os.path.join(tmp, "probe.c"), os.path.join(tmp, "probe")
            with open(source, "w") as f:
                f.write("\n".join(self.lines))
            built = subprocess.run(cc + ["-std=gnu11", "-I", os.path.dirname(HEADER), source,
                                         "-o", program], capture_output=True, text=True)
            if built.returncode != 0:
                raise ProbeError("the probe of gpuflow.h does not compile (a field or parameter "
                                 f"read wrongly?):\n{built.stderr}")
            out = subprocess.run([program], capture_output=True, text=True, check=True).stdout
        records = {}
        for line in out.splitlines():
            key, *numbers = line.split()
            records[key] = tuple(int(n) for n in numbers)
        return records


def _preprocessed() -> str:
    out = subprocess.run(_compiler() + ["-E", "-P", "-DGPUFLOW_BUILDING_LIBRARY", HEADER],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise ProbeError(f"cannot preprocess {HEADER}:\n{out.stderr}")
    return " ".join(out.stdout.split())


def read_header() -> Header:
    """Reads gpuflow.h through the C compiler; raises HeaderUnavailable or ProbeError."""
    text = _preprocessed()
    probe = _Probe()
    structs, signatures = {}, {}  # name -> [(field, decl)], name -> (result text, [(name, decl)])

    def add_signature(name, result, params, where):
        decls = [(_declared_name(p, f"{where} parameter {i}"), p)
                 for i, p in enumerate(_split_params(params))]
        signatures[name] = (result.strip(), decls)
        # Each parameter becomes a local variable declared exactly as the header declares it, so
        # the probe measures the parameter's own type, however it is spelled.
        probe.lines.append("  {")
        if result.strip() != "void":
            probe.lines.append(f"    {result} gf_probe_result_;")
            probe.measure(f"{name}:result", "gf_probe_result_")
        for i, (pname, decl) in enumerate(decls):
            probe.lines.append(f"    {decl};")
            probe.measure(f"{name}:{i}", pname)
        probe.lines.append("  }")

    for m in _STRUCT.finditer(text):
        sname, decls = m.group(1), [d.strip() for d in m.group(2).split(";") if d.strip()]
        structs[sname] = []
        probe.measure(sname, f"*({sname} *)0")
        for decl in decls:
            field = _declared_name(decl, f"struct {sname}")
            structs[sname].append((field, decl))
            probe.measure(f"{sname}.{field}", f"(({sname} *)0)->{field}")
            probe.offset(f"{sname}.{field}@", sname, field)
            fn = _FNPTR_DECL.match(decl)
            if fn:
                add_signature(f"{sname}.{field}", fn.group(1), fn.group(3), f"{sname}.{field}")
    functions = set()
    for m in _FUNCTION.finditer(text):
        functions.add(m.group(2))
        add_signature(m.group(2), m.group(1), m.group(3), m.group(2))
    for m in _CALLBACK.finditer(text):
        add_signature(m.group(2), m.group(1), m.group(3), m.group(2))
    if not structs or not functions:
        raise ProbeError(f"read {len(structs)} structs and {len(functions)} functions from "
                         f"{HEADER}: the reading no longer fits the header")

    records = probe.run()

    def ctype(key, decl):
        size, align, cls = records[key]
        kind = "a" if "[" in decl else _CLASSIFY.get(cls, f"class {cls}")
        return CType(decl, size, align, kind)

    header = Header({}, {}, {})
    for sname, fields in structs.items():
        size, align, _ = records[sname]
        header.structs[sname] = Struct(sname, size, align, [
            Field(f, records[f"{sname}.{f}@"][0], ctype(f"{sname}.{f}", decl)) for f, decl in fields])
        _check_tiling(header.structs[sname])
    for name, (result, decls) in signatures.items():
        sig = Signature(name, None if result == "void" else ctype(f"{name}:result", result),
                        [(p, ctype(f"{name}:{i}", decl)) for i, (p, decl) in enumerate(decls)])
        (header.functions if name in functions else header.callbacks)[name] = sig
    return header


def _check_tiling(struct: Struct):
    """Each field starts where the one before it ends, aligned, and the last one ends the struct:
    otherwise the reading skipped a field."""
    end = 0
    for f in struct.fields:
        if f.offset != _align_up(end, f.type.align):
            raise ProbeError(f"struct {struct.name}: field {f.name} is at offset {f.offset}, not "
                             f"{_align_up(end, f.type.align)}: the reading missed a field")
        end = f.offset + f.type.size
    if _align_up(end, struct.align) != struct.size:
        raise ProbeError(f"struct {struct.name}: its fields end at {end}, its size is "
                         f"{struct.size}: the reading missed a field")
