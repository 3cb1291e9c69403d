#!/usr/bin/env python3
"""Fails when a binding neither calls a GF_API function of include/gpuflow.h nor lists it as an
exception in docs/bindings.md, or when an exception there is stale (the binding calls it now) or
names no function of the header. Prints each binding's coverage; --table prints it as markdown.

A function is covered when its name occurs as a word in the binding's code, comments and strings
left out (a comment that mentions a function does not call it). For Python the ctypes declarations
of _ffi.py (`gf_x = _fn("gf_x", ...)`) are left out too: declaring a function is not offering it.
A static inline helper of the header counts as a call of the GF_API functions its body calls.
The exceptions are the bullets "- `gf_name` reason" under "### Not in <binding>" in the docs.
Usage: check-bindings.py [--table | --self-test] [HEADER]. Run by ctest as bindings.coverage and
bindings.coverage_self_test.
"""
import io
import pathlib
import re
import sys
import tokenize

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEADER = ROOT / "include" / "gpuflow.h"
DOC = ROOT / "docs" / "bindings.md"

# binding: (the heading of its exceptions in the docs, its source globs, its kind of source)
BINDINGS = {
    "C++": ("the C++ header", ["include/gpuflow.hpp", "include/gpuflow/*.hpp"], "c"),
    "Rust": ("the Rust crate", ["bindings/rust/gpuflow/src/**/*.rs"], "c"),
    "Python": ("the Python package", ["bindings/python/gpuflow/**/*.py"], "python"),
}

# For --table only: the header's functions by feature (a function named nowhere here is "other").
FEATURES = {
    "library: version, errors, bytes": "version version_string last_error status_name bytes_free",
    "pools (embedded)": "pool_config_init pool_create_versioned pool_destroy pool_worker_count "
                        "pool_worker_info",
    "devices, ledger": "pool_ledger_size pool_ledger_entry pool_ledger_lookup pool_device_count "
                       "pool_device_info pool_devices_source pool_peer_access pool_device_memory",
    "graphs and tasks": "graph_create graph_destroy task_desc_init graph_add_task "
                        "graph_add_dependency graph_task_count task_ctx_fail task_ctx_cancelled "
                        "task_ctx_env",
    "buffers": "buffer_desc_init graph_add_buffer graph_add_host_buffer task_ctx_input "
               "task_ctx_output run_fetch",
    "opaque values": "graph_add_value graph_add_host_value task_ctx_set_value value_ops_init "
                     "task_ctx_set_device_value run_value",
    "runs: wait, poll, cancel, per task": "graph_submit run_wait run_poll run_state_get "
                                          "run_cancel run_destroy run_task_state run_task_error "
                                          "run_task_attempts run_task_worker run_stats_get",
    "submit options (completion callback), pollable descriptor": "submit_options_init run_fd",
    "events": "pool_set_event_callback",
    "kernels, plugins, commands": "kernel_desc_init pool_register_kernel pool_load_plugin "
                                  "pool_kernel_count pool_kernel_name command_desc_init",
    "graph documents": "graph_set_metadata graph_metadata_count graph_metadata_get "
                       "graph_serialize graph_deserialize graph_task_at graph_data_count "
                       "graph_data_at graph_check",
    "embedded service": "service_start default_endpoint service_endpoint "
                        "service_remote_endpoint service_update_policy service_stop",
    "leases": "lease_acquire lease_info lease_device_info lease_environment lease_revoked "
              "lease_bind_process_group lease_release",
    "connected pools": "run_where_get pool_service_status data_plane_check",
    "dashboard": "pool_dashboard_url service_dashboard_url",
}

# A string literal (kept, so that "http://" is not read as a comment) or a comment (dropped).
C_LIKE = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?\*/', re.S)


def header_functions(text):
    """The GF_API functions in header order, and each static inline helper's GF_API callees."""
    text = C_LIKE.sub(lambda m: m.group(0) if m.group(0).startswith('"') else " ", text)
    names = re.findall(r"^GF_API\b[^;{(]*?\b(gf_\w+)\s*\(", text, re.M | re.S)
    helpers = {}
    for name, body in re.findall(r"static inline[^(;]*?\b(gf_\w+)\s*\([^)]*\)\s*\{(.*?)\n\}",
                                 text, re.S):
        helpers[name] = [n for n in re.findall(r"\b(gf_\w+)\s*\(", body) if n in names]
    return names, helpers


def c_like_words(text):
    return set(re.findall(r"\bgf_\w+", C_LIKE.sub(lambda m: " ", text)))


def python_words(text):
    """NAME tokens only (no strings, comments, docstrings), less `gf_x = _fn(` declarations."""
    toks = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type in (tokenize.NAME, tokenize.OP)]
    words = set()
    for i, t in enumerate(toks):
        declared = (i + 2 < len(toks) and toks[i + 1].string == "=" and toks[i + 2].string == "_fn")
        if t.type == tokenize.NAME and t.string.startswith("gf_") and not declared:
            words.add(t.string)
    return words


