"""Build (or reuse) the reference OpenTelemetry Collector used by the integration tests.

The Collector is compiled from the official Go modules at one pinned release. We generate the same
three files the official builder (``go.opentelemetry.io/collector/cmd/builder``) would generate —
``go.mod``, ``main.go``, ``components.go`` — and run ``go build -mod=mod`` ourselves: that skips
compiling the builder, and (unlike ``go mod tidy``) downloads only the modules the binary needs,
about 1 GB instead of 1.8 GB. The component list lives in Python, next to the tests.

The binary is cached outside the repository, keyed by the pinned module versions and the Go
version, so only the first run on a machine pays for the build. A file lock serialises concurrent
builders (several pytest workers, or a test run racing ``scripts/build-collector``).

Run ``python tests/collector/build.py`` to build and print the binary's path.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence

# contrib v0.161.0 is the newest release whose loadbalancingexporter the module proxy serves
# (v0.162.0 and later answer 403 there). Core modules come in two trains: v0.x (beta) and
# v1.x (stable); v0.161.0 pairs with v1.67.0.
COLLECTOR_RELEASE = "v0.159.0"
CORE_STABLE_RELEASE = "v1.65.0"

CORE = "go.opentelemetry.io/collector"
CONTRIB = "github.com/open-telemetry/opentelemetry-collector-contrib"

# The oldest Go the pinned modules accept (their go.mod files say `go 1.26.0`).
MIN_GO = (1, 26)

# How long a cold build may take before we give up: ~1 GB of module downloads, then ~1,400
# packages to compile (356 s of CPU). Measured cold on a shared 2-core machine: 8m23s wall while
# other jobs left us 0.7 of a core; on two idle cores that is about 4-5 minutes. Later runs reuse
# the cached binary (a fraction of a second), or the Go build cache (seconds).
BUILD_TIMEOUT_SECONDS = float(os.environ.get("SPANASSERT_COLLECTOR_BUILD_TIMEOUT", "900"))


class Component(NamedTuple):
    kind: str  # receiver | exporter | processor | provider | telemetry
    module: str
    version: str
    import_path: str
    alias: str


def _component(kind: str, module: str, version: str, import_path: str = "") -> Component:
    path = import_path or module
    return Component(kind, module, version, path, path.rsplit("/", 1)[-1])


COMPONENTS: Sequence[Component] = (
    _component("receiver", f"{CORE}/receiver/otlpreceiver", COLLECTOR_RELEASE),
    _component("exporter", f"{CORE}/exporter/otlpexporter", COLLECTOR_RELEASE),
    _component("exporter", f"{CORE}/exporter/otlphttpexporter", COLLECTOR_RELEASE),
    _component("exporter", f"{CORE}/exporter/debugexporter", COLLECTOR_RELEASE),
    _component("exporter", f"{CONTRIB}/exporter/fileexporter", COLLECTOR_RELEASE),
    _component("exporter", f"{CONTRIB}/exporter/loadbalancingexporter", COLLECTOR_RELEASE),
    # Only so a test can prove how the violation counter is named on a Prometheus scrape, which
    # is what collector-config/alerts/ depends on.
    _component("exporter", f"{CONTRIB}/exporter/prometheusexporter", COLLECTOR_RELEASE),
    _component("processor", f"{CORE}/processor/batchprocessor", COLLECTOR_RELEASE),
    _component("processor", f"{CONTRIB}/processor/groupbytraceprocessor", COLLECTOR_RELEASE),
    _component("provider", f"{CORE}/confmap/provider/envprovider", CORE_STABLE_RELEASE),
    _component("provider", f"{CORE}/confmap/provider/fileprovider", CORE_STABLE_RELEASE),
    _component("provider", f"{CORE}/confmap/provider/yamlprovider", CORE_STABLE_RELEASE),
    _component(
        "telemetry",
        f"{CORE}/service",
        COLLECTOR_RELEASE,
        f"{CORE}/service/telemetry/otelconftelemetry",
    ),
    _component("otelcol", f"{CORE}/otelcol", COLLECTOR_RELEASE),
)


class GoNotFoundError(RuntimeError):
    """No usable Go toolchain: the Collector cannot be built on this machine."""


class CollectorBuildError(RuntimeError):
    """``go`` ran but did not produce a Collector binary."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def find_go() -> str:
    """The ``go`` executable: ``$SPANASSERT_GO`` if set (and then only that), else ``PATH``, else
    the usual install place."""
    explicit = os.environ.get("SPANASSERT_GO")
    candidates = [explicit] if explicit else [shutil.which("go") or "", "/usr/local/go/bin/go"]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    if explicit:
        raise GoNotFoundError(f"SPANASSERT_GO={explicit} is not an executable file")
    raise GoNotFoundError(
        "no `go` on PATH and no /usr/local/go/bin/go; install Go "
        f">= {MIN_GO[0]}.{MIN_GO[1]} from https://go.dev/dl/ or point SPANASSERT_GO at it"
    )


