"""Not part of the installed package: this file makes a kaio source checkout importable as
``kaio`` when Python finds the checkout folder itself under that name.

That happens when a clone lives in a folder named ``kaio`` and a script next to it runs
``import kaio``: the script's folder comes first on ``sys.path``, so Python takes the clone folder
for the package, ahead of the installed (or editable) one. Without this file the folder would be
an empty namespace package ("cannot import name 'f32' from 'kaio' (unknown location)"). With it,
the folder maps itself the way pyproject.toml maps the installed package: ``kaio`` is kaio_core/,
and ``kaio.backends``, ``kaio.regions``, ``kaio.kernels``, ``kaio.conformance`` are the folders of
those names.
"""
import os as _os

_root = _os.path.dirname(_os.path.abspath(__file__))
_core = _os.path.join(_root, "kaio_core", "__init__.py")
if __name__ == "kaio" and _os.path.isfile(_core):
    __path__ = [_os.path.join(_root, "kaio_core"), _root]
    __file__ = _core
    with open(_core, encoding="utf-8") as _f:
        exec(compile(_f.read(), _core, "exec"))
