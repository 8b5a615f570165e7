#!/usr/bin/env python3
"""Release archives and the ACP registry entry (run by scripts/dist.sh).

  dist.py pack --dist DIR --version V --target T --binary BIN FILE...
      DIR/crucible-agent-V-T.tar.gz (.zip for windows-*) with the binary
      (crucible-agent, or crucible-agent.exe) and FILEs at the root, and
      its .sha256 beside it. Byte-for-byte reproducible: sorted entries,
      owner 0, mtimes from SOURCE_DATE_EPOCH (else the last commit).
  dist.py manifest --dist DIR --version V --repository URL --base-url URL ...
      DIR/agent.json listing every archive of version V in DIR.
  dist.py check --dist DIR --version V [--wine] [--auth require|warn]
      What the registry's CI checks (agent.schema.json and the rules of its
      build_registry.py and verify_agents.py, vendored in
      tests/fixtures/registry/), plus: checksums match, each archive holds
      exactly the binary, README.md and LICENSE, the Linux x86_64 binary is
      statically linked and answers `initialize` as the registry's auth
      check asks it, and (--wine) the Windows one does under Wine.
      Needs the `jsonschema` package (dist.sh check provides a venv).

Standard library only, except `check`'s jsonschema.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

NAME = "crucible-agent"
ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "registry"
# In the registry's order; the os part is what "every OS" counts.
TARGETS = [
    "darwin-aarch64",
    "darwin-x86_64",
    "linux-aarch64",
    "linux-x86_64",
    "windows-aarch64",
    "windows-x86_64",
]
REJECTED_EXTENSIONS = (".dmg", ".pkg", ".deb", ".rpm", ".msi", ".appimage")
ICON_COLORS = {"currentcolor", "none", "inherit"}


def is_windows(target: str) -> bool:
    return target.startswith("windows-")


def archive_name(version: str, target: str) -> str:
    ext = "zip" if is_windows(target) else "tar.gz"
    return f"{NAME}-{version}-{target}.{ext}"


def binary_name(target: str) -> str:
    return f"{NAME}.exe" if is_windows(target) else NAME


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_date() -> int:
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return int(os.environ["SOURCE_DATE_EPOCH"])
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%ct"], cwd=ROOT, capture_output=True, text=True
        )
        return int(out.stdout.strip())
    except (OSError, ValueError):
        return int(time.time())


# ---------------------------------------------------------------- pack


def pack(args) -> None:
    dist = Path(args.dist)
    dist.mkdir(parents=True, exist_ok=True)
    members = [(binary_name(args.target), Path(args.binary), 0o755)]
    members += [(Path(f).name, Path(f), 0o644) for f in args.files]
    mtime = source_date()
    out = dist / archive_name(args.version, args.target)
    tmp = out.with_name(out.name + ".tmp")
    if is_windows(args.target):
        write_zip(tmp, members, mtime)
    else:
        write_tar_gz(tmp, members, mtime)
    tmp.replace(out)
    digest = sha256_of(out)
    (dist / (out.name + ".sha256")).write_text(f"{digest}  {out.name}\n")
    print(f"dist: {out} ({out.stat().st_size} bytes, sha256 {digest})", file=sys.stderr)


def write_tar_gz(path: Path, members, mtime: int) -> None:
    with path.open("wb") as raw, gzip.GzipFile(
        filename="", mode="wb", fileobj=raw, mtime=mtime, compresslevel=9
    ) as gz, tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, src, mode in sorted(members):
            data = src.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, mtime
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))


def write_zip(path: Path, members, mtime: int) -> None:
    stamp = time.gmtime(max(mtime, 315532800))[:6]  # zip dates start in 1980
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, src, mode in sorted(members):
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100000 | mode) << 16
            info.create_system = 3  # Unix, so the mode above is read
            z.writestr(info, src.read_bytes())


# ---------------------------------------------------------------- npm

# Registry target -> npm's process.platform and process.arch.
NPM_PLATFORMS = {
    "darwin-aarch64": ("darwin", "arm64"),
    "darwin-x86_64": ("darwin", "x64"),
    "linux-aarch64": ("linux", "arm64"),
    "linux-x86_64": ("linux", "x64"),
    "windows-aarch64": ("win32", "arm64"),
    "windows-x86_64": ("win32", "x64"),
}
NPM_LAUNCHER = ROOT / "scripts" / "dist" / "npm" / "crucible-agent.js"


def npm_package_name(target: str) -> str:
    os_name, cpu = NPM_PLATFORMS[target]
    return f"{NAME}-{os_name}-{cpu}"


def npm_tarball(version: str, package: str) -> str:
    return f"{package}-{version}.tgz"


def package_json_common(args) -> dict:
    return {
        "version": args.version,
        "license": args.license,
        "repository": {"type": "git", "url": f"git+{args.repository}.git"},
        "homepage": args.repository,
    }


def npm_pack(staging: Path, out_dir: Path) -> Path:
    """`npm pack` of staging into out_dir; returns the tarball."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # The full path: on Windows npm is npm.cmd, which only a path runs.
    done = subprocess.run(
        [shutil.which("npm") or "npm", "pack", "--json", "--pack-destination", str(out_dir.resolve())],
        cwd=staging, capture_output=True, text=True,
    )
    if done.returncode != 0:
        sys.exit(f"dist: npm pack failed in {staging}:\n{done.stderr}")
    tarball = out_dir / json.loads(done.stdout)[0]["filename"]
    print(f"dist: {tarball} ({tarball.stat().st_size} bytes)", file=sys.stderr)
    return tarball