def binding_words(globs, kind):
    words, files = set(), 0
    for pattern in globs:
        for path in sorted(ROOT.glob(pattern)):
            files += 1
            text = path.read_text()
            words |= python_words(text) if kind == "python" else c_like_words(text)
    return words, files


def doc_exceptions(text):
    """{heading: [(name, line number)]} for every "### Not in ..." section of the docs."""
    sections, current = {}, None
    for number, line in enumerate(text.splitlines(), 1):
        heading = re.match(r"#+\s+(.*)", line)
        if heading:
            title = re.match(r"Not in (.+)", heading.group(1).strip())
            current = title.group(1).strip() if line.startswith("### ") and title else None
            if current is not None:
                sections.setdefault(current, [])
        elif current is not None:
            bullet = re.match(r"-\s+`(\w+)`", line)
            if bullet:
                sections[current].append((bullet.group(1), number))
    return sections


def print_table(functions, rows):
    """Markdown: per feature, how many of its functions each binding calls (C: all of them)."""
    groups = {f: ["gf_" + n for n in names.split()] for f, names in FEATURES.items()}
    known = {n for names in groups.values() for n in names}
    groups["other"] = [f for f in functions if f not in known]
    print("\n| feature | C | " + " | ".join(b for b, _ in rows) + " |")
    print("|---|---|" + "---|" * len(rows))
    for feature, names in groups.items():
        names = [n for n in names if n in functions]
        if names:
            cells = [f"{len(names)}"] + [f"{len(covered & set(names))}" for _, covered in rows]
            print(f"| {feature} | " + " | ".join(cells) + " |")
    cells = [f"{len(functions)}"] + [f"{len(covered)}" for _, covered in rows]
    print("| all functions | " + " | ".join(cells) + " |")


def check(header_text, doc_text):
    """The errors, and per binding (name, covered functions, documented exceptions)."""
    functions, helpers = header_functions(header_text)
    sections = doc_exceptions(doc_text)
    errors, rows = [], []
    for binding, (heading, globs, kind) in BINDINGS.items():
        words, files = binding_words(globs, kind)
        if not files:
            errors.append(f"{binding}: no source files match {globs}")
        for helper, callees in helpers.items():
            if helper in words:
                words.update(callees)
        listed = sections.get(heading)
        if listed is None:
            errors.append(f"{binding}: docs/bindings.md has no section '### Not in {heading}'")
            listed = []
        names = [n for n, _ in listed]
        for i, (name, line) in enumerate(listed):
            if name not in functions:
                errors.append(f"{binding}: docs/bindings.md:{line}: {name} is not a GF_API "
                              "function of the header")
            elif name in words:
                errors.append(f"{binding}: docs/bindings.md:{line}: {name} is listed as an "
                              "exception but the binding calls it now: remove it from the list")
            if names.index(name) != i:
                errors.append(f"{binding}: docs/bindings.md:{line}: {name} is listed twice")
        for name in functions:
            if name not in words and name not in names:
                errors.append(f"{binding}: {name} is neither called nor listed under "
                              f"'### Not in {heading}' in docs/bindings.md")
        rows.append((binding, {f for f in functions if f in words}, set(names)))
    return functions, errors, rows


def self_test(header_text, doc_text):
    """The check must catch a new function and a listed name the header lacks."""
    fake = "gf_self_test_only"
    _, errors, _ = check(header_text + f"\nGF_API int {fake}(void);\n", doc_text)
    missed = [b for b in BINDINGS if not any(e.startswith(f"{b}: {fake} is neither")
                                             for e in errors)]
    doc = doc_text.replace("### Not in the Rust crate\n", f"### Not in the Rust crate\n- `{fake}` x\n")
    _, errors, _ = check(header_text, doc)
    if not any(f"{fake} is not a GF_API function" in e for e in errors):
        missed.append("Rust (an exception naming no function)")
    print("check-bindings self-test: " + (f"missed {missed}" if missed else "ok"))
    return 1 if missed else 0


def main(argv):
    paths = [a for a in argv[1:] if not a.startswith("--")]
    header = pathlib.Path(paths[0]) if paths else HEADER  # another header, to try the check
    if "--self-test" in argv:
        return self_test(header.read_text(), DOC.read_text())
    functions, errors, rows = check(header.read_text(), DOC.read_text())
    for binding, covered, names in rows:
        print(f"{binding}: {len(covered)} of {len(functions)} functions, "
              f"{len(names)} documented exceptions")
    if "--table" in argv:
        print_table(functions, [(b, c) for b, c, _ in rows])
    for e in errors:
        print(f"check-bindings: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