def go_version(go: str) -> str:
    """The toolchain version, e.g. ``go1.26.8``; part of the cache key."""
    out = subprocess.run(
        [go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60, check=False
    )
    version = out.stdout.strip()
    if out.returncode != 0 or not version.startswith("go"):
        raise GoNotFoundError(f"`{go} env GOVERSION` failed: {out.stderr.strip() or out.stdout.strip()}")
    numbers = version[2:].split(".")
    try:
        major_minor = (int(numbers[0]), int(numbers[1].split("rc")[0].split("beta")[0]))
    except (IndexError, ValueError):
        return version  # a devel toolchain: let `go build` decide
    if major_minor < MIN_GO:
        raise GoNotFoundError(
            f"{go} is {version}; the Collector {COLLECTOR_RELEASE} modules need Go >= "
            f"{MIN_GO[0]}.{MIN_GO[1]} (set SPANASSERT_GO to a newer toolchain)"
        )
    return version


def cache_dir() -> Path:
    configured = os.environ.get("SPANASSERT_COLLECTOR_CACHE")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "spanassert" / "collector"


def build_key(goversion: str) -> str:
    """Hash of everything that changes the binary: generated sources (so every pinned module
    version), Go version, platform and link flags."""
    digest = hashlib.sha256()
    for part in [goversion, sys.platform, os.uname().machine, "-trimpath -ldflags=-s -w"]:
        digest.update(part.encode() + b"\n")
    for name, text in sorted(generated_sources().items()):
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()[:16]


def binary_path(goversion: str) -> Path:
    return cache_dir() / f"otelcol-{build_key(goversion)}"


def _factory_lines(kind: str) -> str:
    return "".join(f"\t\t{c.alias}.NewFactory(),\n" for c in COMPONENTS if c.kind == kind)


def _module_map(kind: str) -> str:
    # Feeds `otelcol-spanassert components`, which then names each component's Go module.
    return "".join(
        f'\t\t{c.alias}.NewFactory().Type(): "{c.module} {c.version}",\n'
        for c in COMPONENTS
        if c.kind == kind
    )


def generated_sources() -> Dict[str, str]:
    """The build directory's files, shaped like the official builder's templates."""
    requires = "".join(
        f"\t{m} {v}\n" for m, v in sorted({(c.module, c.version) for c in COMPONENTS})
    )
    go_mod = f"module spanassert.test/otelcol\n\ngo {MIN_GO[0]}.{MIN_GO[1]}.0\n\nrequire (\n{requires})\n"

    imports = "".join(
        f'\t{c.alias} "{c.import_path}"\n'
        for c in COMPONENTS
        if c.kind in ("receiver", "exporter", "processor", "telemetry")
    )
    provider_imports = "".join(
        f'\t{c.alias} "{c.import_path}"\n' for c in COMPONENTS if c.kind == "provider"
    )
    telemetry = next(c for c in COMPONENTS if c.kind == "telemetry")
    components_go = f"""// Code generated by tests/collector/build.py. DO NOT EDIT.

package main

import (
\t"go.opentelemetry.io/collector/component"
\t"go.opentelemetry.io/collector/exporter"
\t"go.opentelemetry.io/collector/otelcol"
\t"go.opentelemetry.io/collector/processor"
\t"go.opentelemetry.io/collector/receiver"
{imports})

func components() (otelcol.Factories, error) {{
\tvar err error
\tfactories := otelcol.Factories{{Telemetry: {telemetry.alias}.NewFactory()}}
\tif factories.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](
{_factory_lines("receiver")}\t); err != nil {{
\t\treturn otelcol.Factories{{}}, err
\t}}
\tfactories.ReceiverModules = map[component.Type]string{{
{_module_map("receiver")}\t}}
\tif factories.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](
{_factory_lines("exporter")}\t); err != nil {{
\t\treturn otelcol.Factories{{}}, err
\t}}
\tfactories.ExporterModules = map[component.Type]string{{
{_module_map("exporter")}\t}}
\tif factories.Processors, err = otelcol.MakeFactoryMap[processor.Factory](
{_factory_lines("processor")}\t); err != nil {{
\t\treturn otelcol.Factories{{}}, err
\t}}
\tfactories.ProcessorModules = map[component.Type]string{{
{_module_map("processor")}\t}}
\treturn factories, nil
}}
"""
    main_go = f"""// Code generated by tests/collector/build.py. DO NOT EDIT.

// Program otelcol-spanassert is the reference Collector for spanassert's integration tests.
package main

import (
\t"os"

\t"go.opentelemetry.io/collector/component"
\t"go.opentelemetry.io/collector/confmap"
\t"go.opentelemetry.io/collector/otelcol"
{provider_imports})

func main() {{
\tset := otelcol.CollectorSettings{{
\t\tBuildInfo: component.BuildInfo{{
\t\t\tCommand:     "otelcol-spanassert",
\t\t\tDescription: "OpenTelemetry Collector for spanassert integration tests",
\t\t\tVersion:     "{COLLECTOR_RELEASE.lstrip("v")}",
\t\t}},
\t\tFactories: components,
\t\tConfigProviderSettings: otelcol.ConfigProviderSettings{{
\t\t\tResolverSettings: confmap.ResolverSettings{{
\t\t\t\tProviderFactories: []confmap.ProviderFactory{{
{_factory_lines("provider").replace(chr(9) * 2, chr(9) * 5)}\t\t\t\t}},
\t\t\t}},
\t\t}},
\t}}
\t// cobra already printed the error.
\tif err := otelcol.NewCommand(set).Execute(); err != nil {{
\t\tos.Exit(1)
\t}}
}}
"""
    return {"go.mod": go_mod, "components.go": components_go, "main.go": main_go}


def _run(cmd: List[str], cwd: Path, env: Dict[str, str], deadline: float, log: List[str]) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise CollectorBuildError(f"build exceeded {BUILD_TIMEOUT_SECONDS:.0f}s", "\n".join(log))
    log.append("$ " + " ".join(cmd))
    # A session of its own, so a timeout stops the compiler processes `go` spawned, too.
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=remaining)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        log.append(output or "")
        raise CollectorBuildError(
            f"`{' '.join(cmd)}` still running when the {BUILD_TIMEOUT_SECONDS:.0f}s build budget ran "
            "out (raise SPANASSERT_COLLECTOR_BUILD_TIMEOUT on slow machines)",
            "\n".join(log),
        ) from None
    log.append(output or "")
    if proc.returncode != 0:
        raise CollectorBuildError(
            f"`{' '.join(cmd)}` exited with status {proc.returncode}", "\n".join(log)
        )