def npm(args) -> None:
    """The npm packages: one per platform with its binary (--target), or the launcher."""
    out_dir = Path(args.dist) / "npm"
    with tempfile.TemporaryDirectory(prefix="dist-npm-") as tmp:
        staging = Path(tmp)
        (staging / "bin").mkdir()
        shutil.copy(ROOT / "LICENSE", staging / "LICENSE")
        if args.target:
            os_name, cpu = NPM_PLATFORMS[args.target]
            package = npm_package_name(args.target)
            exe = staging / "bin" / binary_name(args.target)
            shutil.copy(args.binary, exe)
            exe.chmod(0o755)
            (staging / "README.md").write_text(
                f"# {package}\n\nThe `{NAME}` binary for {os_name} {cpu}. Install "
                f"[`{NAME}`](https://www.npmjs.com/package/{NAME}), which runs it: `npx {NAME}`.\n"
            )
            manifest = {
                "name": package,
                **package_json_common(args),
                "description": f"The {NAME} binary for {os_name} {cpu} (the {NAME} package runs it)",
                "os": [os_name],
                "cpu": [cpu],
                "files": ["bin/"],
                "preferUnplugged": True,
            }
        else:
            package = NAME
            shutil.copy(NPM_LAUNCHER, staging / "bin" / f"{NAME}.js")
            (staging / "bin" / f"{NAME}.js").chmod(0o755)
            shutil.copy(ROOT / "README.md", staging / "README.md")
            manifest = {
                "name": NAME,
                **package_json_common(args),
                "description": args.description,
                "keywords": ["acp", "agent-client-protocol", "agent", "llm", "crucible"],
                "bin": {NAME: f"bin/{NAME}.js"},
                "files": ["bin/"],
                "engines": {"node": ">=16"},
                # Every platform of the release; npm installs only the one
                # whose os and cpu match.
                "optionalDependencies": {npm_package_name(t): args.version for t in TARGETS},
            }
        (staging / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
        tarball = npm_pack(staging, out_dir)
        want = out_dir / npm_tarball(args.version, package)
        if tarball != want:
            tarball.replace(want)


# ---------------------------------------------------------------- wheel

# Registry target -> the wheel's platform tags. The Linux binaries are static
# (musl, no shared library at all), so every manylinux and musllinux
# system runs them.
WHEEL_PLATFORMS = {
    "darwin-aarch64": ["macosx_11_0_arm64"],
    "darwin-x86_64": ["macosx_10_12_x86_64"],
    "linux-aarch64": ["manylinux_2_17_aarch64", "manylinux2014_aarch64", "musllinux_1_1_aarch64"],
    "linux-x86_64": ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "musllinux_1_1_x86_64"],
    "windows-aarch64": ["win_arm64"],
    "windows-x86_64": ["win_amd64"],
}
WHEEL_NAME = NAME.replace("-", "_")


def wheel_name(version: str, target: str) -> str:
    return f"{WHEEL_NAME}-{version}-py3-none-{'.'.join(WHEEL_PLATFORMS[target])}.whl"


