"""Checks `mpc compile --report=json` against the generated library.

    check-report-json.py REPORT.json HOST.cpp

REPORT.json is the report; HOST.cpp the host source `mpc compile
--emit=host` generated with the same options. Checks that the memory figures
add up and equal the arena sizes in the model descriptor (the GEMM
workspace too: part of the activations, 256-aligned), that the kernel
list is non-empty and the step totals are the sums of its kernels, and that
every kernel's bound is its roofline max(FLOPs / peak, bytes / bandwidth).
Exits 1 with a message on the first failure.
"""
import json
import math
import re
import sys


def fail(message):
    print(f"check-report-json: {message}", file=sys.stderr)
    sys.exit(1)


def expect(condition, message):
    if not condition:
        fail(message)


def descriptor_arenas(host_source):
    # The first brace of four integers in the descriptor: arena_bytes,
    # {params, grads, optimizer, activations}.
    m = re.search(r"_desc = \{.*?\{(\d+), (\d+), (\d+), (\d+)\},",
                  host_source, re.S)
    expect(m, "no arena sizes in the model descriptor")
    return [int(g) for g in m.groups()]


def descriptor_workspace(host_source):
    # gemm_workspace_offset, gemm_workspace_bytes: the line before the step
    # functions.
    m = re.search(r"_desc = \{.*?\n  (\d+), (\d+),\n  \w+_train_step,",
                  host_source, re.S)
    expect(m, "no GEMM workspace in the model descriptor")
    return [int(g) for g in m.groups()]


def check_memory(name, m):
    expect(m["parameters"] + m["state"] + m["half_copies_and_alignment"]
           == m["parameters_state_and_half_copies"],
           f"{name}: parameter arena parts do not add up")
    expect(m["arena_bytes"] == [m["parameters_state_and_half_copies"],
                                m["gradients"], m["optimizer_state"],
                                m["activations"]],
           f"{name}: arena_bytes differ from the named figures")
    expect(m["activations"] == max(m["train_activations"],
                                   m["eval_activations"]),
           f"{name}: activations is not the larger of train and eval")
    expect(m["total"] == sum(m["arena_bytes"]), f"{name}: total != sum")
    expect(0 <= m["gemm_workspace"] <= min(m["train_activations"],
                                           m["eval_activations"]),
           f"{name}: the GEMM workspace is not part of the activations")


def main():
    report = json.load(open(sys.argv[1]))
    host_source = open(sys.argv[2]).read()
    arenas = descriptor_arenas(host_source)
    check_memory("chosen", report["memory"]["chosen"])
    check_memory("O0", report["memory"]["O0"])
    expect(report["memory"]["chosen"]["arena_bytes"] == arenas,
           f"arena_bytes {report['memory']['chosen']['arena_bytes']} != "
           f"descriptor {arenas}")
    offset, workspace = descriptor_workspace(host_source)
    expect(report["memory"]["chosen"]["gemm_workspace"] == workspace,
           f"gemm_workspace {report['memory']['chosen']['gemm_workspace']} "
           f"!= descriptor {workspace}")
    expect(offset % 256 == 0, f"GEMM workspace offset {offset} % 256 != 0")
    expect(workspace == 0 or offset + workspace <= arenas[3],
           "the GEMM workspace overflows the activation arena")

    kernels = report["kernels"]
    expect(kernels, "no kernels")
    step = report["step"]
    expect(step["kernels"] == len(kernels), "step kernel count")
    for key in ("flops", "bytes_read", "bytes_written", "bytes"):
        expect(step[key] == sum(k[key] for k in kernels),
               f"step {key} is not the sum over kernels")
    gpu = report["gpu"]
    total = 0.0
    for k in kernels:
        expect(k["bytes"] == k["bytes_read"] + k["bytes_written"] > 0,
               f"{k['name']}: bytes")
        expect(k["phase"] in ("forward", "backward", "optimizer", "other"),
               f"{k['name']}: phase {k['phase']}")
        expect(k["ops"] or k["origin"], f"{k['name']}: no source")
        if k["kind"] == "gemm":
            expect(k["flops"] > 0 and k["flops"] % 2 == 0,
                   f"gemm flops {k['flops']}")
        memory = k["bytes"] / (gpu["bandwidth_gbs"] * 1e9)
        candidates = [max(k["flops"] / (peak * 1e12), memory)
                      for peak in (gpu["half_tensor_tflops"],
                                   gpu["fp8_tensor_tflops"],
                                   gpu["fp32_tflops"]) if peak > 0]
        expect(any(math.isclose(k["bound_seconds"], c, rel_tol=1e-9)
                   for c in candidates),
               f"{k['name']}: bound {k['bound_seconds']} is no roofline")
        total += k["bound_seconds"]
    expect(math.isclose(step["bound_seconds"], total, rel_tol=1e-9),
           "step bound is not the sum of the kernels' bounds")
    phases = {k["phase"] for k in kernels}
    expect({"forward", "backward", "optimizer"} <= phases,
           f"phases {sorted(phases)}")
    print(f"ok: {len(kernels)} kernels, {step['flops']} FLOPs, "
          f"{step['bytes']} bytes, arenas {arenas}, GEMM workspace "
          f"{workspace} at {offset}")


if __name__ == "__main__":
    main()
