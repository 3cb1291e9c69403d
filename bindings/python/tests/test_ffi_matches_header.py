"""The package's ctypes declarations against the C compiler's view of include/gpuflow.h
(header_view.py): ctypes trusts whatever layout and signature it is given, so a struct or a
prototype that drifts from the header corrupts memory instead of failing. Every module of the
package is imported and searched, so a declaration added anywhere is checked.

- Structs: each ctypes Structure is named after the C struct it mirrors (gf_x, or gf_x_vN for an
  older published layout); its fields must be the C struct's first fields, by name, offset, size
  and class, and its size the size of that prefix (the whole struct for the newest layout).
- Functions: each gf_* function declared through ctypes must be a GF_API function of the header
  with as many argtypes as parameters, each of the parameter's size and class, and a restype
  matching the result.
- Callback types (CFUNCTYPE): the same against the C function-pointer type in CALLBACKS.
"""
from __future__ import annotations

import ctypes
import importlib
import pkgutil
import re

import pytest

import gpuflow
from gpuflow import _ffi
from header_view import KIND_NAMES, HeaderUnavailable, read_header

# The C type each ctypes callback type of the package mirrors: a typedef, or a struct's
# function-pointer field.
CALLBACKS = {
    "TASK_FN": "gf_task_fn",
    "DESTROY_FN": "gf_destroy_fn",
    "RUN_CALLBACK": "gf_run_callback",
    "LOG_FN": "gf_log_fn",
    "SPILL_FN": "gf_value_ops.spill",
    "UNSPILL_FN": "gf_value_ops.unspill",
}


@pytest.fixture(scope="module")
def header():
    try:
        return read_header()
    except HeaderUnavailable as e:
        pytest.skip(str(e))


def _modules():
    """gpuflow and every module in it, imported."""
    found = [gpuflow]
    for info in pkgutil.iter_modules(gpuflow.__path__, "gpuflow."):
        found.append(importlib.import_module(info.name))
    return found


def _kind(t) -> str:
    """The class of a ctypes type, in header_view's terms."""
    if t is None:
        return "v"
    for base, kind in ((ctypes.Structure, "s"), (ctypes.Union, "u"), (ctypes.Array, "a"),
                       (ctypes._Pointer, "p"), (ctypes._CFuncPtr, "p")):
        if issubclass(t, base):
            return kind
    code = t._type_
    return "p" if code in "PzZ" else "f" if code in "fdg" else "i"


def _ctypes_desc(t) -> str:
    if t is None:
        return "None (void)"
    return f"{t.__name__} ({ctypes.sizeof(t)} bytes, {KIND_NAMES[_kind(t)]})"


def _c_desc(c) -> str:
    if c is None:
        return "void"
    return f"'{c.text}' ({c.size} bytes, {KIND_NAMES.get(c.kind, c.kind)})"


def _single_integer_struct(header, c) -> bool:
    """A struct by value of one integer field (gf_task, gf_data): the C ABI passes it as that
    integer, so ctypes may declare the integer."""
    name = re.sub(r"\b(const|struct)\b", "", c.text).split()
    s = header.structs.get(name[0]) if name else None
    return s is not None and len(s.fields) == 1 and s.fields[0].type.kind == "i"


def _mismatch(header, c, t, value_of_struct: bool) -> bool:
    """Whether ctypes type t cannot stand for C type c (a parameter when value_of_struct)."""
    if c is None or t is None:
        return (c is None) != (t is None)
    if c.size != ctypes.sizeof(t):
        return True
    kind = _kind(t)
    if value_of_struct and c.kind == "s" and kind == "i":
        return not _single_integer_struct(header, c)
    return c.kind != kind


def _signature_problems(header, what, sig, restype, argtypes) -> list[str]:
    if argtypes is None:
        return [f"{what}: declared without argtypes; gpuflow.h has {len(sig.params)} parameters"]
    argtypes = list(argtypes)
    names = ", ".join(p for p, _ in sig.params) or "none"
    if len(argtypes) != len(sig.params):
        return [f"{what}: ctypes declares {len(argtypes)} arguments, gpuflow.h "
                f"{len(sig.params)} ({names})"]
    problems = []
    for i, ((pname, c), t) in enumerate(zip(sig.params, argtypes)):
        if _mismatch(header, c, t, True):
            problems.append(f"{what} argument {i} ({pname}): gpuflow.h has {_c_desc(c)}, "
                            f"ctypes {_ctypes_desc(t)}")
    if _mismatch(header, sig.result, restype, True):
        problems.append(f"{what} result: gpuflow.h has {_c_desc(sig.result)}, "
                        f"ctypes {_ctypes_desc(restype)}")
    return problems