def record_hash(data: bytes) -> str:
    import base64

    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel(args) -> None:
    """A wheel whose one script is the binary (as ruff's and uv's): pip and uv
    put it on PATH as `crucible-agent`."""
    out_dir = Path(args.dist) / "python"
    out_dir.mkdir(parents=True, exist_ok=True)
    data = f"{WHEEL_NAME}-{args.version}.data"
    info = f"{WHEEL_NAME}-{args.version}.dist-info"
    metadata = "\n".join(
        [
            "Metadata-Version: 2.1",
            f"Name: {NAME}",
            f"Version: {args.version}",
            f"Summary: {args.description}",
            f"License: {args.license}",
            f"Project-URL: Repository, {args.repository}",
            "Keywords: acp,agent-client-protocol,agent,llm",
            "Classifier: Environment :: Console",
            "Classifier: Programming Language :: Rust",
            "Requires-Python: >=3.7",
            "Description-Content-Type: text/markdown",
            "",
            (ROOT / "README.md").read_text(),
        ]
    )
    wheel_file = "\n".join(
        ["Wheel-Version: 1.0", f"Generator: {NAME} scripts/dist.py", "Root-Is-Purelib: false"]
        + [f"Tag: py3-none-{tag}" for tag in WHEEL_PLATFORMS[args.target]]
        + [""]
    )
    members = [
        (f"{data}/scripts/{binary_name(args.target)}", Path(args.binary).read_bytes(), 0o755),
        (f"{info}/METADATA", metadata.encode(), 0o644),
        (f"{info}/WHEEL", wheel_file.encode(), 0o644),
        (f"{info}/licenses/LICENSE", (ROOT / "LICENSE").read_bytes(), 0o644),
    ]
    record = "".join(f"{name},{record_hash(body)},{len(body)}\n" for name, body, _ in members)
    record += f"{info}/RECORD,,\n"
    members.append((f"{info}/RECORD", record.encode(), 0o644))
    stamp = time.gmtime(max(source_date(), 315532800))[:6]
    out = out_dir / wheel_name(args.version, args.target)
    tmp = out.with_name(out.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, body, mode in members:  # RECORD last, as the spec asks
            zinfo = zipfile.ZipInfo(name, date_time=stamp)
            zinfo.compress_type = zipfile.ZIP_DEFLATED
            zinfo.external_attr = (0o100000 | mode) << 16
            zinfo.create_system = 3
            z.writestr(zinfo, body)
    tmp.replace(out)
    print(f"dist: {out} ({out.stat().st_size} bytes)", file=sys.stderr)


# ---------------------------------------------------------------- manifest


def built_archives(dist: Path, version: str) -> dict:
    return {t: dist / archive_name(version, t) for t in TARGETS if (dist / archive_name(version, t)).is_file()}


def manifest(args) -> None:
    dist = Path(args.dist)
    archives = built_archives(dist, args.version)
    if not archives:
        sys.exit(f"dist: no archive of version {args.version} in {dist}; build one first")
    binary = {}
    for target, path in archives.items():
        binary[target] = {
            "archive": f"{args.base_url.rstrip('/')}/{path.name}",
            "cmd": f"./{binary_name(target)}",
            "sha256": sha256_of(path),
        }
    entry = {
        "id": NAME,
        "name": "Crucible",
        "version": args.version,
        "description": args.description,
        "repository": args.repository,
        "authors": ["the crucible-agent authors"],
        "license": args.license,
        "distribution": {
            "binary": binary,
            # The npm launcher and the wheels of the same release (dist.py npm, wheel).
            "npx": {"package": f"{NAME}@{args.version}"},
            "uvx": {"package": f"{NAME}@{args.version}"},
        },
    }
    (dist / "agent.json").write_text(json.dumps(entry, indent=2) + "\n")
    missing = sorted({t.split("-")[0] for t in TARGETS} - {t.split("-")[0] for t in binary})
    if missing:
        print(
            f"dist: agent.json lists {', '.join(binary)}; the registry wants every OS, "
            f"still missing: {', '.join(missing)} (see scripts/dist.sh)",
            file=sys.stderr,
        )


# ---------------------------------------------------------------- check


class Problems:
    def __init__(self):
        self.errors = []

    def fail(self, what: str) -> None:
        self.errors.append(what)
        print(f"  FAIL {what}", file=sys.stderr)

    def ok(self, what: str) -> None:
        print(f"  ok   {what}", file=sys.stderr)

    def expect(self, cond: bool, what: str, why: str = "") -> bool:
        if cond:
            self.ok(what)
        else:
            self.fail(f"{what}: {why}" if why else what)
        return cond


def check_schema(entry: dict, p: Problems) -> None:
    import jsonschema

    schema = json.loads((FIXTURES / "agent.schema.json").read_text())
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(entry), key=lambda e: list(e.absolute_path))
    for e in errors:
        p.fail(f"schema: at {'.'.join(map(str, e.absolute_path)) or 'root'}: {e.message}")
    if not errors:
        p.ok("agent.json validates against the registry's agent.schema.json")


