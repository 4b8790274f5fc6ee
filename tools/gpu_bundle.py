#!/usr/bin/python3
"""The `gpu` tests and the GPU benchmarks for a GPU machine without the
MLIR toolchain: built here, run there.

  tools/gpu_bundle.py pack DIR [--build-dir=build] [--arch=sm_90] [--bench]
      (here, after a build) copies every program the `gpu`-labelled tests
      run into DIR/bin and writes their commands to DIR/tests.json, with
      paths into the build replaced by the bundle's and paths into the
      source tree by the checkout's; with --bench, also builds the
      programs of tools/bench/gpu_step.py (with and without --attention)
      and gpu_resnet50.py into DIR/bench (their --build-only).
  tools/gpu_bundle.py run DIR [--jobs=4] [--log-dir=DIR]
      (there, from a checkout of the same commit) runs those tests, a few
      at a time, each under its ctest TIMEOUT, and prints one line a test
      and a summary; exit 1 if any failed. A test's output goes to
      <log-dir>/<test>.log.

The data-parallel `gpu` tests are left out: they compile with `mpc` and
launch with `mpirun`, which such a machine lacks.
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pack(args):
    build = os.path.abspath(args.build_dir)
    listing = subprocess.run(["ctest", "--show-only=json-v1", "-L", "gpu"],
                             cwd=build, check=True, capture_output=True,
                             text=True).stdout
    os.makedirs(os.path.join(args.dir, "bin"), exist_ok=True)
    tests = []
    for test in json.loads(listing)["tests"]:
        properties = {p["name"]: p["value"] for p in test["properties"]}
        if "data_parallel" in properties.get("LABELS", []):
            continue
        command = []
        for index, arg in enumerate(test["command"]):
            if index == 0 and os.path.basename(arg).startswith("python3"):
                command.append("{python}")
            elif arg.startswith(build + "/") and os.path.isfile(arg):
                name = os.path.basename(arg)
                shutil.copy2(arg, os.path.join(args.dir, "bin", name))
                command.append("{bundle}/bin/" + name)
            elif arg.startswith(REPO + "/"):
                command.append("{repo}/" + os.path.relpath(arg, REPO))
            else:
                command.append(arg)
        environment = dict(item.split("=", 1)
                           for item in properties.get("ENVIRONMENT", []))
        tests.append({"name": test["name"], "command": command,
                      "environment": environment,
                      "timeout": properties.get("TIMEOUT", 300),
                      "skip_code": properties.get("SKIP_RETURN_CODE")})
    with open(os.path.join(args.dir, "tests.json"), "w") as f:
        json.dump(tests, f, indent=1)
    print(f"{len(tests)} tests into {args.dir}")
    if args.bench:
        bench = os.path.join(os.path.abspath(args.dir), "bench")
        for script, *options in (("gpu_step.py",),
                                 ("gpu_step.py", "--attention"),
                                 ("gpu_resnet50.py",)):
            subprocess.run([sys.executable,
                            os.path.join(REPO, "tools", "bench", script),
                            f"--build-dir={build}", f"--build-only={bench}",
                            f"--arch={args.arch}", *options], check=True)


def run(args):
    bundle = os.path.abspath(args.dir)
    with open(os.path.join(bundle, "tests.json")) as f:
        tests = json.load(f)
    log_dir = args.log_dir or os.path.join(bundle, "logs")
    os.makedirs(log_dir, exist_ok=True)

    def one(test):
        command = [arg.replace("{python}", sys.executable)
                   .replace("{bundle}", bundle).replace("{repo}", REPO)
                   for arg in test["command"]]
        env = dict(os.environ, **test["environment"])
        start = time.monotonic()
        try:
            result = subprocess.run(command, env=env, cwd=bundle,
                                    capture_output=True, text=True,
                                    timeout=test["timeout"])
            code, output = result.returncode, result.stdout + result.stderr
        except subprocess.TimeoutExpired as expired:
            code = "timeout"
            output = ((expired.stdout or b"").decode(errors="replace") +
                      (expired.stderr or b"").decode(errors="replace"))
        seconds = time.monotonic() - start
        with open(os.path.join(log_dir, test["name"] + ".log"), "w") as f:
            f.write(" ".join(command) + "\n" + output)
        if code == 0:
            verdict = "passed"
        elif code == test["skip_code"]:
            verdict = "skipped"
        else:
            verdict = f"FAILED ({code})"
        return test["name"], verdict, seconds, output

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for name, verdict, seconds, output in pool.map(one, tests):
            print(f"{name:<50} {verdict:<14} {seconds:6.1f} s", flush=True)
            if verdict.startswith("FAILED"):
                failed += 1
                print("    " + "\n    ".join(output.splitlines()[-8:]))
    print(f"{len(tests) - failed}/{len(tests)} gpu tests did not fail")
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="verb", required=True)
    packing = commands.add_parser("pack")
    packing.add_argument("dir")
    packing.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    packing.add_argument("--arch", default="sm_90")
    packing.add_argument("--bench", action="store_true")
    running = commands.add_parser("run")
    running.add_argument("dir")
    running.add_argument("--jobs", type=int, default=4)
    running.add_argument("--log-dir")
    args = parser.parse_args()
    if args.verb == "pack":
        pack(args)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
