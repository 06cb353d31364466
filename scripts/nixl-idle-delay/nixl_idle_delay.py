"""Gives the NIXL agent's progress thread an idle delay, in every Python process of vLLM's virtualenv.

NIXL's Python wrapper (nixl_cu12/nixl_cu13 `_api.nixl_agent.__init__`) builds its agent config with
`pthrDelay = 0`, so the UCX progress thread of each idle vLLM worker polls without pause and takes ~95 % of
a core; two servers on a 2-core machine take both cores. vLLM has no setting for it. scripts/install-test-tools
copies this module into the virtualenv with a `.pth` line that calls install() at interpreter start (the
API server, EngineCore and worker processes alike): when NIXL's `_api` module is imported, its binding
module is wrapped so that an agent config still at 0 gets NIXL_PTHR_DELAY_US microseconds (default 1000)
just before the agent is created. Nothing else changes, and nothing is imported before NIXL itself is.
"""
import importlib.abc
import importlib.machinery
import os
import sys

_API_MODULES = {"nixl_cu12._api", "nixl_cu13._api", "nixl_rocm._api"}


def _delay_us():
    return int(os.environ.get("NIXL_PTHR_DELAY_US", "1000"))


class _Bindings:
    """NIXL's binding module, with nixlAgent setting the progress-thread delay first."""

    def __init__(self, bindings):
        self._bindings = bindings

    def __getattr__(self, name):
        return getattr(self._bindings, name)

    def nixlAgent(self, name, config, *args, **kwargs):  # noqa: N802 (the binding's name)
        if config.pthrDelay == 0:
            config.pthrDelay = _delay_us()
            sys.stderr.write("nixl_idle_delay: NIXL agent progress-thread delay %d us\n" % config.pthrDelay)
        return self._bindings.nixlAgent(name, config, *args, **kwargs)


class _Loader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        module.nixlBind = _Bindings(module.nixlBind)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in _API_MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def install():
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