def check_rules(entry: dict, version: str, p: Problems) -> None:
    """The registry's build_registry.py rules beyond the schema."""
    p.expect(entry.get("version") == version, f"version is {version}", f"agent.json says {entry.get('version')}")
    parts = str(entry.get("version", "")).split(".")
    p.expect(len(parts) >= 3 and all(x.isdigit() for x in parts[:3]), "version is x.y.z")
    binary = entry.get("distribution", {}).get("binary", {})
    for target, spec in binary.items():
        url = spec.get("archive", "")
        p.expect(not url.lower().endswith(REJECTED_EXTENSIONS), f"{target}: archive format accepted", url)
        p.expect("/latest/" not in url, f"{target}: URL names a version, not latest", url)
        m = re.search(r"/(?:download|releases)/v?([\d.]+)/", url)
        if m:
            p.expect(m.group(1) == version, f"{target}: URL's version is {version}", url)
        p.expect(spec.get("cmd") == f"./{binary_name(target)}", f"{target}: cmd is ./{binary_name(target)}")
    for kind in ("npx", "uvx"):
        spec = entry.get("distribution", {}).get(kind, {})
        p.expect(
            spec.get("package") == f"{NAME}@{version}",
            f"{kind}: package is {NAME}@{version}",
            f"agent.json says {spec.get('package')}",
        )
    oses = {t.split("-")[0] for t in binary}
    missing = {"darwin", "linux", "windows"} - oses
    if missing:
        # The registry warns (and wants all three): say so, not fail, since
        # macOS archives come from a Mac.
        print(f"  note agent.json has no build for {', '.join(sorted(missing))} yet", file=sys.stderr)


def check_icon(path: Path, p: Problems) -> None:
    """build_registry.py's validate_icon: 16x16, square, currentColor only, no comments."""
    if not p.expect(path.is_file(), "icon.svg is present"):
        return
    text = path.read_text()
    p.expect("<!--" not in text, "icon.svg has no comments")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        p.fail(f"icon.svg is not XML: {e}")
        return
    p.expect(root.tag.split("}")[-1] == "svg", "icon.svg's root is <svg>")
    w, h = root.get("width"), root.get("height")
    size = None
    if w and h:
        size = (float(re.sub(r"[a-z%]+$", "", w)), float(re.sub(r"[a-z%]+$", "", h)))
    elif root.get("viewBox"):
        vb = root.get("viewBox").split()
        size = (float(vb[2]), float(vb[3]))
    p.expect(size == (16.0, 16.0), "icon.svg is 16x16", f"got {size}")
    colors, bad = set(), []
    for elem in root.iter():
        values = [elem.get("fill"), elem.get("stroke")]
        for prop in (elem.get("style") or "").split(";"):
            if ":" in prop and prop.split(":")[0].strip().lower() in ("fill", "stroke"):
                values.append(prop.split(":", 1)[1])
        if elem.tag.split("}")[-1] == "style" and elem.text:
            values += re.findall(r"\b(?:fill|stroke)\s*:\s*([^;}\s]+)", elem.text, re.I)
        for v in filter(None, values):
            v = v.strip().lower()
            (colors.add(v) if v in ICON_COLORS else bad.append(v))
    p.expect(not bad, "icon.svg uses no hard-coded colour", ", ".join(bad))
    p.expect("currentcolor" in colors, "icon.svg uses currentColor")


def read_members(path: Path) -> dict:
    """name -> (mode, bytes) of every file in a .tar.gz or .zip."""
    out = {}
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                out[info.filename] = ((info.external_attr >> 16) & 0o777, z.read(info))
    else:
        with tarfile.open(path, "r:gz") as tar:
            for info in tar.getmembers():
                f = tar.extractfile(info)
                out[info.name] = (info.mode, f.read() if f else b"")
    return out


def check_archive(dist: Path, target: str, spec: dict, p: Problems):
    """Returns the extracted directory, or None."""
    path = dist / spec["archive"].rsplit("/", 1)[-1]
    if not p.expect(path.is_file(), f"{target}: {path.name} is in {dist}"):
        return None
    digest = sha256_of(path)
    p.expect(spec.get("sha256") == digest, f"{target}: agent.json's sha256 is the archive's")
    side = dist / (path.name + ".sha256")
    p.expect(
        side.is_file() and side.read_text().split() == [digest, path.name],
        f"{target}: {side.name} matches",
    )
    members = read_members(path)
    want = {binary_name(target), "README.md", "LICENSE"}
    p.expect(set(members) == want, f"{target}: archive holds {', '.join(sorted(want))}", f"has {sorted(members)}")
    for name, src in (("README.md", ROOT / "README.md"), ("LICENSE", ROOT / "LICENSE")):
        if name in members:
            p.expect(members[name][1] == src.read_bytes(), f"{target}: {name} is the repository's")
    exe = members.get(binary_name(target))
    if not exe:
        return None
    if not is_windows(target):
        p.expect(exe[0] & 0o111 == 0o111, f"{target}: binary is executable", oct(exe[0]))
    out = Path(tempfile.mkdtemp(prefix=f"dist-{target}-"))
    for name, (mode, data) in members.items():
        (out / name).write_bytes(data)
        (out / name).chmod(mode or 0o644)
    return out