def build(go: str, target: Path, timeout: float = BUILD_TIMEOUT_SECONDS) -> float:
    """Compile the Collector into ``target``; returns the seconds it took."""
    started = time.monotonic()
    deadline = started + timeout
    env = dict(os.environ)
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=mod").strip()  # fill go.sum as it resolves
    env["CGO_ENABLED"] = "0"  # a static binary; no C toolchain needed
    env["GOTOOLCHAIN"] = "local"  # never download another Go behind our back
    log: List[str] = []
    with tempfile.TemporaryDirectory(prefix="spanassert-otelcol-") as tmp:
        workdir = Path(tmp)
        for name, text in generated_sources().items():
            (workdir / name).write_text(text, encoding="utf-8")
        partial = target.with_name(target.name + f".partial-{os.getpid()}")
        try:
            _run(
                [go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(partial), "."],
                workdir,
                env,
                deadline,
                log,
            )
            os.replace(partial, target)  # atomic: readers never see half a binary
        finally:
            if partial.exists():
                partial.unlink()
    return time.monotonic() - started


def ensure_collector(timeout: float = BUILD_TIMEOUT_SECONDS) -> Path:
    """The cached Collector binary, built first if needed. Safe to call from parallel processes."""
    go = find_go()
    target = binary_path(go_version(go))
    if os.access(target, os.X_OK):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the loser waits, then finds the winner's binary
        if not os.access(target, os.X_OK):
            seconds = build(go, target, timeout)
            sys.stderr.write(f"built OpenTelemetry Collector {COLLECTOR_RELEASE} in {seconds:.0f}s: {target}\n")
    return target


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        print(ensure_collector())
    except GoNotFoundError as exc:
        print(f"error: Go toolchain not found: {exc}", file=sys.stderr)
        return 2
    except CollectorBuildError as exc:
        print(f"error: Collector build failed: {exc}\n{exc.tail()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