def _report(problems):
    if problems:
        pytest.fail("the ctypes declarations differ from include/gpuflow.h:\n  "
                    + "\n  ".join(problems), pytrace=False)


def test_every_mirrored_struct_matches_the_header(header):
    classes, todo = [], list(ctypes.Structure.__subclasses__() + ctypes.Union.__subclasses__())
    while todo:  # every subclass, however deep, defined by the package
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__.split(".")[0] == "gpuflow":
            classes.append(cls)
    assert any(c.__name__ == "gf_pool_config" for c in classes), "found no mirrored structs"
    problems = []
    for cls in sorted(classes, key=lambda c: c.__name__):
        name = cls.__name__
        cname = name if name in header.structs else re.sub(r"_v\d+$", "", name)
        struct = header.structs.get(cname)
        if struct is None:
            problems.append(f"{cls.__module__}.{name}: gpuflow.h has no struct {cname}")
            continue
        fields = cls._fields_
        if len(fields) > len(struct.fields):
            extra = ", ".join(f[0] for f in fields[len(struct.fields):])
            problems.append(f"{name}: ctypes has {len(fields)} fields, gpuflow.h's {cname} "
                            f"{len(struct.fields)} (extra: {extra})")
        for (fname, t), c in zip(fields, struct.fields):
            where = f"{name}.{fname}"
            if fname != c.name:
                problems.append(f"{where}: gpuflow.h's {cname} has {c.name} in this place")
                continue
            offset = getattr(cls, fname).offset
            if offset != c.offset:
                problems.append(f"{where}: offset {offset} in ctypes, {c.offset} in gpuflow.h")
            if _mismatch(header, c.type, t, False):
                problems.append(f"{where}: gpuflow.h has {_c_desc(c.type)}, "
                                f"ctypes {_ctypes_desc(t)}")
        if len(fields) <= len(struct.fields):
            expected = struct.prefix_size(len(fields))
            if ctypes.sizeof(cls) != expected:
                problems.append(f"{name}: sizeof {ctypes.sizeof(cls)} in ctypes, {expected} in "
                                f"gpuflow.h (its first {len(fields)} fields of {cname})")
    _report(problems)


def test_every_declared_function_matches_the_header(header):
    functions = {}  # id -> function object: each declared function, wherever it is reachable
    for holder in _modules() + [_ffi.lib]:
        for value in list(vars(holder).values()):
            if isinstance(value, ctypes._CFuncPtr) and \
                    str(getattr(value, "__name__", "")).startswith("gf_"):
                functions[id(value)] = value
    assert any(f.__name__ == "gf_graph_submit" for f in functions.values()), \
        "found no declared functions"
    problems = []
    for f in sorted(functions.values(), key=lambda f: f.__name__):
        sig = header.functions.get(f.__name__)
        if sig is None:
            problems.append(f"{f.__name__}: declared through ctypes, not a GF_API function of "
                            "gpuflow.h")
            continue
        problems += _signature_problems(header, f.__name__, sig, f.restype, f.argtypes)
    _report(problems)


def test_every_callback_type_matches_the_header(header):
    found = {}  # id -> (type, the names it goes by)
    for module in _modules():
        for attr, value in vars(module).items():
            if isinstance(value, type) and issubclass(value, ctypes._CFuncPtr):
                found.setdefault(id(value), (value, set()))[1].add(f"{module.__name__}.{attr}")
    assert found, "found no callback types"
    problems = []
    for cls, names in found.values():
        known = sorted(n for n in names if n.rsplit(".", 1)[1] in CALLBACKS)
        if not known:
            problems.append(f"{', '.join(sorted(names))}: a ctypes callback type the check does "
                            "not know: add it to CALLBACKS with the C type it mirrors")
        for name in known:
            cname = CALLBACKS[name.rsplit(".", 1)[1]]
            sig = header.callbacks.get(cname)
            if sig is None:
                problems.append(f"{name}: gpuflow.h has no function-pointer type {cname}")
                continue
            problems += _signature_problems(header, f"{name} ({cname})", sig, cls._restype_,
                                            cls._argtypes_)
    _report(problems)
