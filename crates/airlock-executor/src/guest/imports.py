
# --- What imports find (appended to bootstrap.py; `main` installs it before the program) ------
# Two things, both only on the first import of a name: matplotlib keeps its config and cache in
# /tmp, not in the program's working directory (/work) or $HOME (unless MPLCONFIGDIR says
# otherwise); and `IPython.display` is airlock's stand-in (guest/ipython_display.py, the text
# in _IPYTHON_DISPLAY) when no real IPython can be imported, so notebook code runs unchanged;
# in a stateful kernel, a real IPython's `display` is routed to the kernel's.
MPL_DIR = "/tmp/matplotlib"
_SHIMMED = ("IPython", "IPython.display", "IPython.core", "IPython.core.display")


class _GuestFinder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "matplotlib":
            os.environ.setdefault("MPLCONFIGDIR", MPL_DIR)
        elif name in _SHIMMED and cls._shim_wanted(name, path):
            spec = sys.modules["_frozen_importlib"].ModuleSpec
            return spec(name, cls, is_package=name in ("IPython", "IPython.core"))
        elif name == "IPython.core.display_functions" and _kernel_display():
            return cls._routed(name, path)
        return None

    @staticmethod
    def _routed(name, path):
        """A real IPython's `display` (which prints a repr outside an IPython shell) shows its
        objects through the kernel's, as a notebook would."""
        spec = sys.modules["_frozen_importlib_external"].PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        run = getattr(loader, "exec_module", None)
        if run is None:
            return spec

        class Routed:
            def __getattr__(self, attr):
                return getattr(loader, attr)

            def exec_module(self, module):
                run(module)
                module.display = builtins.display

        spec.loader = Routed()
        return spec

    @classmethod
    def _shim_wanted(cls, name, path):
        if name != "IPython":  # a submodule: of our stand-in only
            return getattr(sys.modules.get("IPython"), "__airlock_shim__", False)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is not cls and find is not None and find(name, path) is not None:
                return False  # a real IPython: never shadowed
        return True

    @staticmethod
    def create_module(spec):
        return None

    @staticmethod
    def exec_module(module):
        name = module.__name__
        module.__airlock_shim__ = True
        if name == "IPython":
            module.get_ipython = lambda: None
            __import__("IPython.display")
            module.display = sys.modules["IPython.display"]
        elif name == "IPython.core":
            __import__("IPython.core.display")
            module.display = sys.modules["IPython.core.display"]
        elif name == "IPython.display":
            exec(compile(_IPYTHON_DISPLAY, "<airlock IPython.display>", "exec"), module.__dict__)
        else:  # IPython.core.display: the same objects
            __import__("IPython.display")
            shown = sys.modules["IPython.display"]
            module.__dict__.update({k: v for k, v in vars(shown).items() if not k.startswith("__")})


def _kernel_display():
    return getattr(builtins, "display", None) is _display


def _install_finder():
    if _GuestFinder not in sys.meta_path:
        sys.meta_path.insert(0, _GuestFinder)
