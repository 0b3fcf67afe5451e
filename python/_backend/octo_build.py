"""octo_build - the Python package's PEP 517 build backend, in the standard library alone.

`pip install ./python` then needs nothing from a package index, not even setuptools or wheel: any
CPython >= 3.9 with pip installs it (Debian's, pyenv's, a venv without system site packages). The
wheel carries libocto.so.0 beside the modules, so `import octo` finds the library with no
environment variable. The library is, in this order:
  1. $OCTO_LIBRARY, a libocto.so to bundle as it is;
  2. the repository's build/lib/libocto.so.0 (the README's build), when it is newer than every
     file under src/ and include/;
  3. else built from the repository with cmake, in a temporary folder.
Nothing is written in the source tree: the wheel goes where pip asks, the build to a temporary
folder, and the bytecode cache Python writes when pip imports this file is removed.
"""
import base64
import hashlib
import io
import os
import shutil
import subprocess
import sysconfig
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
REPO = os.path.dirname(HERE)
NAME = "octo"
LIBRARY = "libocto.so.0"
MODEL_FILES = ("stories260K.gguf", "LICENSE", "README.md")  # the embedded model and its licence
STAMP = (2026, 1, 1, 0, 0, 0)  # every entry's date: the same sources make the same wheel


def _version():
    scope = {}
    with open(os.path.join(HERE, NAME, "_version.py")) as f:
        exec(f.read(), scope)
    return scope["__version__"]


def _metadata():
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
            "Summary: Python binding of octo, an on-device LLM inference runtime (ctypes over libocto.so)\n"
            "License: MIT\nRequires-Python: >=3.9\nDescription-Content-Type: text/markdown\n\n%s"
            % (NAME, _version(), readme))


def _tag():
    return "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _sources_newest():
    newest = 0.0
    for top in ("src", "include"):
        for d, _, names in os.walk(os.path.join(REPO, top)):
            newest = max([newest] + [os.path.getmtime(os.path.join(d, n)) for n in names])
    return newest


def _library(tmp):
    """The path of the libocto.so to bundle."""
    given = os.environ.get("OCTO_LIBRARY")
    if given:
        if not os.path.isfile(given):
            raise RuntimeError("OCTO_LIBRARY=%s: no such file" % given)
        return given
    if not os.path.isfile(os.path.join(REPO, "CMakeLists.txt")):
        raise RuntimeError("octo's sources are not beside %s (a copied package?): set OCTO_LIBRARY to a "
                           "libocto.so to bundle" % HERE)
    built = os.path.join(REPO, "build", "lib", LIBRARY)
    if os.path.isfile(built) and os.path.getmtime(built) >= _sources_newest():
        return built
    out = os.path.join(tmp, "cmake")
    for cmd in (["cmake", "-S", REPO, "-B", out, "-DCMAKE_BUILD_TYPE=Release", "-DOCTO_BUILD_TESTS=OFF",
                 "-DOCTO_INSTALL=OFF"],
                ["cmake", "--build", out, "-j", str(os.cpu_count() or 2), "--target", "octo_shared"]):
        try:
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        except (OSError, subprocess.CalledProcessError) as e:
            raise RuntimeError("building libocto.so failed (%s): the README's build needs cmake and a C "
                               "compiler (scripts/setup.sh)" % e) from None
    return os.path.join(out, "lib", LIBRARY)


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arc, digest, len(data))


def _dist_info(files):
    dist = "%s-%s.dist-info" % (NAME, _version())
    files[dist + "/METADATA"] = _metadata().encode()
    files[dist + "/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: octo_build\nRoot-Is-Purelib: false\nTag: %s\n"
                              % _tag()).encode()
    files[dist + "/top_level.txt"] = b"octo\n"
    lic = os.path.join(REPO, "LICENSE")
    if os.path.isfile(lic):
        with open(lic, "rb") as f:
            files[dist + "/LICENSE"] = f.read()
    return dist


def _models_dir():
    """models/ of the repository (a checkout), else of the sdist; None when neither has the model."""
    for d in (os.path.join(REPO, "models"), os.path.join(HERE, "models")):
        if os.path.isfile(os.path.join(d, MODEL_FILES[0])):
            return d
    return None


def _forget_bytecode():
    shutil.rmtree(os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__"), ignore_errors=True)


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    files = {}
    dist = _dist_info(files)
    for arc, data in files.items():
        path = os.path.join(metadata_directory, arc)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    _forget_bytecode()
    return dist


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {}
    pkg = os.path.join(HERE, NAME)
    for n in sorted(os.listdir(pkg)):
        if n.endswith(".py"):
            with open(os.path.join(pkg, n), "rb") as f:
                files["%s/%s" % (NAME, n)] = f.read()
    with tempfile.TemporaryDirectory(prefix="octo-build-") as tmp:
        with open(_library(tmp), "rb") as f:
            files["%s/%s" % (NAME, LIBRARY)] = f.read()
    models = _models_dir()
    for n in MODEL_FILES if models else ():  # octo.Model() without a path loads it (octo.EMBEDDED_MODEL)
        with open(os.path.join(models, n), "rb") as f:
            files["%s/models/%s" % (NAME, n)] = f.read()
    dist = _dist_info(files)
    record = [_record_line(arc, data) for arc, data in files.items()] + [dist + "/RECORD,,"]
    files[dist + "/RECORD"] = ("\n".join(record) + "\n").encode()
    name = "%s-%s-%s.whl" % (NAME, _version(), _tag())
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files.items():
            info = zipfile.ZipInfo(arc, STAMP)
            info.external_attr = (0o755 if arc.endswith(LIBRARY) else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    _forget_bytecode()
    return name


def build_sdist(sdist_directory, config_settings=None):
    """The package's sources (the library is found or built when the wheel is made)."""
    base = "%s-%s" % (NAME, _version())
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ("pyproject.toml", "README.md", "_backend/octo_build.py") + tuple(
                "%s/%s" % (NAME, n) for n in sorted(os.listdir(os.path.join(HERE, NAME))) if n.endswith(".py")):
            t.add(os.path.join(HERE, rel), arcname="%s/%s" % (base, rel))
        models = _models_dir()
        for n in MODEL_FILES if models else ():
            t.add(os.path.join(models, n), arcname="%s/models/%s" % (base, n))
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    _forget_bytecode()
    return name
