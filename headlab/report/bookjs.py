"""The JavaScript the static book ships, so that its pages need no network.

Each file comes from a PyPI package at a pinned version and is checked against a pinned sha256 before the build
writes it to ``<book>/_extra/headlab-js/``. Sphinx's ``html_extra_path`` copies that folder to the site root
(not to ``_static/``, whose .js files jupyter-book adds to every page). A page loads the files it needs relative
to the ``data-content_root`` attribute Sphinx puts on ``<html>``, so the site works from any folder and from
``file://``. No page loads require.js: every file below sets a plain global (``vegaEmbed``, ``d3``, ``jQuery``).
Live in JupyterLab, which serves no such files, :func:`inline_scripts` puts a file's text into the output itself.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from headlab.inputs.assets import Asset
from headlab.inputs.assets import install as install_asset

JS_DIR = "headlab-js"


@dataclass(frozen=True)
class Script:
    """A JavaScript file the book ships: where the site serves it, its hash, and the PyPI file that carries it."""

    path: str  # where the site serves it, relative to the site root
    sha256: str  # of the file as written
    source: Asset  # the pinned PyPI file that carries it


D3 = Script(
    f"{JS_DIR}/d3.v5.min.js",
    "bdad5585ef9a965ff25458738309b006058c55f2c78d794d25fbecae35014609",
    Asset(
        "js-d3",
        "mpld3==0.5.12",
        "mpld3-0.5.12-py3-none-any.whl",
        "bea31799a4041029a906f53f2662bbf1c49903e0c0bc712b412354158ec7cf54",
        "mpld3/js/d3.v5.min.js",
        True,
        "d3 v5.7.0 (ISC), the version bertviz asks for, via PyPI mpld3 (BSD)",
    ),
)
JQUERY = Script(
    f"{JS_DIR}/jquery.min.js",
    "ff1523fb7389539c84c65aba19260648793bb4f5e29329d2ee8804bc37a3fe6e",
    Asset(
        "js-jquery",
        "sphinxcontrib-jquery==4.1",
        "sphinxcontrib_jquery-4.1-py2.py3-none-any.whl",
        "f936030d7d0147dd026a4f2b5a57343d233f1fc7b363f68b3d4f1cb0993878ae",
        "sphinxcontrib/jquery/jquery.js",
        True,
        "jQuery v3.6.0 (MIT), via PyPI sphinxcontrib-jquery",
    ),
)
MATHJAX = Script(
    f"{JS_DIR}/mathjax/tex-svg-full.js",
    "a4354ff94fd868aea0cc6eaaa79a57fda0588646fc46ee3700a349ee0a11cbe6",
    Asset(
        "js-mathjax",
        "sphinx-mathjax-offline==0.0.2",
        "sphinx_mathjax_offline-0.0.2-py3-none-any.whl",
        "206418155b2ff2f57496fb8501fdccae3da978e53031ff296c73729ba16062c4",
        "sphinx-mathjax-offline/static/mathjax/tex-svg-full.js",
        True,
        "MathJax 3.2.2 (Apache-2.0), one file with every TeX extension and its SVG fonts, "
        "via PyPI sphinx-mathjax-offline",
    ),
)

# Vega, Vega-Lite and vega-embed are bundled by vl-convert-python (a dependency), not unpacked from a file.
VEGA_PATH = f"{JS_DIR}/vega-embed.js"
VEGA_LITE = "6.4"  # the Vega-Lite the bundle carries: the schema Altair writes (tests check they agree)
VEGA_CONVERT = "1.9.0"  # vl-convert-python's version, whose bundle has this hash
VEGA_SHA256 = "3425bd951a44d478d0505c6b5d1e8d57656b6e9a4da7bfe88a718ce61d76e572"


class ScriptError(RuntimeError):
    """A shipped JavaScript file does not match its pin."""


@functools.cache  # seconds of CPU, and the pin makes every call's bundle the same: made once per process
def vega_bundle() -> str:
    """Vega-Embed with Vega and Vega-Lite, wrapped in a function so that its top-level names stay private.

    The bundle is an ES module flattened into one script; loaded as is, its ``const`` names collide with other
    scripts on the page. Its only exports are the globals it assigns (``window.vegaEmbed`` ...).
    """
    import vl_convert

    bundle = vl_convert.javascript_bundle(vl_version=f"v{VEGA_LITE}")
    digest = hashlib.sha256(bundle.encode()).hexdigest()
    if digest != VEGA_SHA256:
        raise ScriptError(
            f"vl-convert-python {vl_convert.__version__} made a Vega bundle with sha256 {digest}; "
            f"the book pins vl-convert-python {VEGA_CONVERT} (sha256 {VEGA_SHA256}): install that "
            f"version, or check the new bundle and update the pin in headlab/report/bookjs.py"
        )
    return "(function () {\n" + bundle + "\n})();\n"


def script_file(script: Script) -> Path:
    """The shipped file in the cache, fetched first if it is not there, checked against its pin."""
    source = install_asset(script.source) / Path(script.source.members).name
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    if digest != script.sha256:
        raise ScriptError(f"{source} has sha256 {digest}, expected {script.sha256} ({script.source.note})")
    return source


def write_scripts(extra_dir: Path) -> list[Path]:
    """Fetch (cached), verify and write every shipped file under ``extra_dir``; return the written paths."""
    written = []
    for script in (D3, JQUERY, MATHJAX):
        target = Path(extra_dir) / script.path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(script_file(script), target)
        written.append(target)
    target = Path(extra_dir) / VEGA_PATH
    target.write_text(vega_bundle(), encoding="utf-8")
    return written + [target]


# Defines window.headlabLoad(paths): load shipped files in order, each once per page, relative to the site root.
_LOADER = """window.headlabLoad = window.headlabLoad || (function () {
  var loading = {};
  function one(path) {
    if (!loading[path]) loading[path] = new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = (document.documentElement.getAttribute("data-content_root") || "") + path;
      s.onload = resolve;
      s.onerror = function () { reject(new Error("could not load " + path)); };
      document.head.appendChild(s);
    });
    return loading[path];
  }
  return function (paths) {
    return paths.reduce(function (done, path) { return done.then(function () { return one(path); }); },
                        Promise.resolve());
  };
})();"""


def after_loading(paths: list[str], code: str) -> str:
    """A ``<script>`` element that runs ``code`` once the shipped files ``paths`` have loaded.

    ``code`` is the body of a function; a failure to load shows in the browser console.
    """
    return (
        f"<script>\n{_LOADER}\nwindow.headlabLoad({json.dumps(paths)}).then(function () {{\n{code}\n}})"
        f".catch(function (err) {{ console.error(err); }});\n</script>"
    )


def inline_scripts(scripts: list[Script], code: str) -> str:
    """Like :func:`after_loading` where no site serves the files (a JupyterLab output): their text goes inline.

    An output's scripts run in order when it is shown, so ``code`` (the body of a function) finds them loaded.
    The pinned files contain no ``</script``.
    """
    files = "".join(f"<script>\n{script_file(s).read_text(encoding='utf-8')}\n</script>\n" for s in scripts)
    return f"{files}<script>\n(function () {{\n{code}\n}})();\n</script>"


def fetch_scripts() -> None:
    """`make assets`: fetch the shipped files while the network is there (cached), printing where each lies."""
    for script in (D3, JQUERY, MATHJAX):
        print(script_file(script))
