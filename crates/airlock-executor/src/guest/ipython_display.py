"""airlock's stand-in for `IPython.display`, served only when IPython is not installed in the
sandbox: `display()` and the rich-output classes notebook code uses. Each class offers the
`_repr_*_` method of its media type; the airlock kernel's `display` turns it into rich output."""
import builtins
import os

__all__ = ["display", "clear_output", "DisplayObject", "HTML", "Markdown", "Latex", "SVG",
           "JSON", "Image"]


def display(*objs, **kwargs):
    """Show each object as rich output (in a stateful sandbox), else print its repr."""
    show = getattr(builtins, "display", None)
    if show is not None and show is not display:
        return show(*objs, **kwargs)
    for obj in objs:
        print(repr(obj))
    return None


def clear_output(wait=False):
    """Nothing to clear: each run's output is returned whole."""


class DisplayObject:
    """Data to show, given as `data`, read from `filename`, or pointing at `url`."""

    _binary = False

    def __init__(self, data=None, url=None, filename=None, metadata=None):
        if isinstance(data, str) and filename is None and url is None:
            if data.startswith(("http://", "https://")):
                data, url = None, data
            elif len(data) < 4096 and "\n" not in data and os.path.isfile(data):
                data, filename = None, data
        if filename is not None:
            with open(filename, "rb" if self._binary else "r") as f:
                data = f.read()
        self.data, self.url, self.filename, self.metadata = data, url, filename, metadata

    def __repr__(self):
        return "<IPython.core.display.%s object>" % type(self).__name__

    def _text(self):
        data = self.data
        if isinstance(data, bytes):
            data = data.decode("utf-8", "replace")
        return data if data is not None else ""


class HTML(DisplayObject):
    def _repr_html_(self):
        if self.data is None and self.url is not None:
            return '<iframe src="%s"></iframe>' % self.url
        return self._text()


class Markdown(DisplayObject):
    def _repr_markdown_(self):
        return self._text()


class Latex(DisplayObject):
    def _repr_latex_(self):
        return self._text()


class SVG(DisplayObject):
    def _repr_svg_(self):
        return self._text()


class JSON(DisplayObject):
    def __init__(self, data=None, url=None, filename=None, expanded=False, metadata=None,
                 root="root", **kwargs):
        super().__init__(data, url, filename, metadata)
        if isinstance(self.data, (str, bytes)):
            import json

            self.data = json.loads(self.data)
        self.expanded, self.root = expanded, root

    def _repr_json_(self):
        return self.data


class Image(DisplayObject):
    """A PNG or JPEG image (its format from `format`, the file's extension or its bytes)."""

    _binary = True

    def __init__(self, data=None, url=None, filename=None, format=None, embed=None, width=None,
                 height=None, retina=False, unconfined=False, metadata=None, alt=None):
        super().__init__(data, url, filename, metadata)
        if format is None and filename:
            format = filename.rsplit(".", 1)[-1]
        if format is None and isinstance(self.data, bytes):
            format = "png" if self.data.startswith(b"\x89PNG") else (
                "jpeg" if self.data.startswith(b"\xff\xd8") else None)
        self.format = {"jpg": "jpeg"}.get(str(format).lower(), str(format).lower())
        self.width, self.height, self.alt = width, height, alt

    def _repr_png_(self):
        return self.data if self.format == "png" and isinstance(self.data, bytes) else None

    def _repr_jpeg_(self):
        return self.data if self.format == "jpeg" and isinstance(self.data, bytes) else None

    def _repr_html_(self):
        if self.data is None and self.url is not None:
            return '<img src="%s"/>' % self.url
        return None