# The registry's auth check (verify_agents.py --auth-check, client.py): this
# initialize, an isolated HOME, a minimal environment, the archive as cwd.
REGISTRY_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": 1,
        "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
        "clientCapabilities": {
            "terminal": True,
            "fs": {"readTextFile": True, "writeTextFile": True},
            "_meta": {"terminal_output": True, "terminal-auth": True},
        },
    },
}


def isolated_env(home: Path) -> dict:
    keep = ("PATH", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR", "SYSTEMROOT", "TEMP", "TMP")
    env = {k: v for k in keep if (v := os.environ.get(k))}
    env.update(HOME=str(home), TERM="dumb")
    if platform.system() == "Windows":
        env.update(USERPROFILE=str(home), APPDATA=str(home / "AppData" / "Roaming"),
                   LOCALAPPDATA=str(home / "AppData" / "Local"))
    return env


def initialize(cmd: list, cwd: Path, env: dict, timeout: float = 120) -> dict:
    """Sends the registry's initialize line, returns the first answer (or raises)."""
    line = json.dumps(REGISTRY_INITIALIZE) + "\n"
    done = subprocess.run(cmd, cwd=cwd, env=env, input=line, capture_output=True, text=True, timeout=timeout)
    for out_line in done.stdout.splitlines():
        if out_line.strip():
            return json.loads(out_line)
    raise RuntimeError(f"no answer (exit {done.returncode}); stderr: {done.stderr[-2000:]}")


def check_answer(target: str, answer: dict, auth: str, p: Problems) -> None:
    result = answer.get("result")
    if not p.expect(
        answer.get("id") == 1 and isinstance(result, dict), f"{target}: answers initialize", json.dumps(answer)[:500]
    ):
        return
    p.expect(result.get("protocolVersion") == 1, f"{target}: protocol version 1")
    methods = result.get("authMethods") or []
    # client.py: a method's type is its "type", else its _meta's
    # terminal-auth/agent-auth, else "agent".
    kinds = []
    for m in methods:
        meta = m.get("_meta") or {}
        kinds.append(m.get("type") or ("terminal" if "terminal-auth" in meta else "agent"))
    good = [k for k in kinds if k in ("agent", "terminal")]
    what = f"{target}: authMethods has an agent or terminal method (the registry requires one)"
    if good:
        p.ok(f"{what}: {kinds}")
    elif auth == "warn":
        print(f"  WARN {what}: found {kinds or 'none'}", file=sys.stderr)
    else:
        p.fail(f"{what}: found {kinds or 'none'}")


def check_linux(target: str, extracted: Path, auth: str, p: Problems) -> None:
    exe = extracted / NAME
    described = subprocess.run(["file", "-b", str(exe)], capture_output=True, text=True).stdout.strip()
    p.expect(
        "statically linked" in described or "static-pie linked" in described,
        f"{target}: `file` calls it statically linked",
        described,
    )
    if f"{platform.system()}-{platform.machine()}" != "Linux-x86_64":
        print(f"  note {target}: not run (this is {platform.system()} {platform.machine()})", file=sys.stderr)
        return
    home = Path(tempfile.mkdtemp(prefix="dist-home-"))
    try:
        check_answer(target, initialize([str(exe)], extracted, isolated_env(home)), auth, p)
        # verify_agents.py without --auth-check: run with stdin closed; a
        # clean exit (or still running after 10 s) passes.
        done = subprocess.run(
            [str(exe)], cwd=extracted, env=isolated_env(home), stdin=subprocess.DEVNULL,
            capture_output=True, timeout=10,
        )
        p.expect(done.returncode == 0, f"{target}: exits 0 when stdin is closed", f"exit {done.returncode}")
    except (subprocess.TimeoutExpired, RuntimeError, ValueError) as e:
        p.fail(f"{target}: {e}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


def check_windows(target: str, extracted: Path, auth: str, p: Problems) -> None:
    exe = extracted / f"{NAME}.exe"
    described = subprocess.run(["file", "-b", str(exe)], capture_output=True, text=True).stdout.strip()
    p.expect("PE32+" in described and "x86-64" in described, f"{target}: `file` calls it a PE32+ x86-64 program", described)
    cmd = ["bash", str(ROOT / "scripts" / "cross-check.sh"), "run-windows", str(exe)]
    try:
        check_answer(target, initialize(cmd, ROOT, dict(os.environ), timeout=300), auth, p)
    except (subprocess.TimeoutExpired, RuntimeError, ValueError) as e:
        p.fail(f"{target} under Wine: {e}")


def check_linux_aarch64(target: str, extracted: Path, auth: str, p: Problems) -> None:
    """The aarch64 binary: static, and answering initialize under qemu-aarch64."""
    exe = extracted / NAME
    described = subprocess.run(["file", "-b", str(exe)], capture_output=True, text=True).stdout.strip()
    p.expect("ARM aarch64" in described, f"{target}: `file` calls it an ARM aarch64 program", described)
    p.expect("statically linked" in described, f"{target}: `file` calls it statically linked", described)
    qemu = shutil.which("qemu-aarch64")
    if platform.machine() in ("aarch64", "arm64"):
        cmd = [str(exe)]
    elif qemu:
        cmd = [qemu, str(exe)]
    else:
        p.fail(f"{target}: no qemu-aarch64 to run it (Debian: apt-get install qemu-user)")
        return
    home = Path(tempfile.mkdtemp(prefix="dist-home-"))
    try:
        version = subprocess.run(cmd + ["--version"], capture_output=True, text=True, timeout=120)
        p.expect(
            version.returncode == 0 and NAME in version.stdout,
            f"{target}: `--version` under {'qemu-aarch64' if qemu and cmd[0] == qemu else 'the host'}",
            f"exit {version.returncode}: {version.stdout}{version.stderr}"[:500],
        )
        check_answer(target, initialize(cmd, extracted, isolated_env(home), timeout=300), auth, p)
    except (subprocess.TimeoutExpired, RuntimeError, ValueError) as e:
        p.fail(f"{target}: {e}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


def host_target():
    """The registry target of this machine, if it is one."""
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
    system = {"Darwin": "darwin", "Linux": "linux", "Windows": "windows"}.get(platform.system())
    target = f"{system}-{machine}"
    return target if target in TARGETS else None


def run_installed(what: str, cmd: list, cwd: Path, env: dict, auth: str, p: Problems) -> None:
    """`--version`, then the registry's initialize, through an installed command."""
    try:
        version = subprocess.run(cmd + ["--version"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        p.expect(
            version.returncode == 0 and NAME in version.stdout,
            f"{what}: `--version`",
            f"exit {version.returncode}: {version.stdout}{version.stderr}"[:800],
        )
        check_answer(what, initialize(cmd, cwd, env, timeout=300), auth, p)
    except (subprocess.TimeoutExpired, RuntimeError, ValueError, OSError) as e:
        p.fail(f"{what}: {e}")


def check_npm(dist: Path, version: str, targets: list, auth: str, p: Problems) -> None:
    """The npm packages: one per archive, the launcher naming all six; the
    host's installed offline from the tarballs, run through npx and a global install."""
    import tarfile as tf

    npm_dir = dist / "npm"
    launcher = npm_dir / npm_tarball(version, NAME)
    if not p.expect(launcher.is_file(), f"npm: {launcher.name} is in {npm_dir}"):
        return
    with tf.open(launcher) as tar:
        manifest = json.load(tar.extractfile("package/package.json"))
        names = set(tar.getnames())
    p.expect(manifest.get("version") == version, f"npm: the launcher's version is {version}")
    p.expect(manifest.get("bin") == {NAME: f"bin/{NAME}.js"}, f"npm: the launcher's bin is bin/{NAME}.js")
    p.expect(f"package/bin/{NAME}.js" in names, "npm: the launcher holds its script")
    p.expect(
        manifest.get("optionalDependencies") == {npm_package_name(t): version for t in TARGETS},
        f"npm: the launcher depends on all {len(TARGETS)} platform packages at {version}",
        json.dumps(manifest.get("optionalDependencies")),
    )
    for target in targets:
        tarball = npm_dir / npm_tarball(version, npm_package_name(target))
        if not p.expect(tarball.is_file(), f"npm: {tarball.name} is in {npm_dir}"):
            continue
        with tf.open(tarball) as tar:
            pkg = json.load(tar.extractfile("package/package.json"))
            try:
                exe = tar.getmember(f"package/bin/{binary_name(target)}")
            except KeyError:
                p.fail(f"npm: {tarball.name} has no bin/{binary_name(target)}")
                continue
        os_name, cpu = NPM_PLATFORMS[target]
        p.expect(
            (pkg.get("name"), pkg.get("version"), pkg.get("os"), pkg.get("cpu"))
            == (npm_package_name(target), version, [os_name], [cpu]),
            f"npm: {tarball.name} is {npm_package_name(target)} {version} for os {os_name}, cpu {cpu}",
        )
        p.expect(is_windows(target) or exe.mode & 0o111 == 0o111, f"npm: {tarball.name}'s binary is executable")
    host = host_target()
    own = npm_dir / npm_tarball(version, npm_package_name(host)) if host else None
    if not own or not own.is_file() or not shutil.which("npm"):
        print(f"  note npm: no package for this machine ({host}) or no npm; not installed", file=sys.stderr)
        return
    tmp = Path(tempfile.mkdtemp(prefix="dist-npm-"))
    try:
        env = {**os.environ, "npm_config_cache": str(tmp / "cache"), "npm_config_update_notifier": "false",
               "npm_config_audit": "false", "npm_config_fund": "false"}
        project = tmp / "project"
        project.mkdir()
        (project / "package.json").write_text('{"private": true}\n')
        # --offline: the launcher's other platforms are optional and absent;
        # npm must take this one from its file, never from the registry.
        for where, extra in ((project, []), (tmp, ["-g", "--prefix", str(tmp / "global")])):
            done = subprocess.run(
                ["npm", "install", "--offline", *extra, str(own.resolve()), str(launcher.resolve())],
                cwd=where, env=env, capture_output=True, text=True, timeout=600,
            )
            p.expect(done.returncode == 0, f"npm: `npm install {' '.join(extra)}` from the tarballs, offline",
                     done.stderr[-1500:])
        run_installed("npm: npx crucible-agent", ["npx", "--offline", "--no-install", NAME], project, env, auth, p)
        bin_dir = tmp / "global" / ("" if platform.system() == "Windows" else "bin")
        run_installed("npm: the global install's crucible-agent", [str(bin_dir / NAME)], tmp, env, auth, p)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_wheels(dist: Path, version: str, targets: list, auth: str, p: Problems) -> None:
    """One wheel per archive, its RECORD true; the host's installed offline
    with pip into a venv and run with `uvx --from`."""
    wheel_dir = dist / "python"
    for target in targets:
        path = wheel_dir / wheel_name(version, target)
        if not p.expect(path.is_file(), f"wheel: {path.name} is in {wheel_dir}"):
            continue
        with zipfile.ZipFile(path) as z:
            info = f"{WHEEL_NAME}-{version}.dist-info"
            record = z.read(f"{info}/RECORD").decode().splitlines()
            bad = []
            for line in record:
                name, digest, size = line.rsplit(",", 2)
                if name.endswith("/RECORD"):
                    continue
                body = z.read(name)
                if digest != record_hash(body) or int(size) != len(body):
                    bad.append(name)
            p.expect(not bad and len(record) == len(z.namelist()), f"wheel: {path.name}'s RECORD matches", str(bad))
            script = z.getinfo(f"{WHEEL_NAME}-{version}.data/scripts/{binary_name(target)}")
            p.expect(is_windows(target) or (script.external_attr >> 16) & 0o111 == 0o111,
                     f"wheel: {path.name}'s script is executable")
            tags = [l.split(": ", 1)[1] for l in z.read(f"{info}/WHEEL").decode().splitlines() if l.startswith("Tag: ")]
            p.expect(tags == [f"py3-none-{t}" for t in WHEEL_PLATFORMS[target]], f"wheel: {path.name}'s tags", str(tags))
    host = host_target()
    own = wheel_dir / wheel_name(version, host) if host else None
    if not own or not own.is_file():
        print(f"  note wheel: none for this machine ({host}); not installed", file=sys.stderr)
        return
    tmp = Path(tempfile.mkdtemp(prefix="dist-wheel-"))
    try:
        venv = tmp / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        scripts = venv / ("Scripts" if platform.system() == "Windows" else "bin")
        done = subprocess.run(
            [str(scripts / "python"), "-m", "pip", "install", "--no-index", "--disable-pip-version-check", str(own)],
            capture_output=True, text=True, timeout=600,
        )
        if p.expect(done.returncode == 0, "wheel: `pip install` from the file, offline", done.stderr[-1500:]):
            run_installed("wheel: pip's crucible-agent", [str(scripts / NAME)], tmp, dict(os.environ), auth, p)
        uvx = Path(sys.executable).parent / "uvx"
        if not uvx.exists():
            p.fail("wheel: no uvx beside this Python (scripts/dist.sh check installs uv)")
            return
        env = {**os.environ, "UV_CACHE_DIR": str(tmp / "uv-cache"), "UV_TOOL_DIR": str(tmp / "uv-tools"),
               "UV_NO_PROGRESS": "1"}
        run_installed("wheel: uvx --from the wheel", [str(uvx), "--offline", "--from", str(own.resolve()), NAME],
                      tmp, env, auth, p)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_launcher_tests(p: Problems) -> None:
    """The npm launcher's own tests: arguments, exit codes, signals."""
    if platform.system() == "Windows" or not shutil.which("node"):
        print("  note npm launcher tests: need node on a Unix; not run", file=sys.stderr)
        return
    done = subprocess.run(["node", "--test", str(NPM_LAUNCHER.parent)], capture_output=True, text=True, timeout=600)
    p.expect(done.returncode == 0, "npm launcher: node --test (arguments, stdio, exit code, SIGTERM)",
             (done.stdout + done.stderr)[-2000:])


def check_workflows(p: Problems) -> None:
    """.github/workflows/*.yml against the GitHub workflow schema (check-jsonschema's copy: offline)."""
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    if not p.expect(bool(workflows), "workflows: .github/workflows/*.yml exist"):
        return
    tool = Path(sys.executable).parent / "check-jsonschema"
    if not tool.exists():
        p.fail("workflows: no check-jsonschema beside this Python (scripts/dist.sh check installs it)")
        return
    done = subprocess.run(
        [str(tool), "--builtin-schema", "vendor.github-workflows", *map(str, workflows)],
        capture_output=True, text=True,
    )
    p.expect(done.returncode == 0, f"workflows: {', '.join(w.name for w in workflows)} match the GitHub workflow schema",
             (done.stdout + done.stderr)[-2000:])


def smoke(args) -> None:
    """`--version` and the registry's initialize against one binary, on the
    machine that built it (the release workflow runs this on each runner)."""
    p = Problems()
    exe = Path(args.binary).resolve()
    home = Path(tempfile.mkdtemp(prefix="dist-home-"))
    try:
        run_installed(f"{args.binary}", [str(exe)], home, isolated_env(home), args.auth, p)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if p.errors:
        sys.exit(f"dist smoke: {len(p.errors)} problem(s)")
    print("dist smoke: OK", file=sys.stderr)


def check(args) -> None:
    dist = Path(args.dist)
    p = Problems()
    print(f"dist check: {dist}", file=sys.stderr)
    manifest_path = dist / "agent.json"
    if not manifest_path.is_file():
        sys.exit(f"dist check: no {manifest_path}; run `make dist` first")
    entry = json.loads(manifest_path.read_text())
    check_schema(entry, p)
    check_rules(entry, args.version, p)
    check_icon(dist / "icon.svg", p)
    p.expect(
        (dist / "icon.svg").read_bytes() == (ROOT / "assets" / "icon.svg").read_bytes(),
        "icon.svg is assets/icon.svg",
    )
    binary = entry.get("distribution", {}).get("binary", {})
    p.expect(
        set(built_archives(dist, args.version)) == set(binary),
        "agent.json lists every archive of this version in dist/",
        f"archives {sorted(built_archives(dist, args.version))}, listed {sorted(binary)}",
    )
    for target, spec in binary.items():
        extracted = check_archive(dist, target, spec, p)
        if extracted is None:
            continue
        try:
            if target == "linux-aarch64":
                check_linux_aarch64(target, extracted, args.auth, p)
            elif target.startswith("linux-"):
                check_linux(target, extracted, args.auth, p)
            elif is_windows(target) and args.wine:
                check_windows(target, extracted, args.auth, p)
        finally:
            shutil.rmtree(extracted, ignore_errors=True)
    check_npm(dist, args.version, sorted(binary), args.auth, p)
    check_wheels(dist, args.version, sorted(binary), args.auth, p)
    check_launcher_tests(p)
    check_workflows(p)
    if p.errors:
        sys.exit(f"dist check: {len(p.errors)} problem(s)")
    print("dist check: OK", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("pack")
    a.add_argument("--dist", required=True)
    a.add_argument("--version", required=True)
    a.add_argument("--target", required=True, choices=TARGETS)
    a.add_argument("--binary", required=True)
    a.add_argument("files", nargs="*")
    a.set_defaults(run=pack)
    m = sub.add_parser("manifest")
    for flag in ("--dist", "--version", "--repository", "--base-url", "--description", "--license"):
        m.add_argument(flag, required=True)
    m.set_defaults(run=manifest)
    for command, run, about in (
        ("npm", npm, "an npm package: --target's binary, or without --target the launcher"),
        ("wheel", wheel, "a Python wheel with --target's binary as its script"),
    ):
        n = sub.add_parser(command, help=about)
        for flag in ("--dist", "--version", "--repository", "--description", "--license"):
            n.add_argument(flag, required=True)
        n.add_argument("--target", choices=TARGETS, required=command == "wheel")
        n.add_argument("--binary", required=command == "wheel")
        n.set_defaults(run=run)
    sm = sub.add_parser("smoke", help="--version and initialize against one binary")
    sm.add_argument("--binary", required=True)
    sm.add_argument("--auth", choices=("require", "warn"), default="require")
    sm.set_defaults(run=smoke)
    c = sub.add_parser("check")
    c.add_argument("--dist", required=True)
    c.add_argument("--version", required=True)
    c.add_argument("--wine", action="store_true", help="also run the Windows binary under Wine")
    c.add_argument("--auth", choices=("require", "warn"), default="require")
    c.set_defaults(run=check)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
