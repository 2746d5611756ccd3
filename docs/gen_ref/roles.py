"""A griffe extension (mkdocs.yml, the python handler's extensions): the docstrings' Sphinx roles
(:class:`Guarantee`, :func:`~qstr.constructions.mlp.make_mlp`) become links to the reference's
entry where the name resolves to a documented object, and code otherwise."""

import re

import griffe

ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj):`(~?)([^`]+)`")

# Modules the reference shows (docs/gen_ref/reference.py): the three packages, less the claim
# modules under qstr.verify.claims (their package page only).
_DOCUMENTED = re.compile(r"qstr\.(constructions|bounds|verify)(\.|$)")
_UNDOCUMENTED = re.compile(r"qstr\.verify\.claims\.")


def link_target(obj: griffe.Object, name: str) -> str | None:
    """The reference entry (dotted path) that ``name``, as written in ``obj``'s docstring, names;
    None where it does not resolve to a public object the reference shows."""
    try:
        path = name if name.startswith("qstr.") else obj.resolve(name)
    except (griffe.NameResolutionError, ValueError):
        return None
    documented = _DOCUMENTED.match(path) and not _UNDOCUMENTED.match(path)
    if not documented or any(part.startswith("_") for part in path.split(".")):
        return None
    try:
        target = obj.modules_collection[path]
    except KeyError:
        return None
    return path if not target.is_alias else None


def with_links(obj: griffe.Object, text: str) -> str:
    """``text`` with each role a link to its reference entry, or code where there is none."""

    def replace(match: re.Match) -> str:
        short, name = match.groups()
        shown = name.rsplit(".", 1)[-1] if short else name
        target = link_target(obj, name)
        return f"[`{shown}`][{target}]" if target else f"`{shown}`"

    return ROLE.sub(replace, text)


class SphinxRoles(griffe.Extension):
    """Rewrites the roles of every docstring once the object tree is complete."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = with_links(obj, obj.docstring.value)
